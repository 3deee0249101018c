"""``ragu schemas``: check JSON files against the published contract, or print the schemas.

    ragu schemas validate identity|text-payload FILE...
    ragu schemas show NAME
    ragu schemas list

A FILE holds one JSON document, a JSON array of documents, or JSON Lines when its name ends in
``.jsonl``. Exit status: 0 when every document is valid, 1 when any is invalid or not JSON, and 2 for
usage errors, including files that cannot be read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from schemas.loader import SCHEMA_NAMES, load, schema_bytes
from schemas.validation import errors

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_USAGE = 2


HELP = (__doc__ or "").replace("``", "")
"""The module docstring as plain text for ``--help`` (reST's double backquotes are for the API docs only)."""


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``schemas`` command on the ``ragu`` CLI; the parsed namespace's ``func`` is :func:`run`."""
    parser = subparsers.add_parser(
        "schemas",
        help="validate JSON files against the published schemas",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_commands(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Carry out a parsed ``schemas`` command and return the exit status."""
    if args.schemas_command == "validate":
        return _validate_files(args.schema, args.files)
    if args.schemas_command == "show":
        sys.stdout.write(schema_bytes(args.schema).decode("utf-8"))
        return EXIT_OK
    for name in SCHEMA_NAMES:
        schema = load(name)
        print(f"{name:<14}{schema['$id']}  {schema['title']}")
    return EXIT_OK


def main(argv: list[str] | None = None) -> int:
    """The ``ragu-schemas`` command (and ``python -m schemas``): ``ragu schemas`` without the rest of Ragu.

    ``argv`` excludes the program name (defaults to ``sys.argv[1:]``).
    """
    parser = argparse.ArgumentParser(
        prog="ragu-schemas", description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    _add_commands(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse exits on --help and on bad arguments; callers want a status
        return exit_.code if isinstance(exit_.code, int) else EXIT_USAGE
    return run(args)


def _add_commands(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="schemas_command", metavar="COMMAND", required=True, help="what to do")
    validate = commands.add_parser("validate", help="check JSON files against a schema")
    validate.add_argument("schema", choices=SCHEMA_NAMES, help="the schema to validate against")
    validate.add_argument("files", nargs="+", type=Path, metavar="FILE", help=".json (object or array) or .jsonl")
    show = commands.add_parser("show", help="print a schema file")
    show.add_argument("schema", choices=SCHEMA_NAMES, help="the schema to print")
    commands.add_parser("list", help="list the published schemas")


class _NotJsonError(ValueError):
    """The file's content is not JSON; the message says where."""


def _validate_files(schema: str, paths: list[Path]) -> int:
    status = EXIT_OK
    for path in paths:
        status = max(status, _validate_file(schema, path))
    return status


def _validate_file(schema: str, path: Path) -> int:
    try:
        documents = _read_documents(path)
    except OSError as exc:
        print(f"{path}: cannot read: {exc.strerror or exc}", file=sys.stderr)
        return EXIT_USAGE
    except _NotJsonError as exc:
        print(f"{path}: {exc}")
        return EXIT_INVALID
    status = EXIT_OK
    for index, document in enumerate(documents):
        for violation in errors(schema, document):
            print(f"{path}[#{index}] {violation.path or '/'}: {violation.message}")
            status = EXIT_INVALID
    if status == EXIT_OK:
        print(f"{path}: ok")
    return status


def _read_documents(path: Path) -> list[object]:
    raw = path.read_bytes()
    if path.suffix == ".jsonl":
        return [_parse(line, line_number) for line_number, line in enumerate(raw.splitlines(), start=1)]
    document = _parse(raw)
    return document if isinstance(document, list) else [document]


def _parse(text: bytes, first_line: int = 1) -> object:
    try:
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        line = first_line + exc.lineno - 1
        raise _NotJsonError(f"invalid JSON at line {line} column {exc.colno}: {exc.msg}") from exc
    except ValueError as exc:  # undecodable bytes, or NaN/Infinity from _reject_constant
        where = f" at line {first_line}" if first_line > 1 else ""
        raise _NotJsonError(f"invalid JSON{where}: {exc}") from exc


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON value")


if __name__ == "__main__":
    raise SystemExit(main())
