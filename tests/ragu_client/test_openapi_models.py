"""The client against both services' own OpenAPI documents, so a changed API fails here and not in a caller's script.

- Every Struct of ``ragu_client.models`` (but the few in :data:`UNDOCUMENTED`, with why) EQUALS the component of
  the same name: the same fields, each of the same type, required where the API requires it, with the API's
  default. A component both services publish (``Health``) must be the same in both.
- Every operation of both documents has a client method, in the sync and the async clients alike (but those
  :data:`generate.ELSEWHERE` leaves to another client, with why); every method is sent to a stand-in transport that
  records it: its method and path are one operation, its JSON body validates against the operation's request
  schema, its query parameters are the operation's, and its return type is the operation's answer.
"""

from __future__ import annotations

import inspect
import re
import typing
import uuid
from collections.abc import AsyncGenerator, Callable, Generator
from typing import Any

import httpx
import jsonschema
import msgspec
import pytest

from ragu_client import AsyncChonkitClient, AsyncKappiClient, ChonkitClient, KappiClient, RaguError
from ragu_client import models as m
from tests.ragu_client import generate

Doc = dict[str, Any]
Shape = frozenset[Any]
Client = type[KappiClient | ChonkitClient | AsyncKappiClient | AsyncChonkitClient]

UNDOCUMENTED = {
    m.Sources: "data of a streamed answer's SSE event",
    m.Preliminary: "data of a streamed answer's SSE event",
    m.AnswerToken: "data of a streamed answer's SSE event",
    m.Done: "data of a streamed answer's SSE event",
    m.UploadResponse: "the upload answers a hand-built Response (201, 200 or a problem)",
    m.UploadResult: "part of the upload's answer",
    m.FileProblem: "part of the upload's answer",
}
CLIENTS: dict[str, tuple[Client, Client]] = {
    "kappi": (AsyncKappiClient, KappiClient),
    "chonkit": (AsyncChonkitClient, ChonkitClient),
}
COMPOSITE = {
    "wait_for_job": "follow_job, then job: both checked themselves",
    "close": "closes the session",
    "aclose": "closes the session",
}
"""Methods that are not one operation."""
STRUCTS: dict[str, Any] = {
    "AgentCreate": m.AgentCreate(name="Helper", groups=["hr"], reranker=None),
    "AgentUpdate": m.AgentUpdate(description="HR policies", context_template=None),
    "AssignmentChanges": m.AssignmentChanges(
        add=[m.AssignmentSpec(vector_provider="pgvector", name="Handbook", mode="hybrid", tags=["hr"])],
        remove=[m.CollectionRef(vector_provider="pgvector", name="Old")],
    ),
    "AccessQuery": m.AccessQuery(groups=["hr"]),
    "DocumentPatch": m.DocumentPatch(label=None, tags=["hr"]),
    "DocumentConfig": m.DocumentConfig(
        parse=m.ParseConfig(page_range=m.PageRange(start=1, end=2), ocr="off"), chunk=m.StructureChunking()
    ),
    "ParsePreviewRequest": m.ParsePreviewRequest(parse=m.ParseConfig(line_filters=["^Page \\d+$"])),
    "ChunkPreviewRequest": m.ChunkPreviewRequest(chunk=m.ParentChildChunking(), embedding_provider="local"),
    "EmbeddingChange": m.EmbeddingChange(embedding_provider="local", model=None),
    "SourceCreate": m.SourceCreate(name="Site", spec=m.WebSourceSpec(url="https://example.com", mode="sitemap")),
    "SourceUpdate": m.SourceUpdate(spec=m.FolderSpec(path="/srv/docs", include=["*.md"]), schedule_minutes=None),
    "RetrievalFilters": m.RetrievalFilters(tags=["hr"]),
}
"""A request body for each Struct a method takes, by its name."""
ARGUMENTS: dict[str, Any] = {
    "content": "How many vacation days?",
    "query": "vacation",
    "title": "A title",
    "name": "identity",
    "files": [("a.txt", b"text")],
    "document_ids": [uuid.uuid4()],
    "groups": ["hr"],
    "tags": ["hr"],
    "labels": ["policy"],
    "top_k": 5,
    "limit": 5,
    "offset": 0,
    "sort": "-created_at",
    "q": "hand",
    "stage": "failed",
    "mode": "dense",
    "dense_weight": 0.5,
    "group_by": "document",
    "model": "all-MiniLM-L6-v2",
    "vector_provider": "pgvector",
    "embedding_provider": "local",
    "max_distance": 0.5,
}
"""Arguments by name; an id (``..._id``) is a fresh UUID, a Struct is from :data:`STRUCTS`."""


@pytest.fixture(scope="module")
def documents() -> dict[str, Doc]:
    return generate.documents()


def _structs() -> list[type[msgspec.Struct]]:
    return [
        value
        for value in vars(m).values()
        if inspect.isclass(value) and issubclass(value, msgspec.Struct) and value.__module__ == m.__name__
    ]


DOCUMENTED = [s for s in _structs() if s not in UNDOCUMENTED]


def _component(documents: dict[str, Doc], name: str) -> Doc:
    """The component of that name; one both documents hold must be the same schema in both."""
    found = [doc["components"]["schemas"][name] for doc in documents.values() if name in doc["components"]["schemas"]]
    assert found, f"{name}: a component of neither document"
    assert all(f == found[0] for f in found), f"{name}: two different components of the same name"
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
        msgspec.inspect.AnyType: ("any",),
    }
    if type(info) in simple:
        return frozenset({simple[type(info)]})
    if isinstance(info, msgspec.inspect.UnionType):  # msgspec leaves UnsetType out: it is never on the wire
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
    """A JSON Schema's shape; a nullable enum (``"enum": ["document", null]``) is the enum or null, as in Python."""
    if "$ref" in schema:
        return frozenset({("ref", schema["$ref"].rsplit("/", 1)[-1])})
    for key in ("oneOf", "anyOf"):
        if key in schema:
            return frozenset().union(*(server_shape(s) for s in schema[key]))
    if "const" in schema:
        return frozenset({("enum", frozenset({schema["const"]}))})
    if "enum" in schema:
        values = frozenset(v for v in schema["enum"] if v is not None)
        return frozenset({("enum", values)} | ({("null",)} if None in schema["enum"] else set()))
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


@pytest.mark.parametrize("struct", DOCUMENTED, ids=lambda s: s.__name__)
def test_each_client_model_equals_its_component(documents: dict[str, Doc], struct: type[msgspec.Struct]) -> None:
    """The same fields (none missing, none extra), each of the same type, required alike, with the same default."""
    component = _component(documents, struct.__name__)
    properties, required = component.get("properties", {}), set(component.get("required", []))
    info = msgspec.inspect.type_info(struct)
    assert isinstance(info, msgspec.inspect.StructType)
    ours = {f.encode_name: f for f in info.fields}
    tag = {info.tag_field} if isinstance(info.tag_field, str) else set()
    assert set(ours) | tag == set(properties), f"{struct.__name__}: ours {sorted(ours)}, the API's {sorted(properties)}"
    if tag:
        assert properties[info.tag_field].get("const") == info.tag
        assert info.tag_field in required
    defaults = {f.encode_name: f.default for f in msgspec.structs.fields(struct)}
    for name, field in ours.items():
        spec = properties[name]
        assert client_shape(field.type) == server_shape(spec), f"{struct.__name__}.{name}: {field.type} vs {spec}"
        assert field.required == (name in required), f"{struct.__name__}.{name}: required differs"
        if "default" in spec:
            default = field.default_factory() if field.default_factory is not msgspec.NODEFAULT else field.default
            assert default == spec["default"], f"{struct.__name__}.{name}: default {default!r}, not {spec['default']!r}"
        elif not field.required:  # absent: null where it may be, empty for a collection, else left out (UNSET)
            assert defaults[name] is None or defaults[name] is msgspec.UNSET or field.default_factory in (list, dict)


def test_every_component_the_client_operations_use_has_a_model(documents: dict[str, Doc]) -> None:
    """Named as the component; the undocumented models are in neither document (should a service start documenting
    one, it moves to the checked list)."""
    used = set(generate.components(documents)) | set(generate.SKIPPED)
    every = {name for doc in documents.values() for name in doc["components"]["schemas"]}
    assert every - used <= _elsewhere_components(documents), "a component no operation uses"
    assert {s.__name__ for s in DOCUMENTED} == used - set(generate.SKIPPED)
    assert every.isdisjoint(s.__name__ for s in UNDOCUMENTED)


def _elsewhere_components(documents: dict[str, Doc]) -> set[str]:
    every = {n: c for doc in documents.values() for n, c in doc["components"]["schemas"].items()}
    roots = [
        item
        for doc in documents.values()
        for path, item in doc["paths"].items()
        if path.startswith(tuple(generate.ELSEWHERE))
    ]
    return generate.referenced(roots, every)


def _methods(client: Client) -> dict[str, Callable[..., Any]]:
    return {
        name: member
        for klass in client.__mro__
        if klass.__module__.startswith("ragu_client.")
        for name, member in vars(klass).items()
        if not name.startswith("_") and inspect.isfunction(member)
    }


def test_the_sync_and_async_clients_have_the_same_methods_with_the_same_parameters() -> None:
    for asynchronous, synchronous in CLIENTS.values():
        ours, theirs = _methods(asynchronous), _methods(synchronous)
        ours["close"] = ours.pop("aclose")
        assert set(ours) == set(theirs)
        for name in ours:
            sent = inspect.signature(ours[name]).parameters
            assert list(sent) == list(inspect.signature(theirs[name]).parameters), name


def _arguments(method: Callable[..., Any]) -> dict[str, Any]:
    """Every parameter of ``method`` given, optional ones too, so every query parameter and body field is sent."""
    hints = typing.get_type_hints(method)
    arguments: dict[str, Any] = {}
    for name in inspect.signature(method).parameters:
        if name == "self":
            continue
        kinds = [k for k in typing.get_args(hints[name]) or [hints[name]] if inspect.isclass(k)]
        struct = next((k for k in kinds if issubclass(k, msgspec.Struct)), None)
        if struct is not None:
            arguments[name] = STRUCTS[struct.__name__]
        elif name.endswith("_id"):
            arguments[name] = uuid.uuid4()
        else:
            arguments[name] = ARGUMENTS[name]
    return arguments


def _recorded(client: Client, name: str) -> tuple[httpx.Request, Callable[..., Any]]:
    """The request the method sends (to a transport that records it and refuses it) and the method."""
    sent: list[httpx.Request] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(418, json={"status": 418, "code": "standin", "detail": "recorded"})

    transport = httpx.MockTransport(refuse)
    session = client("http://ragu.test/prefix", "token", transport=transport, retries=0)
    method = getattr(session, name)
    try:
        if inspect.iscoroutinefunction(method) or inspect.isasyncgenfunction(method):
            with pytest.raises(RaguError, match="standin"):
                _run_async(method(**_arguments(method)))
        else:
            with pytest.raises(RaguError, match="standin"):
                _run_sync(method(**_arguments(method)))
    finally:
        session.close() if isinstance(session, KappiClient | ChonkitClient) else _run_async(session.aclose())
    assert len(sent) == 1, f"{name}: {len(sent)} requests"
    return sent[0], method


def _run_sync(call: Any) -> Any:
    return next(call) if inspect.isgenerator(call) else call


def _run_async(call: Any) -> Any:
    import asyncio

    async def drive() -> Any:
        return await anext(call) if inspect.isasyncgen(call) else await call

    with asyncio.Runner() as runner:
        return runner.run(drive())


def _operation(documents: dict[str, Doc], service: str, request: httpx.Request) -> tuple[str, Doc]:
    document = documents[service]
    path = request.url.path.removeprefix("/prefix")
    templates = [t for t in document["paths"] if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", t), path)]
    assert len(templates) == 1, f"{request.method} {path} matches {templates}"
    operation = document["paths"][templates[0]].get(request.method.lower())
    assert operation is not None, f"the API has no {request.method} {templates[0]}"
    return templates[0], operation


def _calls() -> list[tuple[str, Client, str]]:
    return [
        (service, client, name)
        for service, pair in CLIENTS.items()
        for client in pair
        for name in _methods(client)
        if name not in COMPOSITE
    ]


@pytest.mark.parametrize(
    ("service", "client", "name"), _calls(), ids=lambda v: v if isinstance(v, str) else getattr(v, "__name__", "")
)
def test_every_client_method_is_an_operation_with_matching_query_body_and_answer(
    documents: dict[str, Doc], service: str, client: Client, name: str
) -> None:
    request, method = _recorded(client, name)
    _, operation = _operation(documents, service, request)
    allowed = {p["name"] for p in operation.get("parameters", []) if p["in"] == "query"}
    assert set(request.url.params) <= allowed
    _check_body(documents[service], operation, request)
    _check_answer(method, operation)


def test_every_operation_of_both_documents_has_a_client_method(documents: dict[str, Doc]) -> None:
    """Enumerated from the documents: each operation is what one method of each client (sync and async) sends."""
    for asynchronous, synchronous in CLIENTS.values():
        for client in (asynchronous, synchronous):
            service = next(s for s, pair in CLIENTS.items() if client in pair)
            covered: dict[tuple[str, str], str] = {}
            for name in _methods(client):
                if name in COMPOSITE:
                    continue
                request, _ = _recorded(client, name)
                template, _ = _operation(documents, service, request)
                key = (request.method, template)
                assert key not in covered, f"{client.__name__}.{name} and .{covered.get(key)} both send {key}"
                covered[key] = name
            wanted = {(method.upper(), path) for s, method, path, _ in generate.operations(documents) if s == service}
            assert wanted - set(covered) == set(), f"{client.__name__} has no method for these"
            assert set(covered) <= wanted


def _check_body(document: Doc, operation: Doc, request: httpx.Request) -> None:
    kind = request.headers.get("content-type", "")
    if not request.content:
        assert not operation.get("requestBody", {}).get("required"), "the API requires a body the client omits"
    elif kind.startswith("multipart/form-data"):
        form = operation["requestBody"]["content"]["multipart/form-data"]["schema"]
        fields = set(re.findall(rb'form-data; name="([^"]+)"', request.content))
        properties = document["components"]["schemas"][form["$ref"].rsplit("/", 1)[-1]]["properties"]
        assert {f.decode() for f in fields} <= set(properties)
    else:
        schema = operation["requestBody"]["content"]["application/json"]["schema"]
        jsonschema.Draft202012Validator({**schema, "components": document["components"]}).validate(
            msgspec.json.decode(request.content)
        )


def _check_answer(method: Callable[..., Any], operation: Doc) -> None:
    answer = typing.get_type_hints(method)["return"]
    success = next(r for status, r in operation["responses"].items() if status.startswith("2"))
    content: Doc = success.get("content", {})
    schema = next(iter(content.values()), {}).get("schema") if content else None
    if answer is type(None):
        assert schema in (None, {"type": "null"}), "the API answers with a body the client drops"
    elif typing.get_origin(answer) in (AsyncGenerator, Generator):
        assert schema == {}, "a stream's events are not in the document (see UNDOCUMENTED)"
    elif answer is bytes:
        assert list(content) == [""], "a file download"
    elif not schema:
        assert answer in UNDOCUMENTED or answer == dict[str, Any], f"the API documents no answer for {answer}"
    else:
        ours, theirs = client_shape(msgspec.inspect.type_info(answer)), server_shape(schema)
        assert ours == theirs, f"ours {set(ours)}, the API's {set(theirs)}"
