"""The SCIM 2.0 endpoint (RFC 7643/7644) an identity provider pushes users and groups to: scim2-server serves the
protocol, :mod:`common.directory.storage` keeps the resources, this module reads the request, checks the SCIM
credential and runs each request in one transaction.

The credential is ``RAGU_SCIM_TOKEN`` alone: a user's token is refused here (401 ``scim_credential_required``), as
the credential is refused as a user's token everywhere else (:mod:`common.auth`). Only ``/ServiceProviderConfig``
answers without it (RFC 7643 §5). Errors are SCIM error documents, exactly (a member of ours would fail strict
clients, scim2-client among them); their stable code travels in the ``Ragu-Error-Code`` header.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Final
from urllib.parse import parse_qsl

from scim2_models import (
    AuthenticationScheme,
    Bulk,
    ChangePassword,
    EnterpriseUser,
    ETag,
    External,
    Filter,
    Group,
    Patch,
    Reference,
    ResourceType,
    SCIMException,
    ScimPolicy,
    ScimProvider,
    ServiceProviderConfig,
    Sort,
    User,
)
from scim2_server.applications.base import BaseApplication
from scim2_server.handler import AsyncScimHandler
from scim2_server.requests import ScimRequest
from scim2_server.responses import ScimResponse
from scim2_server.service import ScimService

from common.db import Database
from common.directory.membership import check_scim_token, is_scim_token
from common.directory.mount import CODE_HEADER, ERROR_SCHEMA, SCIM_PATH, Receive, Scope, Send
from common.directory.storage import DirectoryUser, PostgresStorage

MAX_BODY_BYTES: Final = 1024 * 1024
MAX_RESULTS: Final = 200

PROVIDER: Final = ScimProvider(
    models=[User, EnterpriseUser, Group],
    # Identity providers depart from RFC 7644 in known ways, which scim2-models can accept: Entra ID removes a group
    # member with a value rather than a path filter, and adds through a filter matching nothing; attributes no
    # schema here declares (an IdP's custom extension) are dropped rather than failing its whole push.
    policy=ScimPolicy(
        unknown=ScimPolicy.Unknown.ignore,
        remove_value_as_filter=ScimPolicy.RemoveValue.apply,
        unmatched_path_filter=ScimPolicy.UnmatchedPathFilter.create,
    ),
    resource_types=[ResourceType.from_resource(DirectoryUser), ResourceType.from_resource(Group)],
    config=ServiceProviderConfig(
        documentation_uri=Reference[External]("https://github.com/ragu/ragu/blob/main/docs/directory.md"),
        patch=Patch(supported=True),
        bulk=Bulk(supported=False, max_operations=0, max_payload_size=0),
        filter=Filter(supported=True, max_results=MAX_RESULTS),
        change_password=ChangePassword(supported=False),
        sort=Sort(supported=True),
        etag=ETag(supported=False),
        authentication_schemes=[
            AuthenticationScheme(
                type=AuthenticationScheme.Type.oauthbearertoken,
                name="bearer_token",
                description="RAGU_SCIM_TOKEN, sent as 'Authorization: Bearer <token>'",
                spec_uri=Reference[External]("https://datatracker.ietf.org/doc/html/rfc6750"),
                primary=True,
            )
        ],
    ),
)


class ScimEndpoint(BaseApplication):
    """The SCIM protocol over the directory tables, for one service's lifetime.

    Args:
        token: The SCIM credential (``RAGU_SCIM_TOKEN``).
    """

    def __init__(self, token: str) -> None:
        check_scim_token(token)
        super().__init__(PROVIDER, ScimService(PROVIDER))
        self._token = token

    def authenticated(self, request: ScimRequest) -> bool:
        scheme, _, bearer = (request.header("Authorization") or "").strip().partition(" ")
        return scheme.lower() == "bearer" and is_scim_token(self._token, bearer.strip())

    async def serve(self, request: ScimRequest, database: Database) -> ScimResponse:
        """One SCIM request in one transaction: an operation that fails part way leaves nothing behind."""
        try:
            if self.needs_auth(request) and not self.authenticated(request):
                return self.finalize_response(request, _unauthorized(request))
            async with database.transaction() as conn:
                storage = PostgresStorage(conn, for_update=request.method.upper() != "GET")
                response = await AsyncScimHandler(self.service, storage).handle(request)
        except Exception as exception:  # noqa: BLE001 - the library's contract: any failure becomes a SCIM error
            response = self.handle_exception(request, exception)
            _add_code(response, exception)
        return self.finalize_response(request, response)

    async def handle(self, scope: Scope, receive: Receive, send: Send, database: Database) -> None:
        """One ASGI request below the mount (:func:`common.directory.mount.scim_mount`)."""
        read = await read_request(scope, receive)
        await send_response(read if isinstance(read, ScimResponse) else await self.serve(read, database), send)


def _unauthorized(request: ScimRequest) -> ScimResponse:
    sent = bool((request.header("Authorization") or "").strip())
    code = "scim_credential_invalid" if sent else "scim_credential_required"
    detail = (
        "this is not the SCIM credential (a user's token is not accepted here)"
        if sent
        else "the SCIM endpoint requires 'Authorization: Bearer <RAGU_SCIM_TOKEN>'"
    )
    body = {"schemas": [ERROR_SCHEMA], "status": "401", "detail": detail}
    headers = {"WWW-Authenticate": 'Bearer realm="ragu-scim"', CODE_HEADER: code}
    return ScimResponse(status=HTTPStatus.UNAUTHORIZED, body=body, headers=headers)


def _add_code(response: ScimResponse, exception: Exception) -> None:
    """A stable code in :data:`CODE_HEADER`: ``scim_<scimType>`` when there is one, else the status's name."""
    scim_type = response.body.get("scimType") if response.body is not None else None
    if isinstance(exception, SCIMException) and scim_type:
        response.headers[CODE_HEADER] = f"scim_{scim_type}"
    else:
        response.headers[CODE_HEADER] = f"scim_{HTTPStatus(int(response.status)).phrase.lower().replace(' ', '_')}"


async def read_request(scope: Scope, receive: Receive) -> ScimRequest | ScimResponse:
    """The SCIM request of an ASGI request below the mount, or the 413 for a body past :data:`MAX_BODY_BYTES`."""
    headers = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]}
    host = headers.get("host") or "{}:{}".format(*(scope.get("server") or ("localhost", 80)))
    request = ScimRequest(  # Litestar hands a mount the path below it, and leaves root_path as the host set it
        method=scope["method"],
        base_url=f"{scope['scheme']}://{host}{scope.get('root_path', '')}{SCIM_PATH}",
        path=BaseApplication.split_path(scope["path"] or "/"),
        query=dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)),
        headers=list(headers.items()),
    )
    body = bytearray()
    more = True
    while more:
        message = await receive()
        body += message.get("body", b"")
        more = message.get("more_body", False)
        if len(body) > MAX_BODY_BYTES:
            detail = f"a SCIM request may carry at most {MAX_BODY_BYTES} bytes"
            error = {"schemas": [ERROR_SCHEMA], "status": "413", "detail": detail}
            headers = {CODE_HEADER: "payload_too_large"}
            return ScimResponse(status=HTTPStatus.REQUEST_ENTITY_TOO_LARGE, body=error, headers=headers)
    request.body = bytes(body)
    return request


async def send_response(response: ScimResponse, send: Send) -> None:
    body = b"" if response.body is None else json.dumps(response.body).encode()
    headers = [(name.lower().encode(), value.encode()) for name, value in response.headers.items()]
    await send({"type": "http.response.start", "status": int(response.status), "headers": headers})
    await send({"type": "http.response.body", "body": body})
