"""What the directory's tests share: a SCIM credential, the settings that configure a directory, and the official
scim2-client aimed at an app in process or at a served Ragu."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

from scim2_client.engines.asgi import ASGISCIMClient
from scim2_models import Group, PatchOp

from common.config import Secret, Settings
from common.directory.scim import PROVIDER
from common.directory.storage import DirectoryUser

SCIM_TOKEN = "scim-test-credential-0123456789abcdefghijkl"


def hs256_token(secret: str, *, subject: str = "admin", lifetime: int = 600, **claims: Any) -> str:
    """A token signed by hand (a forger's, or one expired: ``lifetime`` negative), outside the code under test."""
    now = int(time.time())
    body = {"sub": subject, "iat": now - abs(lifetime) * 2 if lifetime < 0 else now, "exp": now + lifetime, **claims}

    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    signing_input = f"{b64(json.dumps({'alg': 'HS256', 'typ': 'JWT'}).encode())}.{b64(json.dumps(body).encode())}"
    signature = hmac.new(secret.encode(), signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{b64(signature)}"


def with_directory(settings: Settings, **overrides: Any) -> Settings:
    return settings.with_(scim_token=Secret(SCIM_TOKEN), **overrides)


def scim_client(app: Any, base_url: str = "http://ragu.test/scim/v2", token: str = SCIM_TOKEN) -> Any:
    """The official client, calling the app in process (its lifespan must be running); typed ``Any``: its answers
    are unions of the resource, an ``Error`` and a dict, which the tests check by what they assert."""
    return ASGISCIMClient(app, base_url=base_url, headers={"Authorization": f"Bearer {token}"}, provider=PROVIDER)


def user(user_name: str, *, active: bool = True, external_id: str | None = None) -> Any:
    return DirectoryUser(user_name=user_name, active=active, external_id=external_id)


def group(name: str, *member_ids: str) -> Group:
    members = [{"value": m, "type": "User"} for m in member_ids]
    return Group.model_validate({"displayName": name, **({"members": members} if members else {})})


_PATCH_OP = "urn:ietf:params:scim:api:messages:2.0:PatchOp"


def remove_member(user_id: str) -> Any:
    """The PATCH Okta and Entra send to take one user out of a group."""
    operation = {"op": "remove", "path": f'members[value eq "{user_id}"]'}
    return PatchOp[Group].model_validate({"schemas": [_PATCH_OP], "Operations": [operation]})


def add_member(user_id: str) -> Any:
    operation = {"op": "add", "path": "members", "value": [{"value": user_id}]}
    return PatchOp[Group].model_validate({"schemas": [_PATCH_OP], "Operations": [operation]})


def deactivate() -> Any:
    """Entra's and Okta's deactivation: ``replace active false``."""
    operation = {"op": "replace", "path": "active", "value": False}
    return PatchOp[DirectoryUser].model_validate({"schemas": [_PATCH_OP], "Operations": [operation]})
