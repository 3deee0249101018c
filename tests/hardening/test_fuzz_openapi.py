"""Property-based fuzzing of both services from their own OpenAPI documents: no request may cause a 5xx.

Schemathesis derives Hypothesis strategies from each operation (valid requests, and invalid ones in negative
mode); we send them through the test's own async client, because the apps share the test's single database
connection and event loop, which schemathesis's synchronous ASGI client cannot join. The assertion is
schemathesis's ``not_a_server_error`` check: every answer has a status below 500.

``RAGU_FUZZ_EXAMPLES`` (default 3) sets the examples per operation, mode and role; CI keeps it small, a longer
hunt raises it (e.g. ``RAGU_FUZZ_EXAMPLES=200``).
"""

from __future__ import annotations

import os
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, Phase, given
from hypothesis import settings as hypothesis_settings
from litestar import Litestar
from schemathesis import Case, GenerationMode
from schemathesis.openapi import from_dict

from chonkit.app import create_app as create_chonkit
from common.config import Settings
from kappi.app import create_app as create_kappi
from tests.hardening.conftest import World, fill_path
from tests.kappi.conftest import as_user

EXAMPLES = int(os.environ.get("RAGU_FUZZ_EXAMPLES", "3"))
BEYOND = [2**63, 2**64, 10**20, -(2**63) - 1]
"""Past PostgreSQL's bigint, past any unsigned 64-bit value, and below them: what a declared bound keeps out."""
SKIPPED = {("GET", "/jobs/{job_id}/events")}
"""A live job's event stream only ends with the job; it is exercised in ``tests/chonkit/embedding``."""


def generated_cases(app: Litestar, path_parameters: dict[str, str]) -> list[Case]:
    """Cases for every operation in ``app``'s OpenAPI document, positive and negative, with real ids for half."""
    schema = from_dict(app.openapi_schema.to_schema())
    cases: list[Case] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if (operation.method.upper(), operation.path) in SKIPPED:
            continue
        known = {k: v for k, v in path_parameters.items() if "{" + k + "}" in operation.path}
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            for fixed in ({}, known) if known else ({},):
                strategy = operation.as_strategy(mode, path_parameters=fixed or None)

                @hypothesis_settings(
                    max_examples=EXAMPLES,
                    database=None,
                    deadline=None,
                    derandomize=True,
                    phases=[Phase.generate],
                    suppress_health_check=list(HealthCheck),
                )
                @given(case=strategy)
                def collect(case: Case) -> None:
                    cases.append(case)

                collect()
    return cases


def as_httpx(case: Case, headers: dict[str, str]) -> dict[str, Any]:
    """Schemathesis speaks ``requests``' keyword arguments; httpx wants a few of them spelled differently."""
    kwargs = case.as_transport_kwargs(base_url="http://ragu.test", headers=headers)
    request: dict[str, Any] = {
        "method": kwargs["method"],
        "url": kwargs["url"],
        "headers": kwargs.get("headers"),
        "params": kwargs.get("params"),
    }
    if kwargs.get("json") is not None:
        request["json"] = kwargs["json"]
    if kwargs.get("data") is not None:
        data = kwargs["data"]
        request["content"] = data if isinstance(data, bytes | str) else str(data)
    if kwargs.get("files"):
        request["files"] = [
            (str(field), (name, value if isinstance(value, bytes | str) else str(value)))
            for field, (name, value, *_) in kwargs["files"]
        ]
    return request


async def fuzz(client: httpx.AsyncClient, cases: list[Case], headers: dict[str, str]) -> list[str]:
    failures = []
    for case in cases:
        request = as_httpx(case, headers)
        try:
            response = await client.request(**request)
        except httpx.InvalidURL:
            continue  # not a request any HTTP client can send (control characters in the URL)
        if response.status_code >= 500:
            failures.append(f"{response.status_code} {case.as_curl_command()}\n  {response.text[:300]}")
    return failures


def _path_parameters(world: World, chat_id: str) -> dict[str, str]:
    return {
        "collection_id": world.public["id"],
        "document_id": world.restricted_document["id"],
        "job_id": world.job_id,
        "agent_id": world.agent["id"],
        "chat_id": chat_id,
        "name": "identity",
    }


@pytest.mark.parametrize("role", ["admin", "user"])
@pytest.mark.parametrize("service", ["chonkit", "kappi"])
async def test_no_generated_request_causes_a_server_error(
    chonkit: httpx.AsyncClient,
    kappi: httpx.AsyncClient,
    world: World,
    settings: Settings,
    service: str,
    role: str,
) -> None:
    headers = as_user(settings, "fuzzer", "hr", admin=role == "admin")
    chat = (await kappi.post("/chats", json={"agent_id": world.agent["id"]}, headers=headers)).json()
    client, factory = (chonkit, create_chonkit) if service == "chonkit" else (kappi, create_kappi)
    cases = generated_cases(factory(settings), _path_parameters(world, chat["id"]))
    assert len(cases) >= 20
    failures = await fuzz(client, cases, headers)
    assert failures == [], "\n".join(failures)


def integer_query_parameters(app: Litestar) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(method, path, name, schema) of every integer query parameter in ``app``'s OpenAPI document."""
    found = []
    for path, item in app.openapi_schema.to_schema()["paths"].items():
        for method, operation in item.items():
            for parameter in operation.get("parameters", []):
                if parameter["in"] == "query" and parameter["schema"].get("type") == "integer":
                    found.append((method.upper(), path, parameter["name"], parameter["schema"]))
    return found


@pytest.mark.parametrize(
    "service",
    ["chonkit", "kappi"],
)
async def test_integer_query_parameters_declare_bounds_and_values_past_them_are_4xx(
    chonkit: httpx.AsyncClient, kappi: httpx.AsyncClient, world: World, settings: Settings, service: str
) -> None:
    """Schemathesis draws from the declared bounds (positive mode) and just past them (negative mode), so every
    integer query parameter declares both ends; past them, and far past (an ``offset`` of 2**63 reached PostgreSQL's
    bigint and was a 500, #26), the answer is a 4xx. The bounds themselves are answered."""
    headers = as_user(settings, "fuzzer", "hr", admin=True)
    chat = (await kappi.post("/chats", json={"agent_id": world.agent["id"]}, headers=headers)).json()
    client, factory = (chonkit, create_chonkit) if service == "chonkit" else (kappi, create_kappi)
    values = {**_path_parameters(world, chat["id"]), "source_id": world.public["id"], "run_id": world.job_id}
    parameters = integer_query_parameters(factory(settings))
    assert parameters
    failures = []
    for method, path, name, schema in parameters:
        if "maximum" not in schema or "minimum" not in schema:
            failures.append(f"{method} {path}?{name} declares no bound: {schema}")
            continue
        low, high = int(schema["minimum"]), int(schema["maximum"])
        url = fill_path(path, values)
        for value in [low, high, low - 1, high + 1, *BEYOND]:
            response = await client.request(method, url, params={name: str(value)}, headers=headers)
            outside = not low <= value <= high
            if response.status_code >= 500 or (outside and response.status_code != 400):
                failures.append(f"{method} {path}?{name}={value}: {response.status_code} {response.text[:200]}")
    assert failures == [], "\n".join(failures)
