"""The npm package ``@ragu/schemas`` (js/schemas) judges every golden case as the Python validator does.

One ``node`` process validates every case with the built package, so that TypeScript applications
and ours accept and reject the same records, for the same reasons; ``tsc`` holds the generated types
to the same cases. The package is built on first use if it is not (``npm ci --prefix js/schemas``).
"""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from schemas import SCHEMA_NAMES, errors, load, schema_bytes

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "js" / "schemas"
GOLDEN = Path(__file__).parent / "golden"
BUILD_HINT = "build the npm package first: npm ci --prefix js/schemas"

# Reads [{name, data}] on stdin; writes what the package says about each, and about an unknown name.
NODE_SCRIPT = """
const pkg = require(process.argv[1]);
const cases = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
const out = {
  names: pkg.SCHEMA_NAMES,
  schemas: Object.fromEntries(pkg.SCHEMA_NAMES.map((name) => [name, pkg.schema(name)])),
  violations: cases.map((c) => pkg.validate(c.name, c.data)),
  valid: cases.map((c) => pkg.isValid(c.name, c.data)),
};
try { pkg.validate("nope", {}); } catch (e) {
  out.unknown = { message: e.message, isUnknownSchema: e instanceof pkg.UnknownSchema };
}
process.stdout.write(JSON.stringify(out));
"""

# The keywords a TypeScript type expresses too; a record breaking one of them must not type-check.
SHAPE_KEYWORDS = {"type", "required", "additionalProperties", "minItems"}

# The declared API in use; tsc checks it against index.d.ts and the generated types.
TS_API_USE = """
import { SCHEMA_NAMES, UnknownSchema, isValid, schema, validate } from PACKAGE;
import type { Identity, SchemaName, Schemas, TextPayload, Violation } from PACKAGE;
const names: readonly SchemaName[] = SCHEMA_NAMES;
const found: Violation[] = validate(names[0], {});
const where: string[] = found.map((violation) => violation.path + violation.validator + violation.message);
// @ts-expect-error only published schema names
validate("nope", {});
const unknownName: string = new UnknownSchema("nope").schemaName;
const file: Record<string, unknown> = schema("identity");
export function narrowed(value: unknown): string | undefined {
  if (isValid("identity", value)) return (value satisfies Identity).name;
  if (isValid("text-payload", value)) return (value satisfies TextPayload).content;
}
export const used = [where, unknownName, file];
export type Both = Schemas["identity"] | Schemas["text-payload"];
"""


def _cases() -> list[tuple[str, dict[str, Any]]]:
    return [(name, case) for name in SCHEMA_NAMES for case in json.loads((GOLDEN / f"{name}.json").read_text("utf-8"))]


CASES = _cases()


@functools.cache
def _node_binary() -> str:
    """Node, with the package installed and built: a fresh clone's ``pytest`` builds it here (``npm ci`` from the
    lockfile), so the README's one test command stays the whole suite."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail(f"Node.js (node, npm) is not on PATH; install it (apt-get install nodejs npm), then {BUILD_HINT}")
    if not (PACKAGE / "node_modules").is_dir() or not (PACKAGE / "dist").is_dir():
        built = subprocess.run(  # noqa: S603 - npm from PATH, on our own lockfile
            [npm, "ci", "--prefix", str(PACKAGE), "--no-audit", "--no-fund"],
            capture_output=True, text=True, check=False, timeout=300,
        )  # fmt: skip
        if built.returncode != 0:
            pytest.fail(f"js/schemas could not be built ({BUILD_HINT}):\n{built.stderr[-2000:]}")
    return node


@functools.cache
def _node() -> dict[str, Any]:
    node = _node_binary()
    stdin = json.dumps([{"name": name, "data": case["data"]} for name, case in CASES])
    done = subprocess.run(  # noqa: S603 - our own script, run by the node found on PATH
        [node, "-e", NODE_SCRIPT, str(PACKAGE)], input=stdin, capture_output=True, text=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_the_package_ships_every_schema_file_unchanged() -> None:
    out = _node()

    assert out["names"] == list(SCHEMA_NAMES)
    for name in SCHEMA_NAMES:
        built = (PACKAGE / "dist" / f"{name}.schema.json").read_bytes()
        assert built == schema_bytes(name), "js/schemas/dist is stale; run: npm run build --prefix js/schemas"
        assert out["schemas"][name] == load(name)
        assert out["schemas"][name]["$schema"] == "https://json-schema.org/draft/2020-12/schema"
        assert out["schemas"][name]["$id"] == f"https://ragu.dev/schemas/{name}.schema.json"


def test_the_generated_types_accept_each_golden_record_unless_its_shape_is_wrong(tmp_path: Path) -> None:
    """Each case becomes one typed TypeScript constant; ``tsc`` must refuse exactly the misshapen ones.

    Types cannot see ``pattern`` or ``minLength``, so records that break only those must compile.
    """
    node = _node_binary()
    lines = [TS_API_USE.replace("PACKAGE", json.dumps(str(PACKAGE)))]
    for index, (name, case) in enumerate(CASES):
        if {v["validator"] for v in case.get("violations", [])} & SHAPE_KEYWORDS:
            lines.append(f"// @ts-expect-error {case['description']}")
        lines.append(f"export const case{index}: Schemas[{json.dumps(name)}] = {json.dumps(case['data'])};")
    checked = tmp_path / "golden.ts"
    checked.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tsc = [node, str(PACKAGE / "node_modules" / "typescript" / "bin" / "tsc"), "--noEmit", "--strict"]
    options = ["--module", "nodenext", "--moduleResolution", "nodenext", "--types", "", str(checked)]

    done = subprocess.run([*tsc, *options], capture_output=True, text=True, check=False, timeout=60)  # noqa: S603

    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("index", "name", "case"),
    [pytest.param(i, name, case, id=f"{name}: {case['description']}") for i, (name, case) in enumerate(CASES)],
)
def test_the_package_reaches_the_python_verdict_and_violations(index: int, name: str, case: dict[str, Any]) -> None:
    out = _node()
    ours = [(v.path, v.validator) for v in errors(name, case["data"])]
    theirs = [(v["path"], v["validator"]) for v in out["violations"][index]]

    assert out["valid"][index] is case["valid"]
    assert (not ours) is case["valid"]
    assert theirs == ours == [(v["path"], v["validator"]) for v in case.get("violations", [])]


def test_an_unknown_schema_name_is_refused_with_the_known_ones() -> None:
    assert _node()["unknown"] == {
        "message": 'unknown schema "nope"; known schemas: chunk, identity, text-payload',
        "isUnknownSchema": True,
    }
