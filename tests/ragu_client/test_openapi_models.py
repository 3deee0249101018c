"""The client's typed models and calls against both services' own OpenAPI documents, so a changed API fails here
and not in a caller's script.

- Every Struct in ``ragu_client.models`` is the component of the same name in exactly one document (or is
  listed in :data:`UNDOCUMENTED` with why), each of its fields is a property there with a compatible type:
  what the server sends, the client decodes; what the client sends, the server accepts. A field the client
  requires in an answer is one the server always sends; one the server requires in a request, the client
  always sends.
- Every call of ``KappiClient`` and ``ChonkitClient`` is sent (to a stand-in transport that records it): its
  method and path are an operation of the document, its JSON body validates against the operation's request
  schema, its query parameters are the operation's, and its return type matches the operation's answer.
"""

from __future__ import annotations

import inspect
import re
import tempfile
import typing
import uuid
from collections.abc import AsyncGenerator, Callable
from typing import Any

import httpx
import jsonschema
import msgspec
import pytest

from chonkit.app import create_app as create_chonkit
from common.config import load_settings
from kappi.app import create_app as create_kappi
from ragu_client import ChonkitClient, KappiClient, RaguError
from ragu_client import models as client_models

Doc = dict[str, Any]
Shape = frozenset[Any]

UNDOCUMENTED = {
    client_models.Sources: "data of a streamed answer's SSE event",
    client_models.AnswerToken: "data of a streamed answer's SSE event",
    client_models.Done: "data of a streamed answer's SSE event",
    client_models.UploadResponse: "the upload answers a hand-built Response (201, 200 or a problem)",
    client_models.UploadResult: "part of the upload's answer",
    client_models.FileProblem: "part of the upload's answer",
}
REQUESTS = {
    client_models.Question,
    client_models.RetrieveRequest,
    client_models.QueryRequest,
    client_models.RetrievalFilters,
    client_models.ChatCreate,
    client_models.ChatRename,
    client_models.CollectionCreate,
    client_models.GroupsUpdate,
    client_models.DocumentIds,
    client_models.SearchRequest,
}
"""Structs the client sends (the others it decodes)."""
COMPOSITE = {"wait_for_job": "follow_job, then job: both checked themselves"}
ARGUMENTS: dict[str, Any] = {
    "agent_id": uuid.uuid4(),
    "chat_id": uuid.uuid4(),
    "collection_id": uuid.uuid4(),
    "job_id": uuid.uuid4(),
    "content": "How many vacation days?",
    "query": "vacation",
    "title": "A title",
    "name": "Handbook",
    "files": [("a.txt", b"text")],
    "document_ids": [uuid.uuid4()],
    "groups": ["hr"],
    "top_k": 5,
    "limit": 5,
    "offset": 0,
    "model": "all-MiniLM-L6-v2",
    "max_distance": 0.5,
}


@pytest.fixture(scope="module")
def documents() -> dict[str, Doc]:
    with tempfile.TemporaryDirectory() as folder:
        settings = load_settings({}, data_dir=folder, auth_hs256_secret="openapi-models-secret-0123456789abcdef")
        return {
            "kappi": create_kappi(settings).openapi_schema.to_schema(),
            "chonkit": create_chonkit(settings).openapi_schema.to_schema(),
        }


def _structs() -> list[type[msgspec.Struct]]:
    return [
        value
        for value in vars(client_models).values()
        if inspect.isclass(value) and issubclass(value, msgspec.Struct) and value.__module__ == client_models.__name__
    ]


DOCUMENTED = [s for s in _structs() if s not in UNDOCUMENTED]


def _component(documents: dict[str, Doc], name: str) -> Doc:
    found = [doc["components"]["schemas"][name] for doc in documents.values() if name in doc["components"]["schemas"]]
    assert len(found) == 1, f"{name}: a component of {len(found)} documents, not one"
    component: Doc = found[0]
    return component


def client_shape(info: msgspec.inspect.Type) -> Shape:
    """What a client type holds, in the tokens :func:`server_shape` reads from a JSON Schema."""
    simple: dict[type[msgspec.inspect.Type], tuple[Any, ...]] = {
        msgspec.inspect.IntType: ("integer",),
        msgspec.inspect.FloatType: ("number",),
        msgspec.inspect.StrType: ("string", None),
        msgspec.inspect.BoolType: ("boolean",),
        msgspec.inspect.NoneType: ("null",),
        msgspec.inspect.DateTimeType: ("string", "date-time"),
        msgspec.inspect.UUIDType: ("string", "uuid"),
    }
    if type(info) in simple:
        return frozenset({simple[type(info)]})
    if isinstance(info, msgspec.inspect.UnionType):
        return frozenset().union(*(client_shape(t) for t in info.types))
    if isinstance(info, msgspec.inspect.ListType):
        return frozenset({("array", client_shape(info.item_type))})
    if isinstance(info, msgspec.inspect.DictType):
        return frozenset({("object", client_shape(info.value_type))})
    if isinstance(info, msgspec.inspect.LiteralType):
        return frozenset({("enum", frozenset(info.values))})
    if isinstance(info, msgspec.inspect.StructType):
        return frozenset({("ref", info.cls.__name__)})
    raise AssertionError(f"no shape for {info}")


def server_shape(schema: Doc) -> Shape:
    if "$ref" in schema:
        return frozenset({("ref", schema["$ref"].rsplit("/", 1)[-1])})
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return frozenset().union(*(server_shape(s) for s in schema[key]))
    if "enum" in schema:
        return frozenset({("enum", frozenset(schema["enum"]))})
    types = schema.get("type", [])
    found: set[Any] = set()
    for kind in [types] if isinstance(types, str) else types:
        if kind == "array":
            found.add(("array", server_shape(schema.get("items", {}))))
        elif kind == "object":
            found.add(("object", server_shape(schema.get("additionalProperties", {}))))
        elif kind == "string":
            found.add(("string", schema.get("format") if schema.get("format") in ("date-time", "uuid") else None))
        else:
            found.add((kind,))
    return frozenset(found) or frozenset({("any",)})


def covers(wide: Shape, narrow: Shape) -> bool:
    """Every value ``narrow`` admits, ``wide`` admits (an integer is a number; a schema-less value is anything)."""
    return ("any",) in wide or all(any(_covers(w, n) for w in wide) for n in narrow)


def _covers(wide: tuple[Any, ...], narrow: tuple[Any, ...]) -> bool:
    if wide == ("number",) and narrow == ("integer",):
        return True
    if wide[0] == narrow[0] == "enum":
        return bool(wide[1] >= narrow[1])
    if wide[0] == narrow[0] and wide[0] in ("array", "object"):
        return covers(wide[1], narrow[1])
    if wide == ("string", None) and narrow[0] == "string":
        return True
    return wide == narrow


@pytest.mark.parametrize("struct", DOCUMENTED, ids=lambda s: s.__name__)
def test_every_field_of_a_client_model_is_in_its_component_with_a_compatible_type(
    documents: dict[str, Doc], struct: type[msgspec.Struct]
) -> None:
    component = _component(documents, struct.__name__)
    properties, required = component.get("properties", {}), set(component.get("required", []))
    info = msgspec.inspect.type_info(struct)
    assert isinstance(info, msgspec.inspect.StructType)
    sent = struct in REQUESTS
    for field in info.fields:
        assert field.encode_name in properties, f"{struct.__name__}.{field.name} is not in the API"
        ours, theirs = client_shape(field.type), server_shape(properties[field.encode_name])
        compatible = covers(theirs, ours) if sent else covers(ours, theirs)
        assert compatible, f"{struct.__name__}.{field.name}: ours {set(ours)}, the API's {set(theirs)}"
        if not sent and field.required:
            assert field.encode_name in required, f"{struct.__name__}.{field.name} is optional in the API"
    if sent:
        always_sent = {f.encode_name for f in info.fields if f.required}
        assert required <= always_sent, f"{struct.__name__} does not always send {required - always_sent}"


def test_the_undocumented_models_are_not_in_either_document(documents: dict[str, Doc]) -> None:
    """Should a service start documenting one, it moves to the checked list above."""
    components = {name for doc in documents.values() for name in doc["components"]["schemas"]}
    assert components.isdisjoint(s.__name__ for s in UNDOCUMENTED)


def _calls() -> list[tuple[str, type[KappiClient | ChonkitClient], str]]:
    return [
        (service, client, name)
        for service, client in (("kappi", KappiClient), ("chonkit", ChonkitClient))
        for name, member in vars(client).items()
        if not name.startswith("_") and inspect.isfunction(member) and name not in COMPOSITE
    ]


@pytest.mark.parametrize(("service", "client", "name"), _calls(), ids=lambda v: v if isinstance(v, str) else "")
async def test_every_client_call_is_an_operation_of_the_document_with_matching_body_and_answer(
    documents: dict[str, Doc], service: str, client: type[KappiClient | ChonkitClient], name: str
) -> None:
    sent: list[httpx.Request] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(418, json={"status": 418, "code": "standin", "detail": "recorded"})

    async with client("http://ragu.test/prefix", "token", transport=httpx.MockTransport(refuse)) as session:
        method: Callable[..., Any] = getattr(session, name)
        parameters = inspect.signature(method).parameters
        arguments = {p: ARGUMENTS[p] for p in parameters if p in ARGUMENTS}  # the rest keep their defaults
        with pytest.raises(RaguError, match="standin"):
            await _drive(method(**arguments))
    request = sent[0]
    document = documents[service]
    path = request.url.path.removeprefix("/prefix")
    templates = [t for t in document["paths"] if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", t), path)]
    assert len(templates) == 1, f"{name}: {request.method} {path} matches {templates}"
    operation = document["paths"][templates[0]].get(request.method.lower())
    assert operation is not None, f"{name}: the API has no {request.method} {templates[0]}"

    allowed = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
    assert set(request.url.params) <= allowed
    _check_body(document, operation, request)
    _check_answer(method, operation)


async def _drive(call: Any) -> None:
    """Await a call, or iterate a stream's first event."""
    if inspect.isasyncgen(call):
        await anext(call)
    else:
        await call


def _check_body(document: Doc, operation: Doc, request: httpx.Request) -> None:
    kind = request.headers.get("content-type", "")
    if not request.content:
        assert not operation.get("requestBody", {}).get("required"), "the API requires a body the client omits"
    elif kind.startswith("multipart/form-data"):
        form = operation["requestBody"]["content"]["multipart/form-data"]["schema"]
        fields = set(re.findall(rb'form-data; name="([^"]+)"', request.content))
        properties = _component({"": document}, form["$ref"].rsplit("/", 1)[-1])["properties"]
        assert {f.decode() for f in fields} <= set(properties)
    else:
        schema = operation["requestBody"]["content"]["application/json"]["schema"]
        jsonschema.Draft202012Validator({**schema, "components": document["components"]}).validate(
            msgspec.json.decode(request.content)
        )


def _check_answer(method: Callable[..., Any], operation: Doc) -> None:
    answer = typing.get_type_hints(method)["return"]
    success = next(r for status, r in operation["responses"].items() if status.startswith("2"))
    schema = success.get("content", {}).get("application/json", {}).get("schema")
    if answer is type(None):
        assert schema is None, "the API answers with a body the client drops"
    elif typing.get_origin(answer) is AsyncGenerator:
        pass  # an SSE stream: its events are not in the document (see UNDOCUMENTED)
    elif not schema:
        assert answer in UNDOCUMENTED, f"the API documents no answer for {answer}"
    else:
        ours, theirs = client_shape(msgspec.inspect.type_info(answer)), server_shape(schema)
        assert ours == theirs, f"ours {set(ours)}, the API's {set(theirs)}"
