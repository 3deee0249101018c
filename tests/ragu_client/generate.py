"""Writes the client's generated code; ``tests/ragu_client/test_generated.py`` fails when it is stale.

- ``ragu_client/models.py``, between its ``BEGIN GENERATED`` and ``END GENERATED`` lines: one msgspec Struct per
  component of both services' OpenAPI documents, with every property, its type, whether it is required and its
  default, so the client's models equal the server's.
- ``ragu_client/_sync.py``: the synchronous clients, rewritten from the asynchronous ones in
  ``ragu_client/_async.py`` (``async``/``await`` removed, the async types replaced by their sync twins), so both
  have the same methods.

Run ``.venv/bin/python -m tests.ragu_client.generate`` after a change of either service's API or of ``_async.py``.
"""

from __future__ import annotations

import json
import keyword
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "ragu_client" / "models.py"
ASYNC = ROOT / "ragu_client" / "_async.py"
SYNC = ROOT / "ragu_client" / "_sync.py"
BEGIN = "# BEGIN GENERATED from both services' OpenAPI components by tests/ragu_client/generate.py: do not edit\n"
END = "# END GENERATED\n"

Doc = dict[str, Any]

SKIPPED = {"UploadForm": "the upload's multipart form: the client sends files, not this JSON"}
EXTRAS = {
    "Job": (
        "\n\n    @property\n"
        "    def finished(self) -> bool:\n"
        '        """Done, failed or cancelled: nothing more will change."""\n'
        '        return self.status in ("done", "failed", "cancelled")'
    ),
}
"""Members of a generated Struct beyond its fields."""


def documents() -> dict[str, Doc]:
    from chonkit.app import create_app as create_chonkit
    from common.config import load_settings
    from kappi.app import create_app as create_kappi

    with tempfile.TemporaryDirectory() as folder:
        settings = load_settings({}, data_dir=folder, auth_hs256_secret="openapi-models-secret-0123456789abcdef")
        return {
            "kappi": create_kappi(settings).openapi_schema.to_schema(),
            "chonkit": create_chonkit(settings).openapi_schema.to_schema(),
        }


ELSEWHERE = {
    "/v1/": "kappi's OpenAI-compatible API (#28 item 3): its callers use the official openai SDK, not this client",
}
"""Path prefixes of operations the client leaves to another client, with why; their components are not generated
unless a client operation uses them too."""
METHODS = ("get", "post", "put", "patch", "delete")


def operations(docs: dict[str, Doc]) -> list[tuple[str, str, str, Doc]]:
    """(service, method, path template, operation) of every operation the client covers."""
    return [
        (service, method, path, item[method])
        for service, doc in docs.items()
        for path, item in doc["paths"].items()
        if not path.startswith(tuple(ELSEWHERE))
        for method in METHODS
        if method in item
    ]


def components(docs: dict[str, Doc]) -> dict[str, Doc]:
    """Every component the client's operations use, by name; a name in both documents must be the same schema."""
    found: dict[str, Doc] = {}
    for doc in docs.values():
        for name, schema in doc["components"]["schemas"].items():
            if name in found and found[name] != schema:
                raise ValueError(f"{name}: two different components of the same name")
            found[name] = schema
    used = referenced([op for *_, op in operations(docs)], found)
    return {name: found[name] for name in sorted(used) if name not in SKIPPED}


def referenced(roots: list[Any], every: dict[str, Doc]) -> set[str]:
    """The components ``roots`` refer to, directly or inside another."""
    found: set[str] = set()
    pending = list(roots)
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            ref = node.get("$ref")
            name = ref.rsplit("/", 1)[-1] if isinstance(ref, str) else None
            if name is not None and name not in found:
                found.add(name)
                pending.append(every[name])
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)
    return found


def annotation(schema: Doc) -> str:
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[-1]
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return _union([annotation(s) for s in schema[key]])
    if "const" in schema:
        return f"Literal[{_literal(schema['const'])}]"
    if "enum" in schema:
        values = [v for v in schema["enum"] if v is not None]
        literal = f"Literal[{', '.join(_literal(v) for v in values)}]"
        return _union([literal, "None"]) if None in schema["enum"] else literal
    kinds = schema.get("type")
    if kinds is None:
        return "Any"
    return _union([_annotation(kind, schema) for kind in ([kinds] if isinstance(kinds, str) else kinds)])


def _annotation(kind: str, schema: Doc) -> str:
    if kind == "string":
        return {"date-time": "datetime", "uuid": "UUID"}.get(schema.get("format", ""), "str")
    if kind == "array":
        return f"list[{annotation(schema.get('items', {}))}]"
    if kind == "object":
        return f"dict[str, {annotation(schema.get('additionalProperties', {}))}]"
    return {"integer": "int", "number": "float", "boolean": "bool", "null": "None"}[kind]


def _union(parts: list[str]) -> str:
    unique = list(dict.fromkeys(parts))
    if "None" in unique:  # None last, as people write it
        unique = [p for p in unique if p != "None"] + ["None"]
    return " | ".join(unique)


def _default(value: Any) -> str:
    if isinstance(value, str) and len(value) > 80:  # implicit concatenation, a line each
        parts = re.findall(r".{1,90}(?:\s|$)|.{1,90}", value)
        return "(\n" + "".join(f"        {_literal(part)}\n" for part in parts) + "    )"
    if isinstance(value, list | dict):
        if not value:
            return f"msgspec.field(default_factory={type(value).__name__})"
        return f"msgspec.field(default_factory=lambda: {_literal(value)})"
    return _literal(value)


def _literal(value: Any) -> str:
    """Python source for a JSON value, quoted as ruff formats it."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(_literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_literal(k)}: {_literal(v)}" for k, v in value.items()) + "}"
    return repr(value)


def sent(docs: dict[str, Doc]) -> set[str]:
    """The components a request body holds, directly or inside another."""
    every = {n: c for doc in docs.values() for n, c in doc["components"]["schemas"].items()}
    return referenced([op.get("requestBody", {}) for *_, op in operations(docs)], every)


def struct(name: str, schema: Doc, *, request: bool) -> str:
    """``request``: a component the client sends, whose absent optional fields are UNSET (left out), so that
    ``None`` can be sent where the server reads null as "clear it"."""
    properties: Doc = schema.get("properties", {})
    required = set(schema.get("required", []))
    tag = next(
        ((field, s["const"]) for field, s in properties.items() if "const" in s and field in required),
        None,
    )
    options = "frozen=True, kw_only=True, omit_defaults=True"
    if tag is not None:
        options += f", tag_field={_literal(tag[0])}, tag={_literal(tag[1])}"
    head = f"class {name}(msgspec.Struct, {options}):"
    lines = [head if len(head) <= 120 else f"class {name}(\n    msgspec.Struct, {options}\n):"]
    if schema.get("description"):
        lines.append(_doc(schema["description"]) + "\n")
    for field, spec in properties.items():
        if tag is not None and field == tag[0]:
            continue
        if not field.isidentifier() or keyword.iskeyword(field):
            raise ValueError(f"{name}.{field}: not a Python name")
        kind = annotation(spec)
        if field in required:
            lines.append(_wrapped(f"    {field}: {kind}"))
        elif "default" in spec:
            lines.append(f"    {field}: {kind} = {_default(spec['default'])}")
        elif "None" in kind.split(" | ") and not request:
            lines.append(f"    {field}: {kind} = None")
        elif kind.startswith(("list[", "dict[")) and " | " not in kind and not request:
            # absent from an answer: empty (the services default such a field to an empty one)
            lines.append(f"    {field}: {kind} = msgspec.field(default_factory={kind[:4]})")
        else:  # left out of a request, the server's default applies; absent from an answer, UNSET
            kind = kind.removesuffix(" | None") + " | msgspec.UnsetType" + (" | None" if kind.endswith("None") else "")
            lines.append(f"    {field}: {kind} = msgspec.UNSET")
        if spec.get("description"):
            lines.append(_doc(spec["description"]))
    if len(lines) == 1:
        lines.append("    pass")
    return "\n".join(lines) + EXTRAS.get(name, "") + "\n"


def _wrapped(line: str) -> str:
    """A required field's line as ruff formats it: a long ``Literal`` takes a line per value."""
    if len(line) <= 120:
        return line
    head, _, values = line.partition(": Literal[")
    if not values.endswith("]") or "]" in values[:-1]:
        raise ValueError(f"no way to wrap {line.strip()}")
    return f"{head}: Literal[\n" + "".join(f"        {v.strip()},\n" for v in values[:-1].split(",")) + "    ]"


def _doc(text: str) -> str:
    """A docstring at the fields' indentation, wrapped to the line length."""
    text = " ".join(text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"').split())
    lines = textwrap.wrap(text, width=113, break_on_hyphens=False) or [""]
    if len(lines) == 1:
        return f'    """{lines[0]}"""'
    return '    """' + "\n    ".join(lines) + '"""'


def models_region(docs: dict[str, Doc]) -> str:
    requests = sent(docs)
    structs = [struct(n, s, request=n in requests) for n, s in components(docs).items()]
    return BEGIN + "\n\n" + "\n\n".join(structs) + "\n\n" + END


def models_file(docs: dict[str, Doc], current: str) -> str:
    head, rest = current.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + models_region(docs) + tail


REPLACEMENTS = [
    (r"\bAsyncGenerator\[(.+?), None\]", r"Generator[\1, None, None]"),
    (r"\bAsync(Service|KappiClient|ChonkitClient)\b", r"\1"),
    (r"\bAsyncToken\b", "SyncToken"),
    (r"\btoken_async\b", "token_sync"),
    (r"\bhttpx\.AsyncClient\b", "httpx.Client"),
    (r"\bhttpx\.AsyncBaseTransport\b", "httpx.BaseTransport"),
    (r"\bAsync(Iterator|Generator)\b", r"\1"),
    (r"\bcontextlib\.aclosing\b", "contextlib.closing"),
    (r"\bcontextlib\.asynccontextmanager\b", "contextlib.contextmanager"),
    (r"^import asyncio\n", ""),
    (r"^import contextlib\n", "import contextlib\nimport time\n"),
    (r"\basyncio\.sleep\b", "time.sleep"),
    (r"\basync (def|with|for)\b", r"\1"),
    (r"\bawait ", ""),
    (r"\b__a(enter|exit)__\b", r"__\1__"),
    (r"\ba(close|read|iter_lines)\b", r"\1"),
]
"""From ``_async.py`` to ``_sync.py``, in this order."""


def unasync(source: str) -> str:
    """The synchronous twin of ``_async.py``, token by token, formatted as ruff formats it."""
    for pattern, replacement in REPLACEMENTS:
        source = re.sub(pattern, replacement, source, flags=re.MULTILINE)
    if re.search(r"\basync\b|\bawait\b|\bAsync[A-Z]|\ba(?:close|read|iter_\w+)\(", source.split('"""', 2)[2]):
        raise ValueError("_async.py holds an async word the generator does not replace")
    header = (
        '"""GENERATED from ``_async.py`` by tests/ragu_client/generate.py: do not edit.\n\n'
        "The synchronous clients: :class:`KappiClient` and :class:`ChonkitClient`, the same methods as the\n"
        'asynchronous ones, answering directly; their streams are iterators.\n"""\n'
    )
    return _formatted(header + source.split('"""', 2)[2], SYNC)


def _formatted(source: str, path: Path) -> str:
    """``source`` as ruff leaves it: imports sorted, and a line ``async`` no longer makes too long joined."""
    for command in (["check", "--select", "I", "--fix", "--quiet"], ["format"]):  # imports sorted, then the format
        source = subprocess.run(  # noqa: S603 - the venv's own ruff
            [sys.executable, "-m", "ruff", *command, "--stdin-filename", str(path), "-"],
            input=source,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    return source


def generated(docs: dict[str, Doc]) -> dict[str, str]:
    """Each generated file's path in the repository and its text, from the documents and ``_async.py``."""
    return {
        "ragu_client/models.py": models_file(docs, MODELS.read_text()),
        "ragu_client/_sync.py": unasync(ASYNC.read_text()),
    }


def main() -> None:
    for path, text in generated(documents()).items():
        (ROOT / path).write_text(text)


if __name__ == "__main__":
    main()
