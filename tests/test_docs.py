"""The reference pages stay true to the code they describe."""

from __future__ import annotations

import re
from pathlib import Path

from common.config import settings_env_names

REPO = Path(__file__).resolve().parents[1]


def test_the_configuration_page_names_every_setting_and_nothing_else() -> None:
    page = (REPO / "docs" / "configuration.md").read_text()
    named = set(re.findall(r"`((?:RAGU|DATABASE)_[A-Z0-9_]+)`", page))
    settings = settings_env_names()
    assert settings - named == set(), "settings missing from docs/configuration.md"
    unknown = {n for n in named if n.startswith("RAGU_")} - settings
    assert unknown == set(), "docs/configuration.md names settings that do not exist"
