"""``ragu serve``: resolve the database (embedded by default), migrate, and serve the services."""

from __future__ import annotations

import errno
import gc
import logging
import signal
import socket
from collections.abc import Callable, Sequence
from typing import Any

import uvicorn
from litestar import Litestar

from chonkit.app import create_app as create_chonkit
from common.auth import Authenticator
from common.clients import SharedClients
from common.config import Settings
from common.errors import Conflict, InvalidInput
from common.http.app import AccessLog
from common.logs import configure_logging
from console.app import create_app as create_console
from kappi.app import create_app as create_kappi
from ragu.bootstrap import claim_data_dir, ensure_local_storage_free, prepare_database
from ragu.host import ServiceHost
from ragu.local_llm import LocalLlmServer, local_llm_for

logger = logging.getLogger(__name__)

SERVICES: dict[str, Callable[..., Litestar]] = {"chonkit": create_chonkit, "kappi": create_kappi}
KEEP_ALIVE_SECONDS = 75
"""How long an idle keep-alive connection stays open: longer than common clients and proxies keep theirs
(httpx 5 s, aiohttp 15 s, load balancers 60 s), so the client closes first. uvicorn's default (5 s) equals
httpx's, and a loop stalled across that moment closed connections with a request already on them (the soak)."""
STARTUP_FAILED = 3
"""The exit status when the services fail to start (uvicorn's)."""


def build_asgi(
    settings: Settings,
    services: Sequence[str],
    *,
    local_llm: LocalLlmServer | None = None,
    local_llm_refused: str | None = None,
) -> AccessLog:
    """One service at ``/``, or several under ``/<name>`` on one port, sharing embedders, vector stores and
    the authenticator (its verified tokens, and one development-auth warning), with the console at ``/``; every
    request logged. Kappi offers ``local_llm`` (the embedded model) as its ``local`` provider."""
    clients = SharedClients(settings)
    authenticator = Authenticator(settings)

    def create(name: str) -> Litestar:
        extra: dict[str, Any] = {}
        if name == "kappi":
            extra = {"local_llm": local_llm, "local_llm_refused": local_llm_refused}
        return SERVICES[name](settings, clients=clients, authenticator=authenticator, **extra)

    if len(services) == 1:
        return AccessLog(create(services[0]))
    console = create_console(settings, services={name: f"/{name}" for name in services})
    return AccessLog(ServiceHost({name: create(name) for name in services}, fallback=console))


class Stopped(Exception):
    """Raised from the SIGTERM handler so the embedded database is released on the way out."""


def _stop(signum: int, _frame: object) -> None:
    raise Stopped(signum)


def _tune_garbage_collector() -> None:
    """Keep the cyclic garbage collector from stalling requests (measured with ``bench/kappi_bench.py``, c=16).

    What is imported and built before serving lives as long as the process: it leaves the collector's walks
    (after a collection, so no garbage is kept; objects are still freed by reference counting). Requests in
    flight survive young collections and get promoted, so at the default threshold (700) a full collection
    ran every ~1.2 s under load, stalling every request for 50-200 ms; at 10,000, once in a 30 s run.
    """
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)


def listen(host: str, port: int) -> socket.socket:
    """Bind the server's socket before anything starts, so a taken port is reported in one line at once.

    Raises:
        Conflict: ``port_in_use``.
        InvalidInput: ``cannot_listen`` for any other reason (an address this machine does not have, a port
            below 1024 without privileges).
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise Conflict(
                f"port {port} on {host} is in use (another ragu serve?); choose another with --port or RAGU_PORT",
                code="port_in_use",
            ) from None
        raise InvalidInput(f"cannot listen on {host}:{port}: {exc.strerror or exc}", code="cannot_listen") from None
    return sock


def serve(settings: Settings, services: Sequence[str]) -> int:
    """Serve until SIGINT/SIGTERM; returns the exit status. uvicorn shuts down gracefully, then re-raises the
    signal it caught; our handler turns that into an exception so the ``finally`` below still stops embedded
    PostgreSQL and the embedded LLM."""
    configure_logging(settings.server.log_level, settings.server.log_format)
    signal.signal(signal.SIGTERM, _stop)
    ensure_local_storage_free(settings)
    sock = listen(settings.server.host, settings.server.port)
    embedded = None
    local_llm = None
    try:
        claim_data_dir(settings)  # after the checks above, so a refused start creates nothing
        settings, embedded = prepare_database(settings)
        local_llm, refused = local_llm_for(settings) if "kappi" in services else (None, None)
        if local_llm is not None:
            local_llm.start()  # loads while the services start; answers use extractive until it is ready
        app = build_asgi(settings, services, local_llm=local_llm, local_llm_refused=refused)
        base = f"http://{settings.server.host}:{settings.server.port}"
        where = ", ".join(f"{base}/{s}" if len(services) > 1 else s for s in services)
        if len(services) > 1:
            where += f"; console at {base}/"
        logger.info("serving %s", where)
        _tune_garbage_collector()
        config = uvicorn.Config(
            app,
            host=settings.server.host,
            port=settings.server.port,
            log_config=None,
            access_log=False,
            lifespan="on",
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
        )
        server = uvicorn.Server(config)
        server.run(sockets=[sock])
    except (Stopped, KeyboardInterrupt):
        logger.info("stopped")
        return 0
    else:
        return 0 if server.started else STARTUP_FAILED
    finally:
        sock.close()
        if local_llm is not None:
            local_llm.stop()
        if embedded is not None:
            embedded.stop()
