"""What authenticating as a router guard costs against the same check as a ``before_request`` hook (issue #32
item 5), and what ordering a dependency after the principal costs against plain dependency order.

Run from the repository root::

    python -m bench.auth_wiring_bench [--requests 2000] [--rounds 5] [--out FILE]

Four apps of the same shape as kappi's users' router — a route taking the ``principal`` and a service
dependency, answering a small JSON body — differ only in their wiring: the check as a hook or as a guard, and
the service's provider taking the principal (one after the other) or not (Litestar resolves the two
concurrently). Each is asked over httpx's ASGI transport in this process with a real HS256 token, rounds
alternating between the apps; the figure is the process CPU per request (median over rounds) and each
variant's difference from the hook with ordered dependencies, kappi's wiring before it took the guard (issue #32
item 5). Everything here is the request's HTTP and wiring cost alone: a question adds retrieval and answering on
top, so the difference is a smaller share of a question's CPU than of these requests'.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import time
from collections.abc import Callable
from typing import Any

import httpx
from litestar import Litestar, Request, Router, get
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide

from common.auth import Authenticator, Principal, mint_dev_token
from common.config import load_settings
from common.http.security import authenticated, provide_principal

SECRET = "auth-wiring-bench-secret-0123456789abcdef"  # noqa: S105  # a throwaway signing key


class Service:
    """Stands for kappi's chat service: made once, handed to every request."""


SERVICE = Service()


def _ordered(principal: NamedDependency[Principal]) -> Service:
    del principal
    return SERVICE


def _plain() -> Service:
    return SERVICE


async def _hook(request: Request[Any, Any, Any]) -> None:
    """The wiring before: :func:`~common.http.security.authenticated`'s check as a ``before_request`` hook."""
    await provide_principal(request)


@get("/ask", sync_to_thread=False)
def ask(principal: Principal, service: Service) -> dict[str, Any]:
    return {"subject": principal.subject, "groups": sorted(principal.groups), "service": type(service).__name__}


def app(*, guard: bool, ordered: bool) -> Litestar:
    wiring: dict[str, Any] = {"guards": [authenticated]} if guard else {"before_request": _hook}
    router = Router("/", route_handlers=[ask], **wiring)
    settings = load_settings({}, auth_hs256_secret=SECRET)
    return Litestar(
        route_handlers=[router],
        dependencies={
            "principal": Provide(provide_principal),
            "service": Provide(_ordered if ordered else _plain, sync_to_thread=False),
        },
        state=State({"authenticator": Authenticator(settings)}),
    )


VARIANTS: dict[str, Callable[[], Litestar]] = {
    "hook, ordered (before)": lambda: app(guard=False, ordered=True),
    "guard, ordered (after)": lambda: app(guard=True, ordered=True),
    "hook, plain order": lambda: app(guard=False, ordered=False),
    "guard, plain order": lambda: app(guard=True, ordered=False),
}


async def _cpu_per_request(application: Litestar, token: str, requests: int) -> float:
    headers = {"Authorization": f"Bearer {token}"}
    transport = httpx.ASGITransport(app=application)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        for _ in range(50):  # warm-up: the token's verification is remembered, as in a server
            assert (await client.get("/ask", headers=headers)).status_code == 200
        started = time.process_time()
        for _ in range(requests):
            response = await client.get("/ask", headers=headers)
        spent = time.process_time() - started
        assert response.status_code == 200, response.text
    return spent * 1e6 / requests


async def measure(requests: int, rounds: int) -> dict[str, Any]:
    token = mint_dev_token(load_settings({}, auth_hs256_secret=SECRET), subject="alice", groups=["hr"])
    apps = {name: make() for name, make in VARIANTS.items()}
    samples: dict[str, list[float]] = {name: [] for name in apps}
    order = list(apps)
    for _ in range(rounds):
        for name in order:
            samples[name].append(await _cpu_per_request(apps[name], token, requests))
        order.reverse()  # ABBA: neither variant always runs first
    base = statistics.median(samples["hook, ordered (before)"])
    return {
        "requests_per_round": requests,
        "rounds": rounds,
        "cpu_us_per_request": {name: round(statistics.median(values), 1) for name, values in samples.items()},
        "ratio_to_before": {name: round(statistics.median(values) / base, 3) for name, values in samples.items()},
        "extra_us_per_request": {name: round(statistics.median(values) - base, 1) for name, values in samples.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out")
    args = parser.parse_args()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a log line per request would be most of the cost
    result = asyncio.run(measure(args.requests, args.rounds))
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as out:
            out.write(text + "\n")


if __name__ == "__main__":
    main()
