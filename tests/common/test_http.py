"""The shared service skeleton, exercised through both real apps: health, readiness, schemas, errors, auth."""

from __future__ import annotations

import functools
import importlib
import logging
import pkgutil
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from http import HTTPStatus
from pathlib import Path

import httpx
import pytest
from litestar import Litestar, Router, get
from litestar.di import NamedDependency
from litestar.params import FromPath

import chonkit
import common
import kappi
import schemas
from chonkit.app import create_app as create_chonkit
from common.auth import Principal, mint_dev_token
from common.clients import SharedClients
from common.config import Secret, Settings
from common.db import SingleConnectionDatabase
from common.errors import AppError, InvalidInput
from common.http.app import AccessLog, build_service_app
from common.http.problems import STANDARD_MEMBERS
from common.http.security import admin_only, authenticated
from kappi.app import create_app as create_kappi
from kappi.llm.errors import status_error

AppFactory = Callable[..., Litestar]
AppClient = Callable[[Litestar], AbstractAsyncContextManager[httpx.AsyncClient]]


@pytest.fixture(params=[create_chonkit, create_kappi], ids=["chonkit", "kappi"])
async def client(
    request: pytest.FixtureRequest,
    settings: Settings,
    db: SingleConnectionDatabase,
    clients: SharedClients,
    app_client: AppClient,
) -> AsyncIterator[httpx.AsyncClient]:
    factory: AppFactory = request.param
    async with app_client(factory(settings, database=db, clients=clients)) as test_client:
        yield test_client


async def test_health_and_ready(client: httpx.AsyncClient) -> None:
    health = await client.get("/health")
    assert health.status_code == 200
    assert health.json()["status"] == "ok"
    ready = await client.get("/ready")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ready"


@pytest.mark.parametrize("name", ["identity", "text-payload"])
async def test_schemas_are_served_byte_for_byte(client: httpx.AsyncClient, name: str) -> None:
    response = await client.get(f"/schemas/{name}")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/schema+json")
    assert response.content == schemas.schema_bytes(name)
    assert (await client.get("/schemas")).json() == list(schemas.SCHEMA_NAMES)


async def test_unknown_schema_is_a_problem_document(client: httpx.AsyncClient) -> None:
    response = await client.get("/schemas/nope")
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["code"] == "schema_not_found"
    assert body["status"] == 404
    assert "identity" in body["detail"]


async def test_unknown_route_and_method_have_codes(client: httpx.AsyncClient) -> None:
    missing = await client.get("/no/such/route")
    assert (missing.status_code, missing.json()["code"]) == (404, "route_not_found")
    wrong = await client.post("/health")
    assert (wrong.status_code, wrong.json()["code"]) == (405, "method_not_allowed")


# -- errors name the path as the client sent it, served at the root and mounted as by `ragu serve` -------------


async def test_an_unknown_path_is_named_once_as_the_client_sent_it(
    served: dict[str, tuple[httpx.AsyncClient, str]],
) -> None:
    for client, prefix in served.values():
        response = await client.get(f"{prefix}/nope")
        assert (response.status_code, response.json()["code"]) == (404, "route_not_found")
        assert response.json()["detail"] == f"no route GET {prefix}/nope"


@pytest.mark.parametrize(
    ("service", "method", "path", "parameter", "value", "listing"),
    [
        ("chonkit", "GET", "/collections/Hr_docs", "collection_id", "Hr_docs", "/collections"),
        ("chonkit", "DELETE", "/collections/Hr_docs/", "collection_id", "Hr_docs", "/collections"),
        ("chonkit", "POST", "/collections/Hr_docs/search", "collection_id", "Hr_docs", "/collections"),
        ("chonkit", "GET", "/documents/handbook.pdf/content", "document_id", "handbook.pdf", "/documents"),
        ("kappi", "POST", "/agents/HR%20helper/query", "agent_id", "HR helper", "/agents"),
        ("kappi", "GET", "/admin/agents/HR%20helper", "agent_id", "HR helper", "/admin/agents"),
    ],
)
async def test_a_name_where_an_id_belongs_is_invalid_id_saying_an_id_is_expected(
    served: dict[str, tuple[httpx.AsyncClient, str]],
    service: str,
    method: str,
    path: str,
    parameter: str,
    value: str,
    listing: str,
) -> None:
    client, prefix = served[service]
    response = await client.request(method, f"{prefix}{path}")
    assert response.status_code == 400, response.text
    body = response.json()
    assert (body["code"], body["parameter"], body["value"]) == ("invalid_id", parameter, value)
    noun = parameter.removesuffix("_id")
    assert body["detail"].startswith(f"{value!r} is not a valid {noun} id: ids are UUIDs")
    assert "names are not ids" in body["detail"]
    assert body["detail"].endswith(f"GET {prefix}{listing} lists each {noun} with its id")


ANY_ID = "3fa85f64-5717-4562-b3fc-2c963f66afa6"


@pytest.mark.parametrize(
    ("service", "method", "path", "body", "member", "where", "value", "listing"),
    [
        (
            "chonkit",
            "POST",
            f"/collections/{ANY_ID}/documents",
            {"document_ids": ["handbook.pdf"]},
            "field",
            "document_ids[0]",
            "handbook.pdf",
            "/documents",
        ),
        (
            "chonkit",
            "POST",
            f"/collections/{ANY_ID}/search",
            {"query": "leave", "document_ids": [ANY_ID, "handbook.pdf"]},
            "field",
            "document_ids[1]",
            "handbook.pdf",
            "/documents",
        ),
        ("kappi", "POST", "/chats", {"agent_id": "HR helper"}, "field", "agent_id", "HR helper", "/agents"),
        (
            "chonkit",
            "GET",
            "/jobs?collection_id=Hr_docs",
            None,
            "parameter",
            "collection_id",
            "Hr_docs",
            "/collections",
        ),
    ],
)
async def test_a_name_where_an_id_belongs_in_a_body_or_query_is_invalid_id_naming_the_field(
    served: dict[str, tuple[httpx.AsyncClient, str]],
    settings: Settings,
    service: str,
    method: str,
    path: str,
    body: dict[str, object] | None,
    member: str,
    where: str,
    value: str,
    listing: str | None,
) -> None:
    client, prefix = served[service]
    headers = _bearer(settings, admin=True)
    response = await client.request(method, f"{prefix}{path}", json=body, headers=headers)
    assert response.status_code == 400, response.text
    problem = response.json()
    assert (problem["code"], problem[member], problem["value"]) == ("invalid_id", where, value)
    noun = where.split("[", maxsplit=1)[0].removesuffix("_ids").removesuffix("_id").replace("_", " ")
    assert problem["detail"].startswith(f"{value!r} in {where} is not a valid {noun} id: ids are UUIDs")
    assert "names are not ids" in problem["detail"]
    if listing is not None:
        assert problem["detail"].endswith(f"GET {prefix}{listing} lists each {noun} with its id")


async def test_a_body_id_of_the_wrong_type_is_still_invalid_request(
    served: dict[str, tuple[httpx.AsyncClient, str]], settings: Settings
) -> None:
    client, prefix = served["chonkit"]
    body = {"document_ids": [42]}
    response = await client.post(
        f"{prefix}/collections/{ANY_ID}/documents", json=body, headers=_bearer(settings, admin=True)
    )
    assert (response.status_code, response.json()["code"]) == (400, "invalid_request"), response.text


async def test_an_id_of_nothing_is_still_the_services_own_not_found(
    served: dict[str, tuple[httpx.AsyncClient, str]], settings: Settings
) -> None:
    client, prefix = served["chonkit"]
    response = await client.get(f"{prefix}/collections/{uuid.uuid4()}", headers=_bearer(settings, admin=True))
    assert (response.status_code, response.json()["code"]) == (404, "collection_not_found")


async def test_openapi_document_is_published(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/docs/openapi.json")).json()
    assert "/health" in spec["paths"]
    assert spec["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


async def test_ready_reports_503_when_database_is_down(
    settings: Settings, clients: SharedClients, app_client: AppClient
) -> None:
    class DownDatabase(SingleConnectionDatabase):
        async def ping(self) -> None:
            raise OSError("connection refused")

    async with app_client(
        create_chonkit(settings, database=DownDatabase(None), clients=clients, worker=False)
    ) as test_client:  # type: ignore[arg-type]
        response = await test_client.get("/ready")
        assert (await test_client.get("/health")).status_code == 200
    assert response.status_code == 503
    assert response.json()["code"] == "database_unavailable"


# -- auth wiring: guarded routers, 401 vs 403, the principal dependency ----------------------------------------


@get("/me")
async def whoami(principal: NamedDependency[Principal]) -> dict[str, object]:
    return {"sub": principal.subject, "groups": sorted(principal.groups), "admin": principal.is_admin}


@get("/admin/thing")
async def admin_thing() -> dict[str, str]:
    return {"ok": "yes"}


@get("/boom")
async def boom() -> None:
    raise InvalidInput("the widget is too wide", code="widget_too_wide", extra={"max": 3})


@get("/crash")
async def crash() -> None:
    raise RuntimeError("secret internals")


@functools.cache
def error_tree() -> tuple[type[AppError], ...]:
    """Every class of the error tree in chonkit, kappi and common (each module imported, so a new one is found)."""
    for package in (chonkit, common, kappi):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(module.name)
    found, todo = [], [AppError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return tuple(sorted(found, key=lambda cls: cls.__qualname__))


COLLIDING = sorted({*STANDARD_MEMBERS, "retry_after_seconds", "extra", "errors"})
"""Every standard member, and the names ``problem()`` and its handlers use for keywords of their own."""


@get("/raise/{index:int}/{member:str}")
async def raise_with_member(index: FromPath[int], member: FromPath[str]) -> None:
    """Raises the ``index``-th class of :func:`error_tree` carrying ``member`` in its ``extra``. Built through
    ``AppError.__init__`` whatever the class's own constructor takes: rendering reads only what that sets."""
    cls = error_tree()[index]
    error = cls.__new__(cls)
    AppError.__init__(error, "what went wrong", code=f"{cls.__name__.lower()}_test", extra={member: 418, "kept": 1})
    raise error


@get("/upstream/{status:int}")
async def raise_upstream(status: FromPath[int]) -> None:
    raise status_error("openai", status, "This model's maximum context length is 8192 tokens.")


def _guarded_app(settings: Settings, db: SingleConnectionDatabase) -> Litestar:
    return build_service_app(
        service_name="test",
        title="t",
        description="t",
        settings=settings,
        database=db,
        route_handlers=[
            Router("/", route_handlers=[whoami], guards=[authenticated]),
            Router("/", route_handlers=[admin_thing], guards=[admin_only]),
            boom,
            crash,
            raise_with_member,
            raise_upstream,
        ],
    )


@pytest.fixture
async def guarded(
    settings: Settings, db: SingleConnectionDatabase, app_client: AppClient
) -> AsyncIterator[httpx.AsyncClient]:
    app = _guarded_app(settings, db)
    async with app_client(app) as test_client:
        yield test_client


def _bearer(settings: Settings, *, admin: bool = False, groups: tuple[str, ...] = ()) -> dict[str, str]:
    roles = [settings.auth.admin_role] if admin else []
    token = mint_dev_token(settings, subject="alice", groups=groups, roles=roles)
    return {"Authorization": f"Bearer {token}"}


async def test_missing_token_is_401_with_code(guarded: httpx.AsyncClient) -> None:
    response = await guarded.get("/me")
    assert response.status_code == 401
    assert response.json()["code"] == "missing_token"
    assert response.headers["www-authenticate"].startswith("Bearer")


async def test_malformed_token_is_401(guarded: httpx.AsyncClient) -> None:
    response = await guarded.get("/me", headers={"Authorization": "Bearer not.a.jwt"})
    assert response.status_code == 401
    assert response.json()["code"] == "malformed_token"


async def test_valid_token_reaches_the_handler_as_a_principal(guarded: httpx.AsyncClient, settings: Settings) -> None:
    response = await guarded.get("/me", headers=_bearer(settings, groups=("hr", "legal")))
    assert response.status_code == 200
    assert response.json() == {"sub": "alice", "groups": ["hr", "legal"], "admin": False}


async def test_non_admin_on_admin_route_is_403(guarded: httpx.AsyncClient, settings: Settings) -> None:
    response = await guarded.get("/admin/thing", headers=_bearer(settings))
    assert response.status_code == 403
    assert response.json()["code"] == "admin_required"
    admin = await guarded.get("/admin/thing", headers=_bearer(settings, admin=True))
    assert admin.status_code == 200


async def test_token_for_another_secret_is_rejected(guarded: httpx.AsyncClient, tmp_path: Path) -> None:
    other = Settings().with_(data_dir=str(tmp_path / "other"), auth_hs256_secret=Secret("x" * 40))
    response = await guarded.get("/me", headers=_bearer(other))
    assert response.status_code == 401
    assert response.json()["code"] == "invalid_signature"


async def test_app_errors_keep_code_and_extra(guarded: httpx.AsyncClient) -> None:
    response = await guarded.get("/boom")
    assert response.status_code == 422
    assert response.json() == {
        "type": "about:blank",
        "title": "Unprocessable Entity",
        "status": 422,
        "code": "widget_too_wide",
        "detail": "the widget is too wide",
        "max": 3,
    }


async def test_no_extra_member_of_any_error_collides_with_the_problem_documents_own(
    guarded: httpx.AsyncClient,
) -> None:
    """Every class of the error tree, with each name that could collide in its ``extra``: answered with the
    class's own status and code, the member kept as ``upstream_<name>`` when it is a standard one. An LLM's
    ``status`` once made the handler itself fail (``problem() got multiple values for argument 'status'``): a
    500 for a question over the model's context (#26)."""
    classes = error_tree()
    assert {"InvalidInput", "Unavailable", "BadRequest", "ChecksumMismatch", "AddressRefused"} <= {
        cls.__name__ for cls in classes
    }
    for index, cls in enumerate(classes):
        for member in COLLIDING:
            response = await guarded.get(f"/raise/{index}/{member}")
            body = response.json()
            assert response.status_code == cls.status, (cls, member, response.text)
            assert (body["status"], body["code"], body["detail"]) == (
                cls.status,
                f"{cls.__name__.lower()}_test",
                "what went wrong",
            )
            assert body["upstream_" + member if member in STANDARD_MEMBERS else member] == 418
            assert body["kept"] == 1
            assert (body["type"], body["title"]) == ("about:blank", HTTPStatus(cls.status).phrase)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 408, 413, 422, 429, 500, 502, 503, 504])
async def test_every_upstream_llm_status_is_answered_as_its_own_code(guarded: httpx.AsyncClient, status: int) -> None:
    error = status_error("openai", status, "This model's maximum context length is 8192 tokens.")
    response = await guarded.get(f"/upstream/{status}")
    assert (response.status_code, response.json()["code"]) == (error.status, error.code)
    assert (response.json()["provider"], response.json()["upstream_status"]) == ("openai", status)


async def test_unexpected_errors_leak_nothing(guarded: httpx.AsyncClient) -> None:
    response = await guarded.get("/crash")
    assert response.status_code == 500
    assert response.json()["code"] == "internal"
    assert "secret" not in response.text


async def test_the_access_log_has_a_line_for_every_request_with_its_status(
    settings: Settings, db: SingleConnectionDatabase, caplog: pytest.LogCaptureFixture
) -> None:
    """Answered, refused by an exception handler, and paths no route knows alike, each with its duration."""
    transport = httpx.ASGITransport(app=AccessLog(_guarded_app(settings, db)))
    caplog.set_level(logging.INFO, logger="ragu.access")
    async with httpx.AsyncClient(transport=transport, base_url="http://ragu.test") as client:
        statuses = [
            (await client.get("/me", headers=_bearer(settings))).status_code,
            (await client.get("/me")).status_code,
            (await client.get("/boom")).status_code,
            (await client.get("/nowhere")).status_code,
        ]
    assert statuses == [200, 401, 422, 404]
    lines = [r for r in caplog.records if r.name == "ragu.access"]
    assert [r.getMessage() for r in lines] == ["GET /me 200", "GET /me 401", "GET /boom 422", "GET /nowhere 404"]
    assert [r.__dict__["status"] for r in lines] == statuses
    assert all(r.__dict__["duration_ms"] >= 0 for r in lines)
