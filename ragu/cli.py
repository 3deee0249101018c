"""The ``ragu`` command: serve the platform, run migrations, mint development tokens, validate schemas."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

import msgspec

import schemas.cli
from common.config import Settings, load_settings
from common.errors import AppError


def _serve(args: argparse.Namespace, settings: Settings) -> int:
    from ragu.serve import SERVICES, serve

    overrides = {k: v for k, v in {"host": args.host, "port": args.port}.items() if v is not None}
    services = list(SERVICES) if args.service == "all" else [args.service]
    serve(msgspec.structs.replace(settings, **overrides), services)
    return 0


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


def _token(args: argparse.Namespace, settings: Settings) -> int:
    from common.auth import mint_dev_token

    roles = [r for r in args.roles.split(",") if r]
    if args.admin:
        roles.append(settings.auth_admin_role)
    token = mint_dev_token(
        settings,
        subject=args.sub,
        groups=[g for g in args.groups.split(",") if g],
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragu", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the services (embedded PostgreSQL unless DATABASE_URL is set)")
    serve.add_argument("service", nargs="?", default="all", choices=["all", "chonkit", "kappi"])
    serve.add_argument("--host", default=None, help="bind address (default RAGU_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port (default RAGU_PORT or 8000)")
    serve.set_defaults(handler=_serve)

    migrate = commands.add_parser("migrate", help="apply database migrations")
    migrate.add_argument("--revision", default="head", help="upgrade to this revision (default head)")
    migrate.add_argument("--downgrade", metavar="REVISION", help="downgrade to REVISION instead (e.g. base)")
    migrate.set_defaults(handler=_migrate)

    token = commands.add_parser("token", help="mint a development token signed with the local secret")
    token.add_argument("--sub", required=True, help="subject (user id)")
    token.add_argument("--groups", default="", help="comma-separated groups, e.g. hr,legal")
    token.add_argument("--roles", default="", help="comma-separated roles")
    token.add_argument("--admin", action="store_true", help="add the admin role")
    token.add_argument("--name", default=None, help="display name")
    token.add_argument("--ttl", type=int, default=8 * 3600, help="lifetime in seconds (default 8 h)")
    token.set_defaults(handler=_token)

    worker = commands.add_parser("worker", help="run an embedding worker (several may run, on several machines)")
    worker.set_defaults(handler=_worker)

    reconcile = commands.add_parser("reconcile", help="report drift between chonkit's database and the vector stores")
    reconcile.add_argument("--repair", action="store_true", help="repair what Ragu owns (exit 0 when all repaired)")
    reconcile.set_defaults(handler=_reconcile)

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
