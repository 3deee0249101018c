"""Originals live in a content-addressed store: ``<root>/<sha[:2]>/<sha[2:4]>/<sha>``.

The only path component ever derived from a request is the SHA-256 hex digest we compute ourselves,
so no user-controlled name can reach the file system. Writes go to a temporary file in the target
folder and are renamed into place, so a crash never leaves a partial blob under a valid name.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path

_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class BlobStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path_for(self, sha256: str) -> Path:
        if not _SHA256_HEX.fullmatch(sha256):
            raise ValueError("not a SHA-256 hex digest")
        return self.root / sha256[:2] / sha256[2:4] / sha256

    def put(self, data: bytes) -> str:
        """Store ``data`` (idempotent) and return its digest."""
        digest = sha256_hex(data)
        target = self.path_for(digest)
        if target.exists():
            return digest
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".incoming-")
        try:
            with os.fdopen(fd, "wb") as out:
                out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, target)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return digest

    def get(self, sha256: str) -> bytes:
        return self.path_for(sha256).read_bytes()

    def exists(self, sha256: str) -> bool:
        return self.path_for(sha256).exists()

    def delete(self, sha256: str) -> None:
        self.path_for(sha256).unlink(missing_ok=True)

    def digests(self) -> set[str]:
        """Every stored digest (for garbage collection of blobs whose document row is gone)."""
        return {p.name for p in self.root.glob("??/??/*") if _SHA256_HEX.fullmatch(p.name)}
