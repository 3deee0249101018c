"""A question the model refuses (longer than its context) is the caller's ``422 llm_rejected`` on every path.

The model is the OpenAI-compatible stand-in answering with OpenAI's own "context too long" error (HTTP 400, its
real body); the same error through a real llama.cpp server is ``tests/hardening/test_input_bounds.py``.
The JSON paths once answered 500: the upstream's ``status`` in the error's ``extra`` collided with the problem
document's own (issue #26, item 5).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from common.clients import SharedClients
from common.config import Settings
from common.db import SingleConnectionDatabase
from kappi.app import create_app as create_kappi
from tests.kappi.conftest import AppClient, as_user, sse_events
from tests.support.llm_standins import OpenAIStandin, Script

TOO_LONG = (
    "This model's maximum context length is 8192 tokens. However, your messages resulted in 12001 tokens. "
    "Please reduce the length of the messages."
)


@dataclass
class Refusing:
    client: httpx.AsyncClient
    llm: OpenAIStandin
    agent_id: str
    user: dict[str, str]


@pytest.fixture
async def refusing(
    settings: Settings, db: SingleConnectionDatabase, clients: SharedClients, app_client: AppClient
) -> AsyncIterator[Refusing]:
    async with OpenAIStandin() as llm:
        llm.script = Script(status=400, error_message=TOO_LONG)
        served = settings.with_(openai_base_url=llm.base_url, openai_models="standin")
        async with app_client(create_kappi(served, database=db, clients=clients)) as client:
            admin = as_user(settings, "root", admin=True)
            spec = {"name": "Refused", "llm_provider": "openai", "llm_model": "standin"}
            agent = await client.post("/admin/agents", json=spec, headers=admin)
            assert agent.status_code == 201, agent.text
            yield Refusing(client=client, llm=llm, agent_id=agent.json()["id"], user=as_user(settings, "alice"))


def _assert_rejected(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 422, response.text[:500]
    assert response.headers["content-type"].startswith("application/problem+json")
    body: dict[str, Any] = response.json()
    assert (body["status"], body["code"]) == (422, "llm_rejected")
    assert "maximum context length" in body["detail"]
    assert (body["provider"], body["upstream_status"]) == ("openai", 400)
    return body


async def test_a_question_over_the_models_context_is_422_on_the_query_api_standin_llm(refusing: Refusing) -> None:
    response = await refusing.client.post(
        f"/agents/{refusing.agent_id}/query", json={"content": "why? " * 2000}, headers=refusing.user
    )
    _assert_rejected(response)
    assert len(refusing.llm.requests) == 1


async def test_a_question_over_the_models_context_is_422_in_a_chat_standin_llm(refusing: Refusing) -> None:
    chat = await refusing.client.post("/chats", json={"agent_id": refusing.agent_id}, headers=refusing.user)
    path = f"/chats/{chat.json()['id']}/messages"
    response = await refusing.client.post(path, json={"content": "why? " * 2000}, headers=refusing.user)
    _assert_rejected(response)
    streamed = await refusing.client.post(f"{path}/stream", json={"content": "why? " * 2000}, headers=refusing.user)
    events = sse_events(streamed.text)
    assert events[-1][0] == "error"
    assert events[-1][1]["code"] == "llm_rejected"
