"""Which data directory ``ragu serve`` starts on: a new one says so in one line with its absolute path, an existing
one says nothing, and a new one inside another platform's data directory is refused with nothing created."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from common.auth import dev_secret
from common.config import load_settings
from common.errors import Conflict
from ragu.bootstrap import claim_data_dir


def _announced(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "new data directory" in r.getMessage()]


def test_a_new_data_directory_is_announced_once_with_its_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.chdir(tmp_path)
    settings = load_settings({})  # the default: .ragu in the current folder
    caplog.set_level(logging.INFO, logger="ragu.bootstrap")
    claim_data_dir(settings)
    [line] = _announced(caplog)
    assert line.startswith(f"new data directory {tmp_path / '.ragu'} (no platform was there")
    assert "\n" not in line
    assert (tmp_path / ".ragu").is_dir()
    caplog.clear()
    claim_data_dir(settings)  # the next start, on what the first one made
    assert _announced(caplog) == []


def test_a_data_directory_that_ragu_serve_used_before_is_not_announced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings = load_settings({}, data_dir=str(tmp_path / ".ragu"))
    dev_secret(settings)  # what a first start left there
    caplog.set_level(logging.INFO, logger="ragu.bootstrap")
    claim_data_dir(settings)
    assert _announced(caplog) == []


def test_an_empty_folder_made_for_the_data_is_a_new_data_directory(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A folder made beforehand (a container's volume, ``mkdir``) holds no platform yet: it is announced, once."""
    (tmp_path / "data").mkdir()
    settings = load_settings({}, data_dir=str(tmp_path / "data"))
    caplog.set_level(logging.INFO, logger="ragu.bootstrap")
    claim_data_dir(settings)
    assert len(_announced(caplog)) == 1
    caplog.clear()
    claim_data_dir(settings)  # a platform with external storage leaves nothing else in it: still not new
    assert _announced(caplog) == []


@pytest.mark.parametrize("inside", [".ragu", "documents/.ragu", "auth"])
def test_a_new_data_directory_inside_another_platforms_is_refused_and_nothing_is_created(
    tmp_path: Path, inside: str
) -> None:
    platform = tmp_path / "project" / ".ragu"
    dev_secret(load_settings({}, data_dir=str(platform)))
    before = sorted(platform.rglob("*"))
    with pytest.raises(Conflict) as refused:
        claim_data_dir(load_settings({}, data_dir=str(platform / inside)))
    assert refused.value.code == "data_dir_inside_data_dir"
    assert f"{platform / inside}" in refused.value.detail
    assert f"RAGU_DATA_DIR={platform}" in refused.value.detail
    assert sorted(platform.rglob("*")) == before, "nothing was created"


def test_an_existing_data_directory_inside_another_keeps_working(tmp_path: Path) -> None:
    """Only making a new one there is refused: a platform that already lives there (made before this check) starts."""
    outer = tmp_path / ".ragu"
    dev_secret(load_settings({}, data_dir=str(outer)))
    dev_secret(load_settings({}, data_dir=str(outer / ".ragu")))
    claim_data_dir(load_settings({}, data_dir=str(outer / ".ragu")))
