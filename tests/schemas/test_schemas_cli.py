"""``ragu schemas``, driven through ``main`` and through ``add_parser`` as the ragu CLI will."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from schemas import SCHEMA_NAMES, schema_bytes
from schemas.cli import add_parser, main

IDENTITY: dict[str, Any] = {
    "collection_id": "2f6c1e0a-8b9e-4c1d-9a57-3c0f5e1b7d42",
    "name": "Hr_docs",
    "model": "text-embedding-3-small",
    "vectorProvider": "qdrant",
    "embeddingProvider": "openai",
}
NAME_MESSAGE = "'hr' does not match '^[A-Z]{1}[a-zA-Z0-9_]*$'"


def _write(tmp_path: Path, filename: str, content: Any) -> Path:
    path = tmp_path / filename
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


def test_valid_object_file_is_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "identity.json", IDENTITY)

    assert main(["validate", "identity", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: ok\n"


def test_array_reports_each_violation_with_its_index(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    documents = [IDENTITY, {**IDENTITY, "name": "hr", "groups": []}, IDENTITY]
    path = _write(tmp_path, "identities.json", documents)

    assert main(["validate", "identity", str(path)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{path}[#1] /groups: [] should be non-empty",
        f"{path}[#1] /name: {NAME_MESSAGE}",
    ]


def test_violations_of_the_whole_object_are_shown_at_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "payload.json", {"content": "text"})

    assert main(["validate", "text-payload", str(path)]) == 1
    assert capsys.readouterr().out == f"{path}[#0] /: 'document_id' is a required property\n"


def test_jsonl_file_holds_one_document_per_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = [{"content": "a", "document_id": "d1", **IDENTITY}, {"content": "b"}, {"content": "c", "document_id": "d3"}]
    path = _write(tmp_path, "chunks.jsonl", "".join(json.dumps(line) + "\n" for line in lines))

    assert main(["validate", "text-payload", str(path)]) == 1
    assert capsys.readouterr().out == f"{path}[#1] /: 'document_id' is a required property\n"


def test_valid_jsonl_file_is_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "identities.jsonl", f"{json.dumps(IDENTITY)}\n{json.dumps({**IDENTITY, 'name': 'A'})}\n")

    assert main(["validate", "identity", str(path)]) == 0
    assert capsys.readouterr().out == f"{path}: ok\n"


def test_a_jsonl_array_line_is_one_document_not_many(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "identities.jsonl", json.dumps([IDENTITY]) + "\n")

    assert main(["validate", "identity", str(path)]) == 1
    assert "[#0] /: [{" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("filename", "content", "message"),
    [
        ("broken.json", '{"name": "Hr_docs",\n "model": }', "invalid JSON at line 2 column 11: Expecting value"),
        ("empty.json", "", "invalid JSON at line 1 column 1: Expecting value"),
        ("nan.json", '{"content": NaN, "document_id": "d"}', "invalid JSON: NaN is not a JSON value"),
        ("gap.jsonl", '{"content": "a", "document_id": "d"}\n\n{}\n', "invalid JSON at line 2 column 1"),
        ("latin1.json", b'{"content": "caf\xe9"}', "invalid JSON: 'utf-8' codec can't decode"),
    ],
)
def test_invalid_json_is_an_invalid_file_with_a_readable_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], filename: str, content: str | bytes, message: str
) -> None:
    path = tmp_path / filename
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")

    assert main(["validate", "text-payload", str(path)]) == 1
    assert capsys.readouterr().out.startswith(f"{path}: {message}")


def test_unreadable_file_is_a_usage_error_and_other_files_are_still_checked(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.json"
    invalid = _write(tmp_path, "invalid.json", {**IDENTITY, "name": "hr"})
    valid = _write(tmp_path, "valid.json", IDENTITY)

    assert main(["validate", "identity", str(missing), str(invalid), str(valid), str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [f"{invalid}[#0] /name: {NAME_MESSAGE}", f"{valid}: ok"]
    assert captured.err.splitlines() == [
        f"{missing}: cannot read: No such file or directory",
        f"{tmp_path}: cannot read: Is a directory",
    ]


def test_any_invalid_file_makes_the_run_invalid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    valid = _write(tmp_path, "valid.json", IDENTITY)
    invalid = _write(tmp_path, "invalid.json", [{**IDENTITY, "groups": [1]}])

    assert main(["validate", "identity", str(valid), str(invalid)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{valid}: ok",
        f"{invalid}[#0] /groups/0: 1 is not of type 'string'",
    ]


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["validate", "image-payload", "x.json"], "invalid choice: 'image-payload'"),
        (["validate", "identity"], "the following arguments are required: FILE"),
        ([], "the following arguments are required: COMMAND"),
        (["show"], "the following arguments are required: schema"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_usage_errors_exit_2_with_argparse_message(
    capsys: pytest.CaptureFixture[str], argv: list[str], complaint: str
) -> None:
    assert main(argv) == 2
    assert complaint in capsys.readouterr().err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "ragu schemas validate identity|text-payload FILE..." in capsys.readouterr().out


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_show_prints_the_schema_file(capsys: pytest.CaptureFixture[str], name: str) -> None:
    assert main(["show", name]) == 0
    assert capsys.readouterr().out.encode("utf-8") == schema_bytes(name)


def test_list_names_every_schema_with_its_id(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines] == [
        [name, f"https://ragu.dev/schemas/{name}.schema.json"] for name in SCHEMA_NAMES
    ]


def test_add_parser_plugs_the_command_into_the_ragu_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ragu = argparse.ArgumentParser(prog="ragu")
    add_parser(ragu.add_subparsers(dest="command", required=True))
    path = _write(tmp_path, "identity.json", {**IDENTITY, "name": "hr"})

    args = ragu.parse_args(["schemas", "validate", "identity", str(path)])

    assert args.func(args) == 1
    assert capsys.readouterr().out == f"{path}[#0] /name: {NAME_MESSAGE}\n"
