// Users: the agents you may use, your chats (rename, delete), and a chat with streamed, cited answers.
import * as api from "./api.js";
import { Marked } from "../vendor/marked-18.2.1.esm.js";
import DOMPurify from "../vendor/purify-3.5.0.es.js";
import { h, replace, messageArea, showError, busy, empty, pages, notice, plainWords, problemOf, uid } from "./ui.js";

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

/** "Start chat" opens an empty chat with the agent; it is made with its first question, so none is left unasked. */
function agentItem(base, agent) {
  const start = h("button", { type: "button" }, "Start chat");
  start.addEventListener("click", () => { location.hash = `#/chats/new/${agent.id}`; });
  return h("li", {}, h("span", { class: "stack tight grow" }, h("strong", {}, agent.name),
    agent.description ? h("span", { class: "muted" }, agent.description) : null), start);
}

/** Your chats; the one open is renamed in place (Enter saves, Escape cancels) or deleted after a confirmation. */
function history(base, chats, currentId, onRenamed = () => {}) {
  const noChats = () => empty("No chats yet. Start one with an agent.");
  if (!chats.length) return noChats();
  const list = h("ul", { class: "plain history" });
  const wrapper = h("div", {}, list);

  function chatItem(chat) {
    const item = h("li", {});
    let renameButton = null;

    function show() {
      const link = h("a", { href: `#/chats/${chat.id}`, "aria-current": chat.id === currentId ? "page" : null },
        chat.title || "(untitled)", h("br"), agentLabel(chat));
      renameButton = h("button", { type: "button", class: "secondary", "aria-label": `Rename ${chat.title}`, onclick: edit }, "Rename");
      const remove = h("button", { type: "button", class: "danger", "aria-label": `Delete ${chat.title}` }, "Delete");
      remove.addEventListener("click", () => busy(remove, async () => {
        if (!confirm(`Delete the chat “${chat.title}”?`)) return;
        try {
          await api.del(`${base}/chats/${chat.id}`);
          if (chat.id === currentId) { location.hash = "#/chats"; return; }
          item.remove();
          if (!list.children.length) replace(wrapper, noChats());
        } catch (error) { notice(error); }
      }));
      replace(item, link, chat.id === currentId ? [renameButton, remove] : null);
    }

    function edit() {
      const message = messageArea();
      const input = h("input", { type: "text", name: "title", value: chat.title, required: true, maxlength: 200,
        "aria-label": `New title for ${chat.title}` });
      const save = h("button", { type: "submit" }, "Save");
      const cancel = h("button", { type: "button", class: "secondary" }, "Cancel");
      const form = h("form", { class: "rename stack" }, input, h("div", { class: "row" }, save, cancel), message);
      const back = () => { show(); renameButton.focus(); };
      cancel.addEventListener("click", back);
      input.addEventListener("keydown", (e) => { if (e.key === "Escape") back(); });
      form.addEventListener("submit", (event) => {
        event.preventDefault();
        busy(save, async () => {
          try {
            const saved = await api.patch(`${base}/chats/${chat.id}`, { title: input.value.trim() });
            chat.title = saved.title;
            back();
            onRenamed(chat);
          } catch (error) {
            showError(message, error);
          }
        });
      });
      replace(item, form);
      input.focus();
      input.select();
    }

    show();
    return item;
  }

  list.append(...chats.map(chatItem));
  return wrapper;
}

export async function chatScreen(main, services, id) {
  const base = services.kappi;
  const [detail, chats] = await Promise.all([api.get(`${base}/chats/${id}`), api.get(`${base}/chats?limit=100`)]);
  chatView(main, services, detail, chats, null);
}

/** A chat with `agentId` not made yet: its first question makes it. */
export async function newChatScreen(main, services, agentId) {
  const base = services.kappi;
  const [agents, chats] = await Promise.all([api.get(`${base}/agents`), api.get(`${base}/chats?limit=100`)]);
  const agent = agents.find((a) => a.id === agentId);
  if (!agent) throw problemOf("This agent is not available to you. Choose another under Chat.");
  const chat = { id: null, agent_id: agent.id, agent_name: agent.name, agent_available: true, title: "" };
  chatView(main, services, { chat, messages: [] }, chats, agent.id);
}

function chatView(main, services, detail, chats, newWith) {
  const base = services.kappi;
  let id = detail.chat.id;
  const sources = sourceDownloader(services);
  const messages = h("div", { class: "messages", "aria-live": "polite" },
    detail.messages.length ? detail.messages.map((msg) => messageView(msg, sources)) : empty("Ask your first question below."));
  const title = h("h1", { id: "chat-title" });
  const showTitle = (chat) => replace(title, chat.title || "New chat", " ", agentLabel(chat));
  showTitle(detail.chat);
  const onRenamed = (chat) => { if (chat.id === id) showTitle(chat); };
  const chatList = h("div", {}, history(base, chats, id, onRenamed));
  let untitled = !detail.messages.length; // kappi titles a chat after its first question
  const message = messageArea();
  const input = h("textarea", { name: "content", required: true, placeholder: "Ask a question…", rows: 3 });
  const submit = h("button", { type: "submit" }, "Send");
  const form = h("form", { class: "stack", "aria-label": "Ask" }, h("label", {}, "Your question", input),
    h("div", { class: "row" }, submit, h("span", { class: "muted" }, "Ctrl+Enter sends")), message);
  input.addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) form.requestSubmit(); });
  if (!detail.chat.agent_available) {
    input.disabled = submit.disabled = true;
    message.id = uid("ask-note");
    input.setAttribute("aria-describedby", message.id);
    message.textContent = "This chat's agent is no longer available: you can read the chat but not ask more.";
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const content = input.value.trim();
    if (!content) return;
    busy(submit, async () => {
      message.textContent = "";
      messages.querySelector(".empty")?.remove();
      if (id === null) {
        try {
          id = (await api.post(`${base}/chats`, { agent_id: newWith })).id;
        } catch (error) { showError(message, error); return; }
        window.history.replaceState(null, "", `#/chats/${id}`); // no hashchange: the screen stays
      }
      messages.append(h("div", { class: "msg user" }, content));
      input.value = "";
      await stream(base, id, content, messages, message, sources);
      if (untitled) {
        untitled = false;
        await retitle();
      }
      input.focus();
    });
  });
  replace(main,
    h("div", { class: "chat-layout" },
      h("aside", { class: "card", "aria-labelledby": "history-title" }, h("h2", { id: "history-title" }, "Your chats"),
        h("p", {}, h("a", { href: "#/chats" }, "+ New chat")),
        chatList),
      h("section", { class: "card", "aria-labelledby": "chat-title" }, title, messages, form)));
  input.focus();

  async function retitle() {
    try {
      const fresh = await api.get(`${base}/chats?limit=100`);
      const chat = fresh.find((c) => c.id === id);
      if (chat) showTitle(chat);
      replace(chatList, history(base, fresh, id, onRenamed));
    } catch (error) { notice(error); }
  }
}

// kappi names no agent the user may no longer use (deactivated, or no longer for their groups).
const UNAVAILABLE = "agent no longer available";

function agentLabel(chat) {
  return chat.agent_available ? h("small", { class: "muted" }, chat.agent_name)
    : h("small", { class: "muted unavailable" }, UNAVAILABLE);
}

const SHOW_WAIT_MS = 1000; // a wait shorter than this is not counted on screen

const PRELIMINARY_WRITING = "Preliminary answer, quoted from the sources. The model is writing its own…";
const PRELIMINARY_FOLLOWS = "Preliminary answer, quoted from the sources. The model's answer follows below, "
  + "sentence by sentence, and ends with this quote when complete.";

/**
 * One answer, streamed: `sources` first (the passages the answer is given), then, when a model answers and a
 * passage does, a `preliminary` quote of the passages (shown at once, marked as preliminary, its quote
 * highlighted in its passage), then `token`s (the model's sentences, each once grounding has checked it), then
 * `done` (the passages it cites, and those it was given without citing them) or `error`. The preliminary quote
 * goes once the model's answer is complete: that answer, the one stored, ends with the same quote. Until the
 * first words, the wait is shown as it grows ("thinking… 3.2 s"): a small local model can think for seconds
 * before it writes.
 */
async function stream(base, chatId, content, messages, message, download) {
  const text = h("div", { class: "answer-text" });
  const sources = h("div", { class: "citations" });
  const waited = h("p", { class: "thinking muted", role: "status", hidden: true });
  const bubble = h("div", { class: "msg assistant", "aria-busy": "true" }, waited, text, sources);
  messages.append(bubble);
  const started = performance.now();
  const seconds = () => ((performance.now() - started) / 1000).toFixed(1);
  // The wait shows only once it is long enough to notice, and goes when the answer is complete.
  const clock = setInterval(() => {
    if (performance.now() - started < SHOW_WAIT_MS) return;
    waited.hidden = false;
    waited.textContent = `thinking… ${seconds()} s`;
  }, 100);
  let thinking = true;
  const firstToken = () => {
    if (!thinking) return;
    thinking = false;
    clearInterval(clock);
    if (waited.hidden) waited.remove();
    else waited.textContent = `first words after ${seconds()} s`;
  };
  let answer = "";
  let citations = [];
  let preliminary = null;
  try {
    for await (const { event, data } of api.events("POST", `${base}/chats/${chatId}/messages/stream`, { content })) {
      if (event === "sources") {
        citations = data.citations;
        replace(sources, citationsView(citations, download));
      } else if (event === "preliminary") {
        firstToken();
        preliminary = h("div", { class: "preliminary", role: "note" },
          h("p", { class: "preliminary-label muted" }, PRELIMINARY_WRITING),
          h("div", { class: "preliminary-text" }, answerView(data.text, citations)));
        bubble.insertBefore(preliminary, text);
        bubble.dataset.preliminary = "shown";
        replace(sources, citationsView(citations, download, [], quotesOf(data.text)));
      } else if (event === "token") {
        firstToken();
        if (preliminary && !answer) preliminary.querySelector(".preliminary-label").textContent = PRELIMINARY_FOLLOWS;
        answer += data.text;
        replace(text, answerView(answer, citations)); // a marker or a list item may span two tokens
      } else if (event === "done") {
        if (preliminary && answer) {
          preliminary.remove(); // the model's answer, now complete, is the answer (and ends with the quote)
          bubble.dataset.preliminary = "replaced";
        }
        bubble.dataset.status = "complete";
        replace(sources, citationsView(data.citations ?? citations, download, data.also_retrieved ?? [], quotesOf(answer)));
        bubble.append(...answerNotes(data));
      } else if (event === "error") {
        bubble.dataset.status = "error";
        bubble.append(h("p", { class: "error" }, plainWords(data)));
      }
    }
  } catch (error) {
    bubble.dataset.status = "error";
    showError(message, error);
  } finally {
    clearInterval(clock);
    waited.remove();
    bubble.removeAttribute("aria-busy");
  }
}

/** Why grounding left a sentence out, by the reason code `grounding.unsupported` gives (never its words). */
const LEFT_OUT_BECAUSE = {
  no_source: "Resting on no source",
  repeats_prompt: "Repeating the question or the answering rules",
};

/**
 * What the finished answer's metadata says beside it: which provider answered when the agent's model could not,
 * and how many of the model's sentences were left out and why (folded away). The server sends a reason per
 * sentence and never its words: a sentence no source supports may repeat the agent's confidential instructions.
 */
function answerNotes(done) {
  const notes = [];
  const fallback = done.llm_fallback;
  if (fallback) {
    notes.push(h("p", { class: "fallback muted", role: "note" },
      `The agent's model did not answer (${fallback.detail}): these are quotes from the documents.`));
  }
  const reasons = done.grounding?.unsupported ?? [];
  const left = done.grounding?.dropped_sentences ?? reasons.length;
  if (left) {
    const counts = new Map();
    for (const reason of reasons) counts.set(reason, (counts.get(reason) ?? 0) + 1);
    const summary = left === 1 ? "1 sentence left out" : `${left} sentences left out`;
    notes.push(h("details", { class: "unsupported" }, h("summary", {}, summary),
      h("ul", {}, [...counts].map(([reason, n]) =>
        h("li", {}, `${LEFT_OUT_BECAUSE[reason] ?? "Resting on no source"}: ${n}`)))));
  }
  return notes;
}

/** Admins may download a cited document's original from chonkit; for everyone else there is no button. */
function sourceDownloader(services) {
  const session = api.current();
  if (!session || !session.is_admin) return null;
  return (citation) => api.download(`${services.chonkit}/documents/${citation.document_id}/content`,
    citation.document_name || "document");
}

function messageView(msg, download) {
  if (msg.role === "user") return h("div", { class: "msg user" }, msg.content);
  if (msg.withheld) {
    return h("div", { class: "msg assistant", "data-status": "withheld" },
      h("p", { class: "no-sources", role: "note" }, "This answer is hidden: it quoted documents you can no longer read."));
  }
  const unfinished = { pending: "This answer is still being written; reload to see it.",
    cancelled: "This answer was stopped before it finished." }[msg.status];
  if (unfinished && !msg.content) {
    return h("div", { class: "msg assistant", "data-status": msg.status },
      h("p", { class: "no-sources", role: "note" }, unfinished));
  }
  return h("div", { class: "msg assistant", "data-status": msg.status },
    h("div", { class: "answer-text" }, answerView(msg.content, msg.citations)),
    msg.status === "error" ? h("p", { class: "error" }, `This answer failed (${msg.error_code}).`) : null,
    h("div", { class: "citations" }, citationsView(msg.citations, download, msg.also_retrieved ?? [], quotesOf(msg.content))));
}

const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
// HTML written in an answer shows as the text it is: an answer quotes documents, which may hold markup.
const markdown = new Marked({ gfm: true, renderer: { html: ({ text }) => text.replace(/[&<>"']/g, (c) => ESCAPES[c]) } });
const SAFE = { FORBID_TAGS: ["img", "style", "form", "input", "button", "textarea", "select"], FORBID_ATTR: ["style"],
  RETURN_DOM_FRAGMENT: true };

/** An answer's text as Markdown (marked), sanitised (DOMPurify): an answer repeats what documents say, and no
 * document may add a script, a form or a tracking image. */
const rendered = (text) => DOMPurify.sanitize(markdown.parse(text, { async: false }), SAFE);

// Where each sentence of a block (a paragraph, a list item, a cell) ends: after its closing punctuation and the
// markers that follow it ("… at all times. [1] Badges …" ends after "[1]").
const SENTENCE_END = /[.!?]+(?:\s*\[\d+\])*(?=\s|$)/g;
const BLOCKS = "p, li, td, th, h1, h2, h3, h4, h5, h6, dt, dd";

/**
 * The answer's "[n]" markers outside code, each with the sentence of its block it stands in, and each sentence's
 * words with what it cites. A marker is `shown` unless the same marker stands later in its sentence or in the
 * next sentence of the same block: "A [1]. B [1]." reads "A. B [1]."
 */
function markersOf(fragment) {
  const blocks = new Map();
  const walker = document.createTreeWalker(fragment, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const block = node.parentElement?.closest(BLOCKS) ?? fragment;
    if (!blocks.has(block)) blocks.set(block, []);
    blocks.get(block).push(node);
  }
  const markers = [];
  const sentences = [];
  for (const nodes of blocks.values()) {
    let text = "";
    const found = [];
    for (const node of nodes) {
      if (!node.parentElement?.closest("code, pre")) {
        for (const m of node.data.matchAll(/\[(\d+)\]/g)) {
          found.push({ node, index: m.index, length: m[0].length, n: Number(m[1]), at: text.length + m.index, shown: true });
        }
      }
      text += node.data;
    }
    const ends = [...text.matchAll(SENTENCE_END)].map((m) => m.index + m[0].length);
    const sentenceAt = (at) => ends.filter((end) => end <= at).length;
    for (const marker of found) marker.sentence = sentenceAt(marker.at);
    for (const marker of found) {
      marker.shown = !found.some((later) => later !== marker && later.n === marker.n && later.at > marker.at
        && later.sentence - marker.sentence <= 1);
    }
    markers.push(...found);
    let start = 0;
    for (const [i, end] of [...ends, text.length].entries()) {
      const cites = new Set(found.filter((m) => m.sentence === i).map((m) => m.n));
      const words = text.slice(start, end).replace(/\s*\[\d+\]/g, "").replace(/\s+/g, " ").trim();
      if (words && cites.size) sentences.push({ words, cites });
      start = end;
    }
  }
  return { markers, sentences };
}

/** For each source n, the words of the answer's sentences that cite it. */
function quotesOf(text) {
  const quotes = new Map();
  for (const { words, cites } of markersOf(rendered(text)).sentences) {
    for (const n of cites) quotes.set(n, [...(quotes.get(n) ?? []), words]);
  }
  return quotes;
}

/**
 * An answer's text rendered (Markdown, sanitised). Each "[n]" is then a button that opens source n when there is
 * one (markers in code are left as written), shown once where consecutive sentences cite the same source. Links
 * open in a new tab, without the console as their referrer.
 */
function answerView(text, citations) {
  const fragment = rendered(text);
  const hidden = markersOf(fragment).markers.filter((m) => !m.shown).reverse(); // last first: offsets stay true
  for (const { node, index, length } of hidden) {
    const before = node.data.slice(0, index).replace(/\s+$/, "");
    node.data = before + node.data.slice(index + length);
  }
  for (const link of fragment.querySelectorAll("a[href]")) {
    link.target = "_blank";
    link.rel = "noopener noreferrer";
  }
  const walker = document.createTreeWalker(fragment, NodeFilter.SHOW_TEXT, {
    acceptNode: (node) => (node.parentElement?.closest("code, pre") ? NodeFilter.FILTER_REJECT : NodeFilter.FILTER_ACCEPT),
  });
  const marked = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) if (/\[\d+\]/.test(node.data)) marked.push(node);
  for (const node of marked) node.replaceWith(...withMarkers(node.data, citations));
  return [...fragment.childNodes];
}

/** `text` with each "[n]" a button that opens source n, when there is one; other text stays text. */
function withMarkers(text, citations) {
  return text.split(/(\[\d+\])/).map((part) => {
    const n = /^\[(\d+)\]$/.exec(part);
    const cited = n && citations.find((c) => c.citation === Number(n[1]));
    if (!cited) return part;
    return h("button", { type: "button", class: "cite", "aria-label": `Source ${cited.citation}: ${cited.document_name || cited.document_id}`,
      onclick: (event) => showCitation(event.currentTarget, cited.citation) }, part);
  });
}

/** Open source n of the answer holding `marker` and move to it. */
function showCitation(marker, n) {
  const source = marker.closest(".msg").querySelector(`details[data-citation="${n}"]`);
  source.open = true;
  source.scrollIntoView({ block: "nearest" });
  source.querySelector("summary").focus();
}

/**
 * The passages an answer cites, then — apart, folded — those it was given without citing them. An answer citing
 * none is a decline (or rests on nothing): it reads the same whether retrieval found passages or not, in a first
 * turn or a follow-up, without the passages it did not use.
 */
function citationsView(citations, download, alsoRetrieved = [], quotes = new Map()) {
  if (!citations.length) {
    return h("p", { class: "no-sources", role: "note" },
      "No sources: nothing in the collections you can read answers this, so this answer is not grounded in your documents.");
  }
  const also = alsoRetrieved.length
    ? h("details", { class: "also-retrieved" }, h("summary", {}, `Also retrieved, not cited (${alsoRetrieved.length})`),
      alsoRetrieved.map((c) => citationView(c, download)))
    : null;
  return [h("strong", {}, `Sources (${citations.length})`), citations.map((c) => citationView(c, download, quotes.get(c.citation))), also];
}

/**
 * A source: where it is from, and its passage folded to the sentences the answer quotes from it, highlighted.
 * Retrieval's own scores (a fused rank of 0.016, a BM25 of 7.2) mean nothing to a reader and are not shown; a
 * reranker's relevance (0 to 1) is, as a percentage.
 */
function citationView(c, download, quotes = []) {
  const relevance = c.rerank_score != null && c.rerank_score >= 0 && c.rerank_score <= 1
    ? ` · relevance ${Math.round(c.rerank_score * 100)} %` : "";
  return h("details", { class: "citation", "data-citation": c.citation },
    h("summary", {}, `[${c.citation}] ${c.document_name || c.document_id}`, c.page_start != null ? `, ${pages(c.page_start, c.page_end)}` : ""),
    h("p", { class: "muted small" }, `collection ${c.collection}${relevance}`),
    passageView(c.text, quotes), download ? downloadButton(c, download) : null);
}

const FOLD_AT = 400; // characters: a passage longer than this opens folded
const QUOTED_AT_LEAST = 20; // characters: shorter words in common (a heading, a name) are no quote

/** `text` with runs of white space as one space, and where each of its characters stands in `text`. */
function flattened(text) {
  let flat = "";
  const at = [];
  for (const m of text.matchAll(/\s+|\S+/g)) {
    if (/^\s/.test(m[0])) { flat += " "; at.push(m.index); continue; }
    flat += m[0];
    for (let i = 0; i < m[0].length; i += 1) at.push(m.index + i);
  }
  return { flat, at };
}

/** Where the passage holds the answer's sentences word for word (white space aside): [start, end) pairs. */
function quoted(text, sentences) {
  const { flat, at } = flattened(text);
  const lower = flat.toLowerCase();
  const spans = [];
  const find = (words) => {
    const i = flat.indexOf(words);
    return i >= 0 ? i : lower.indexOf(words.toLowerCase());
  };
  for (const sentence of sentences) {
    // the whole sentence, or else its parts after a label ("Vacation policy: Every employee gets …")
    const whole = find(sentence);
    const parts = whole >= 0 ? [[whole, sentence]] : sentence.split(/:\s+/).map((part) => [find(part), part]);
    for (const [i, words] of parts) {
      if (i >= 0 && words.length >= QUOTED_AT_LEAST) spans.push([at[i], at[i + words.length - 1] + 1]);
    }
  }
  spans.sort((a, b) => a[0] - b[0]);
  const merged = [];
  for (const span of spans) {
    const last = merged.at(-1);
    if (last && span[0] <= last[1]) last[1] = Math.max(last[1], span[1]);
    else merged.push([...span]);
  }
  return merged;
}

/** Sentence starts of a passage: its start, after a sentence's closing punctuation, and after a line break. */
function sentenceStarts(text) {
  const starts = [0];
  for (const m of text.matchAll(/[.!?]["')\]]*\s+|\n\s*/g)) starts.push(m.index + m[0].length);
  return [...new Set(starts)].filter((s) => s < text.length);
}

/** The part of the passage shown folded: the quoted sentences and one sentence either side, or its opening. */
function excerpt(text, spans) {
  const starts = sentenceStarts(text);
  if (!spans.length) {
    const end = starts.find((s) => s >= FOLD_AT * 0.6) ?? FOLD_AT;
    return [0, Math.min(end, text.length)];
  }
  const first = starts.filter((s) => s <= spans[0][0]);
  const from = first.length > 1 ? first.at(-2) : 0;
  const after = starts.filter((s) => s >= spans.at(-1)[1]);
  const to = after.length > 1 ? after[1] : text.length;
  return [from, to];
}

/** text[from, to) with the spans inside it marked. */
function marked(text, spans, from, to) {
  const parts = [];
  let at = from;
  for (const [start, end] of spans) {
    const s = Math.max(start, from), e = Math.min(end, to);
    if (e <= s) continue;
    if (s > at) parts.push(text.slice(at, s));
    parts.push(h("mark", {}, text.slice(s, e)));
    at = e;
  }
  if (at < to) parts.push(text.slice(at, to));
  return parts;
}

/** A cited passage, folded to what the answer quotes from it (highlighted), the whole of it one click away. */
function passageView(text, sentences) {
  const spans = quoted(text, sentences);
  const passage = h("div", { class: "chunk passage" });
  if (text.length <= FOLD_AT) return replace(passage, marked(text, spans, 0, text.length));
  const [from, to] = excerpt(text, spans);
  const toggle = h("button", { type: "button", class: "secondary small", "aria-expanded": "false" }, "Show the whole passage");
  const fold = (open) => {
    toggle.setAttribute("aria-expanded", String(open));
    toggle.textContent = open ? "Fold the passage" : "Show the whole passage";
    replace(passage, open ? marked(text, spans, 0, text.length)
      : [from > 0 ? "… " : "", marked(text, spans, from, to), to < text.length ? " …" : ""]);
  };
  toggle.addEventListener("click", () => fold(toggle.getAttribute("aria-expanded") !== "true"));
  fold(false);
  return [passage, toggle];
}


function downloadButton(citation, download) {
  const button = h("button", { type: "button", class: "secondary" }, "Download the source document");
  button.addEventListener("click", () => busy(button, async () => {
    try { await download(citation); } catch (error) { notice(error); }
  }));
  return button;
}
