// Users: the agents you may use, your chats (rename, delete), and a chat with streamed, cited answers.
import * as api from "./api.js";
import { h, replace, messageArea, showError, busy, empty, pages } from "./ui.js";

export async function chatsScreen(main, services) {
  const base = services.kappi;
  const [agents, chats] = await Promise.all([api.get(`${base}/agents`), api.get(`${base}/chats?limit=100`)]);
  replace(main, h("h1", {}, "Chat"),
    h("div", { class: "grid" },
      h("section", { class: "card", "aria-labelledby": "agents-title" }, h("h2", { id: "agents-title" }, "Agents you can use"),
        agents.length ? h("ul", { class: "plain", id: "agent-list" }, agents.map((agent) => agentItem(base, agent)))
          : empty("No agents are available to you yet. Ask an admin to give one of your groups access.")),
      h("section", { class: "card", "aria-labelledby": "history-title" }, h("h2", { id: "history-title" }, "Your chats"),
        history(base, chats, null))));
}

function agentItem(base, agent) {
  const start = h("button", { type: "button" }, "Start chat");
  start.addEventListener("click", () => busy(start, async () => {
    try {
      const chat = await api.post(`${base}/chats`, { agent_id: agent.id });
      location.hash = `#/chats/${chat.id}`;
    } catch (error) { alert(error.detail); }
  }));
  return h("li", {}, h("span", { class: "stack" }, h("strong", {}, agent.name),
    agent.description ? h("span", { class: "muted" }, agent.description) : null), start);
}

function history(base, chats, currentId) {
  if (!chats.length) return empty("No chats yet. Start one with an agent.");
  return h("ul", { class: "plain" }, chats.map((chat) => {
    const rename = h("button", { type: "button", class: "secondary", "aria-label": `Rename ${chat.title}` }, "Rename");
    const remove = h("button", { type: "button", class: "danger", "aria-label": `Delete ${chat.title}` }, "Delete");
    const link = h("a", { href: `#/chats/${chat.id}`, "aria-current": chat.id === currentId ? "page" : null },
      chat.title || "(untitled)", h("br"), h("small", { class: "muted" }, chat.agent_name));
    rename.addEventListener("click", () => busy(rename, async () => {
      const title = prompt("New title", chat.title);
      if (!title || !title.trim()) return;
      try {
        const saved = await api.patch(`${base}/chats/${chat.id}`, { title: title.trim() });
        chat.title = saved.title;
        link.firstChild.textContent = saved.title;
      } catch (error) { alert(error.detail); }
    }));
    remove.addEventListener("click", () => busy(remove, async () => {
      if (!confirm(`Delete the chat “${chat.title}”?`)) return;
      try {
        await api.del(`${base}/chats/${chat.id}`);
        if (chat.id === currentId) location.hash = "#/chats";
        else remove.closest("li").remove();
      } catch (error) { alert(error.detail); }
    }));
    return h("li", {}, link, rename, remove);
  }));
}

export async function chatScreen(main, services, id) {
  const base = services.kappi;
  const [detail, chats] = await Promise.all([api.get(`${base}/chats/${id}`), api.get(`${base}/chats?limit=100`)]);
  const messages = h("div", { class: "messages", "aria-live": "polite" },
    detail.messages.length ? detail.messages.map(messageView) : empty("Ask your first question below."));
  const message = messageArea();
  const input = h("textarea", { name: "content", required: true, placeholder: "Ask a question…", rows: 3 });
  const submit = h("button", { type: "submit" }, "Send");
  const form = h("form", { class: "stack", "aria-label": "Ask" }, h("label", {}, "Your question", input),
    h("div", { class: "row" }, submit, h("span", { class: "muted" }, "Ctrl+Enter sends")), message);
  input.addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) form.requestSubmit(); });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const content = input.value.trim();
    if (!content) return;
    busy(submit, async () => {
      message.textContent = "";
      messages.querySelector(".empty")?.remove();
      messages.append(h("div", { class: "msg user" }, content));
      input.value = "";
      await stream(base, id, content, messages, message);
      input.focus();
    });
  });
  replace(main,
    h("div", { class: "chat-layout" },
      h("aside", { class: "card", "aria-labelledby": "history-title" }, h("h2", { id: "history-title" }, "Your chats"),
        h("p", {}, h("a", { href: "#/chats" }, "+ New chat")), history(base, chats, id)),
      h("section", { class: "card", "aria-labelledby": "chat-title" },
        h("h1", { id: "chat-title" }, detail.chat.title || "New chat", " ", h("small", { class: "muted" }, detail.chat.agent_name)),
        messages, form)));
  input.focus();
}

/** One answer, streamed: `sources` first (citations, or none), then `token`s, then `done` or `error`. */
async function stream(base, chatId, content, messages, message) {
  const text = h("div", { class: "answer-text" });
  const sources = h("div", { class: "citations" });
  const bubble = h("div", { class: "msg assistant", "aria-busy": "true" }, text, sources);
  messages.append(bubble);
  try {
    for await (const { event, data } of api.events("POST", `${base}/chats/${chatId}/messages/stream`, { content })) {
      if (event === "sources") replace(sources, citationsView(data.citations));
      else if (event === "token") text.append(data.text);
      else if (event === "done") bubble.dataset.status = "complete";
      else if (event === "error") {
        bubble.dataset.status = "error";
        bubble.append(h("p", { class: "error" }, data.detail));
      }
    }
  } catch (error) {
    bubble.dataset.status = "error";
    showError(message, error);
  } finally {
    bubble.removeAttribute("aria-busy");
  }
}

function messageView(msg) {
  if (msg.role === "user") return h("div", { class: "msg user" }, msg.content);
  return h("div", { class: "msg assistant", "data-status": msg.status },
    h("div", { class: "answer-text" }, msg.content),
    msg.status === "error" ? h("p", { class: "error" }, `This answer failed (${msg.error_code}).`) : null,
    h("div", { class: "citations" }, citationsView(msg.citations)));
}

function citationsView(citations) {
  if (!citations.length) {
    return h("p", { class: "no-sources", role: "note" }, "No sources: nothing in the collections you can read matched, " +
      "so this answer is not grounded in your documents.");
  }
  return [h("strong", {}, `Sources (${citations.length})`), citations.map((c) => h("details", { class: "citation" },
    h("summary", {}, `[${c.citation}] ${c.document_name || c.document_id}`, c.page_start != null ? `, ${pages(c.page_start, c.page_end)}` : ""),
    h("p", { class: "muted" }, `collection ${c.collection} · score ${c.score.toFixed(3)}`),
    h("div", { class: "chunk" }, c.text)))];
}
