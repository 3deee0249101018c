"""The ragu command: serve the platform, run migrations, mint development tokens, validate schemas."""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import sys
from collections.abc import Callable, Sequence

import schemas.cli
from common.config import Settings, load_settings
from common.errors import AppError, InvalidInput
from common.groups import check_groups

SETTINGS_NOTE = """Settings come from RAGU_* environment variables (and DATABASE_URL); the data directory is
RAGU_DATA_DIR, by default .ragu in the current folder, so run ragu token where ragu serve runs"""


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    from ragu.serve import SERVICES, serve

    overrides = {k: v for k, v in {"host": args.host, "port": args.port}.items() if v is not None}
    services = list(SERVICES) if args.service == "all" else [args.service]
    return serve(settings.with_(**overrides), services)


def _migrate(args: argparse.Namespace, settings: Settings) -> int:
    from common.db import migrate, resolve_database_url

    url, embedded = asyncio.run(resolve_database_url(settings))
    try:
        if args.downgrade:
            migrate.downgrade(url, args.downgrade)
        else:
            migrate.upgrade(url, args.revision)
    finally:
        if embedded is not None:
            embedded.stop()
    return 0


def _names(value: str, option: str) -> list[str]:
    """A comma-separated option as names, each trimmed: ``"hr, legal"`` is ``hr`` and ``legal``."""
    if not value.strip():
        return []
    names = [name.strip() for name in value.split(",")]
    if "" in names:
        raise InvalidInput(f"{option} {value!r} has an empty name", code="invalid_token_request")
    return names


def _token(args: argparse.Namespace, settings: Settings) -> int:
    from common.auth import dev_secret, mint_dev_token

    dev_secret(settings, create=False)  # a secret made here would sign tokens that no running server accepts
    groups = check_groups(_names(args.groups, "--groups"))
    roles = _names(args.roles, "--roles")
    if args.admin:
        roles.append(settings.auth.admin_role)
    token = mint_dev_token(
        settings,
        subject=args.sub,
        groups=groups,
        roles=roles,
        name=args.name,
        ttl_seconds=args.ttl,
    )
    print(token)
    return 0


def _worker(args: argparse.Namespace, settings: Settings) -> int:
    from ragu.worker import run_worker

    run_worker(settings)
    return 0


def _reconcile(args: argparse.Namespace, settings: Settings) -> int:
    from ragu.worker import print_report, run_reconcile

    report = run_reconcile(settings, repair=args.repair)
    print_report(report)
    return 0 if report.clean else 1


Handler = Callable[[argparse.Namespace, Settings], int]


def _version() -> str:
    """The installed package's version (``pip install -e .`` records it too)."""
    try:
        return importlib.metadata.version("ragu")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"


def _command(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], name: str, summary: str, handler: Handler
) -> argparse.ArgumentParser:
    command = commands.add_parser(
        name, help=summary, description=summary[:1].upper() + summary[1:] + ".", epilog=SETTINGS_NOTE
    )
    command.set_defaults(handler=handler)
    return command


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragu", description=__doc__, epilog=SETTINGS_NOTE)
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}", help="print the version")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, help="the command to run:")

    serve = _command(commands, "serve", "run the services (embedded PostgreSQL unless DATABASE_URL is set)", _serve)
    serve.add_argument(
        "service",
        nargs="?",
        default="all",
        choices=["all", "chonkit", "kappi"],
        help="all (default): both under /chonkit and /kappi, with the console at /; or one service at /",
    )
    serve.add_argument("--host", default=None, help="bind address (default RAGU_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port (default RAGU_PORT or 8000)")

    migrate = _command(commands, "migrate", "apply database migrations", _migrate)
    migrate.add_argument("--revision", default="head", help="upgrade to this revision (default head)")
    migrate.add_argument("--downgrade", metavar="REVISION", help="downgrade to REVISION instead (e.g. base)")

    summary = "mint a development token, signed with the secret ragu serve keeps in the data directory"
    token = _command(commands, "token", summary, _token)
    token.add_argument("--sub", required=True, help="subject (user id)")
    token.add_argument("--groups", default="", help="comma-separated groups, e.g. 'hr, legal' (each name trimmed)")
    token.add_argument("--roles", default="", help="comma-separated roles (each name trimmed)")
    token.add_argument("--admin", action="store_true", help="add the admin role")
    token.add_argument("--name", default=None, help="display name")
    token.add_argument("--ttl", type=int, default=8 * 3600, help="lifetime in seconds (default 8 h)")

    _command(commands, "worker", "run an embedding worker (several may run, on several machines)", _worker)

    summary = "report drift between chonkit's database and the vector stores"
    reconcile = _command(commands, "reconcile", summary, _reconcile)
    reconcile.add_argument("--repair", action="store_true", help="repair what Ragu owns (exit 0 when all repaired)")

    schemas.cli.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "schemas":
        return schemas.cli.run(args)
    try:
        settings = load_settings()
        code: int = args.handler(args, settings)
    except AppError as exc:
        print(f"ragu: {exc.detail} ({exc.code})", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
