"""Group names an admin could not tell apart on screen are refused where they are stored (issue #26's note)."""

from __future__ import annotations

import pytest

from common.errors import InvalidInput
from common.groups import check_groups


@pytest.mark.parametrize(
    "group",
    [
        pytest.param("\u202ehr", id="right-to-left-override"),
        pytest.param("h\u200br", id="zero-width-space"),
        pytest.param("hr\u200d", id="zero-width-joiner"),
        pytest.param("\u2066hr\u2069", id="isolate-controls"),
        pytest.param("h\x7fr", id="delete"),
        pytest.param("le\tgal", id="tab"),
        pytest.param(" hr", id="leading-space"),
    ],
)
def test_a_group_name_with_invisible_characters_is_refused(group: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        check_groups(["legal", group])
    assert refused.value.code == "invalid_group"


@pytest.mark.parametrize("group", ["hr", "Ärzte", "財務", "r&d team", "שיווק", "финансы"])
def test_visible_names_in_any_script_are_kept(group: str) -> None:
    assert check_groups([group, group]) == [group]
