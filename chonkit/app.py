"""Chonkit: the admin API that turns uploaded documents into vector collections."""

from __future__ import annotations

from litestar import Litestar, Router

from chonkit.document.controller import DocumentController
from chonkit.document.service import RegistryTokenizers
from chonkit.document.storage import BlobStore
from common.auth import Authenticator
from common.config import Settings
from common.db import Database
from common.embedders.base import EmbedderRegistry
from common.embedders.registry import default_registry
from common.http.app import build_service_app
from common.http.security import admin_only


def create_app(
    settings: Settings,
    *,
    database: Database | None = None,
    authenticator: Authenticator | None = None,
    embedders: EmbedderRegistry | None = None,
) -> Litestar:
    embedders = embedders or default_registry()
    admin = Router(
        "/",
        route_handlers=[DocumentController],
        guards=[admin_only],
        request_max_body_size=settings.chonkit_max_upload_bytes,
    )
    return build_service_app(
        service_name="chonkit",
        title="Chonkit",
        description="Documents, parsing, chunking and vector collections with identity vectors. Admin only.",
        settings=settings,
        route_handlers=[admin],
        database=database,
        authenticator=authenticator,
        state={
            "blobs": BlobStore(settings.data_path / "documents"),
            "embedders": embedders,
            "tokenizers": RegistryTokenizers(embedders),
        },
    )
