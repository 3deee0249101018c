"""The generated files are what ``tests/ragu_client/generate.py`` writes today: the models from both services'
OpenAPI documents, the sync clients from the async ones. Stale after a change of either service's API or of
``_async.py``: run ``.venv/bin/python -m tests.ragu_client.generate``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ragu_client import generate


@pytest.mark.parametrize("path", ["ragu_client/models.py", "ragu_client/_sync.py"])
def test_a_generated_file_is_up_to_date(tmp_path: Path, path: str) -> None:
    fresh = tmp_path / path
    fresh.parent.mkdir(parents=True, exist_ok=True)
    fresh.write_text(generate.generated(generate.documents())[path])
    committed = generate.ROOT / path
    assert committed.read_text() == fresh.read_text(), f"{path} is stale: run python -m tests.ragu_client.generate"
