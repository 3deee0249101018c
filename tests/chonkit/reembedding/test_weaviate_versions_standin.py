"""Weaviate's swap of a new version through its alias API (1.32+), against a stand-in speaking Weaviate's REST for
the calls the swap makes — ``/v1/meta``, ``/v1/schema/{class}`` (exists, delete) and ``/v1/aliases`` (list, create,
update, delete) — since no Weaviate runs here. The first swap of a collection made under its own name deletes it and
creates the alias; a later one moves the alias in one update and deletes the version it named; dropping the
collection takes the alias and its version; a server without aliases (404) has none to mind."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import weaviate
from litestar import Litestar, delete, get, post, put
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, JSONBody
from litestar.response import Response

from common.errors import NotFound
from common.vectors.weaviate import WeaviateStore
from tests.support.cohere_standin import serve_on_loopback

_MISSING = {"error": [{"message": "not found"}]}
Alias = dict[str, str]
"""``{"alias": …, "class": …}`` (an update sends ``class`` alone)."""


@dataclass
class WeaviateAliasStandIn:
    classes: set[str]
    aliases: dict[str, str] = field(default_factory=dict)
    calls: list[tuple[str, ...]] = field(default_factory=list)
    with_aliases: bool = True


@get("/v1/meta")
async def meta() -> dict[str, Any]:
    return {"hostname": "http://[::]:8080", "modules": {}, "version": "1.32.0"}


@get("/v1/schema/{name:str}")
async def get_class(name: FromPath[str], standin: NamedDependency[WeaviateAliasStandIn]) -> Response[Any]:
    if name not in standin.classes:
        return Response(_MISSING, status_code=404)
    return Response({"class": name, "properties": [], "vectorizer": "none"})


@delete("/v1/schema/{name:str}", status_code=200)
async def delete_class(name: FromPath[str], standin: NamedDependency[WeaviateAliasStandIn]) -> None:
    standin.calls.append(("delete class", name))
    standin.classes.discard(name)
    standin.aliases = {a: c for a, c in standin.aliases.items() if c != name}


@get("/v1/aliases")
async def list_aliases(standin: NamedDependency[WeaviateAliasStandIn]) -> Response[Any]:
    if not standin.with_aliases:
        return Response(_MISSING, status_code=404)
    return Response({"aliases": [{"alias": a, "class": c} for a, c in sorted(standin.aliases.items())]})


@post("/v1/aliases", status_code=200)
async def create_alias(
    data: JSONBody[dict[str, str]], standin: NamedDependency[WeaviateAliasStandIn]
) -> dict[str, str]:
    standin.calls.append(("create alias", data["alias"], data["class"]))
    if data["alias"] in standin.classes or data["class"] not in standin.classes:
        raise ValueError("Weaviate refuses an alias named like a class, or of a class that does not exist")
    standin.aliases[data["alias"]] = data["class"]
    return data


@put("/v1/aliases/{name:str}", status_code=200)
async def update_alias(
    name: FromPath[str], data: JSONBody[dict[str, str]], standin: NamedDependency[WeaviateAliasStandIn]
) -> Any:
    standin.calls.append(("update alias", name, data["class"]))
    standin.aliases[name] = data["class"]
    return {"alias": name, "class": data["class"]}


@delete("/v1/aliases/{name:str}", status_code=204)
async def delete_alias(name: FromPath[str], standin: NamedDependency[WeaviateAliasStandIn]) -> None:
    standin.calls.append(("delete alias", name))
    standin.aliases.pop(name, None)


@pytest.fixture
def standin() -> WeaviateAliasStandIn:
    return WeaviateAliasStandIn(classes={"Handbook", "Ragu_version_1", "Ragu_version_2"})


@pytest.fixture
def server(standin: WeaviateAliasStandIn) -> Iterator[str]:
    app = Litestar(
        [meta, get_class, delete_class, list_aliases, create_alias, update_alias, delete_alias],
        dependencies={"standin": Provide(lambda: standin, sync_to_thread=False)},
        openapi_config=None,
        logging_config=None,
    )
    with serve_on_loopback(app) as url:
        yield url


@pytest.fixture
async def store(server: str) -> AsyncIterator[WeaviateStore]:
    port = int(server.rstrip("/").rsplit(":", 1)[1])
    client = weaviate.use_async_with_custom(
        http_host="127.0.0.1",
        http_port=port,
        http_secure=False,
        grpc_host="127.0.0.1",
        grpc_port=1,
        grpc_secure=False,
        skip_init_checks=True,
    )
    await client.connect()
    store = WeaviateStore(client)
    yield store
    await store.aclose()


async def test_swaps_move_the_alias_and_drop_takes_it_and_its_version_standin(
    store: WeaviateStore, standin: WeaviateAliasStandIn
) -> None:
    await store.swap_version("Handbook", "Ragu_version_1")
    assert standin.calls == [("delete class", "Handbook"), ("create alias", "Handbook", "Ragu_version_1")]
    assert standin.aliases == {"Handbook": "Ragu_version_1"}

    standin.calls.clear()
    await store.swap_version("Handbook", "Ragu_version_2")
    assert standin.calls == [("update alias", "Handbook", "Ragu_version_2"), ("delete class", "Ragu_version_1")]
    assert (standin.aliases, standin.classes) == ({"Handbook": "Ragu_version_2"}, {"Ragu_version_2"})

    with pytest.raises(NotFound):
        await store.swap_version("Handbook", "Ragu_version_1")  # gone with the second swap

    standin.calls.clear()
    await store.drop_collection("Handbook")
    assert ("delete alias", "Handbook") in standin.calls
    assert ("delete class", "Ragu_version_2") in standin.calls
    assert (standin.aliases, standin.classes) == ({}, set())


async def test_a_server_without_aliases_drops_collections_as_before_standin(
    store: WeaviateStore, standin: WeaviateAliasStandIn
) -> None:
    standin.with_aliases = False
    await store.drop_collection("Handbook")
    assert standin.calls == [("delete class", "Handbook")]
