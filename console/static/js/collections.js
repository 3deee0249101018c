// Admin: collections (create, groups, add and remove documents, change the embedding model, live job progress, retry,
// search test bench).
import * as api from "./api.js";
import { h, replace, field, messageArea, showError, showOk, busy, badge, empty, groupsFrom, listFrom, pages, notice, errorLine, problemOf, plural, labelled } from "./ui.js";

export async function collectionsScreen(main, services) {
  const base = services.chonkit;
  const [providers, collections] = await Promise.all([api.get(`${base}/providers`), api.get(`${base}/collections`)]);
  replace(main, h("h1", {}, "Collections"), createForm(base, providers), collectionList(collections));
}

function createForm(base, providers) {
  const message = messageArea();
  const vector = h("select", { name: "vector_provider" }, providers.vector_providers.map((p) => h("option", { value: p }, p)));
  const model = h("select", { name: "model" }, providers.embedding_models.map((m) =>
    h("option", { value: `${m.provider}|${m.model}` }, `${m.provider} · ${m.model} (${m.dimension} dims)`)));
  const submit = h("button", { type: "submit" }, "Create collection");
  const form = h("form", { class: "card stack", "aria-labelledby": "new-collection" },
    h("h2", { id: "new-collection" }, "New collection"),
    h("div", { class: "row" },
      field("Name", { name: "name", required: true, placeholder: "Hr_docs" }),
      h("label", {}, "Vector store", vector),
      h("label", {}, "Embedding model", model)),
    field("Groups that may read it (comma-separated; empty = everyone)", { name: "groups", placeholder: "hr" }),
    h("div", { class: "row" }, submit), message);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    busy(submit, async () => {
      const [embeddingProvider, modelName] = form.model.value.split("|");
      try {
        const created = await api.post(`${base}/collections`, {
          name: form.name.value.trim(), vector_provider: form.vector_provider.value,
          embedding_provider: embeddingProvider, model: modelName, groups: groupsFrom(form.groups.value),
        });
        location.hash = `#/collections/${created.id}`;
      } catch (error) {
        showError(message, error);
      }
    });
  });
  return form;
}

function collectionList(collections) {
  return h("section", { class: "card", "aria-labelledby": "all-collections" },
    h("h2", { id: "all-collections" }, "All collections"),
    collections.length ? labelled(h("table", {},
      h("thead", {}, h("tr", {}, ["Name", "Store", "Model", "Groups", "Documents"].map((t) => h("th", {}, t)))),
      h("tbody", {}, collections.map((c) => h("tr", {},
        h("td", {}, h("a", { href: `#/collections/${c.id}` }, c.name)),
        h("td", {}, c.vector_provider), h("td", {}, c.model),
        h("td", {}, c.groups.length ? c.groups.join(", ") : h("span", { class: "muted" }, "everyone")),
        h("td", {}, c.document_count))))))
      : empty("No collections yet. Create one above."));
}

let sourceSyncs = null; // the shown collection's listener for its sources' syncs, replaced with the screen

export async function collectionScreen(main, services, id) {
  const base = services.chonkit;
  const detail = await api.get(`${base}/collections/${id}`);
  const c = detail.collection;
  const jobPanel = h("div", {});
  const recentJobs = h("div", {});
  const docsPanel = h("section", { class: "card", "aria-labelledby": "in-collection" });
  let adder = null;

  /** Follow `job` in the job card, the collection's other recent jobs listed below it. */
  function follow(job, onFinished) {
    followJob(base, job, jobPanel, async () => { await onFinished(); await showRecent(job.id); });
    showRecent(job.id).catch(notice);
  }

  async function showRecent(followed) {
    const recent = (await api.get(`${base}/jobs?collection_id=${id}&limit=${RECENT_JOBS + 1}`))
      .filter((j) => j.id !== followed).slice(0, RECENT_JOBS);
    replace(recentJobs, recent.length ? [h("h3", {}, "Earlier jobs"), h("ul", { class: "plain recent-jobs" }, recent.map((j) => {
      const finished = FINISHED.reduce((sum, stage) => sum + (j.progress[stage] || 0), 0);
      const show = h("button", { type: "button", class: "secondary", "aria-label": `Show the job of ${new Date(j.created_at).toLocaleString()}` }, "Show");
      show.addEventListener("click", () => follow(j, reloadDocuments));
      return h("li", {}, h("span", { class: "grow" }, (JOB_TITLES[j.kind] || "Embedding job ").trim(), " ", badge(j.status),
        h("span", { class: "muted" }, ` ${finished} of ${j.total} finished · ${new Date(j.created_at).toLocaleString()}`)), show);
    }))] : null);
  }

  async function reloadDocuments() {
    const current = await api.get(`${base}/collections/${id}`);
    replace(docsPanel, h("h2", { id: "in-collection" }, `Documents in this collection (${current.documents.length})`),
      h("p", { class: "muted" }, `${current.vector_count} vectors · identity ${current.identity.valid ? "valid" : "INVALID"}`),
      current.documents.length ? h("ul", { class: "plain" }, current.documents.map((d) => h("li", {},
        h("span", { class: "grow" }, d.name), h("span", { class: "muted" }, plural(d.chunk_count, "chunk")),
        d.current ? null : h("span", { class: "warn" }, "outdated: embed it again"), removeButton(d))))
        : empty("Nothing embedded yet. Add documents above."));
    adder?.held(current.documents);
  }

  function removeButton(doc) {
    const button = h("button", { type: "button", class: "danger", "aria-label": `Remove ${doc.name}` }, "Remove");
    button.addEventListener("click", () => busy(button, async () => {
      if (!confirm(`Remove “${doc.name}” and its vectors from ${c.name}? The document itself stays.`)) return;
      try {
        const created = await api.post(`${base}/collections/${id}/documents/remove`, { document_ids: [doc.document_id] });
        if (created.job) follow(created.job, reloadDocuments);
      } catch (error) {
        notice(error);
      }
    }));
    return button;
  }

  replace(main,
    h("p", {}, h("a", { href: "#/collections" }, "← All collections")),
    h("h1", {}, c.name),
    h("p", { class: "muted" }, `${c.vector_provider} · ${c.embedding_provider} ${c.model} · ${c.dimension} dimensions`),
    h("div", { class: "grid" }, groupsEditor(base, c), (adder = addDocuments(base, id, follow, reloadDocuments)).form,
      modelChanger(base, c, follow, () => collectionScreen(main, services, id))),
    h("section", { class: "card", "aria-labelledby": "job-title" }, jobPanel, recentJobs), docsPanel, searchBench(base, id),
    h("section", { class: "card" }, h("h2", {}, "Danger zone"), deleteButton(base, c)));
  replace(jobPanel, h("h2", { id: "job-title" }, "Embedding jobs"), h("p", { class: "muted" }, "Loading…"));
  sourceSyncs?.abort();
  sourceSyncs = new AbortController();
  // a source's sync (sources.js) added or removed documents: show them
  main.addEventListener("ragu:collection-changed", () => reloadDocuments().catch(notice), { signal: sourceSyncs.signal });
  await reloadDocuments();
  const jobs = await api.get(`${base}/jobs?collection_id=${id}&limit=1`);
  if (jobs.length) follow(jobs[0], reloadDocuments);
  else replace(jobPanel, h("h2", { id: "job-title" }, "Embedding jobs"), empty("No jobs yet."));
}

function groupsEditor(base, collection) {
  const message = messageArea();
  const submit = h("button", { type: "submit" }, "Save groups");
  const form = h("form", { class: "card stack", "aria-labelledby": "groups-title" },
    h("h2", { id: "groups-title" }, "Who may read it"),
    field("Groups (comma-separated; empty = everyone)", { name: "groups", value: collection.groups.join(", ") }),
    h("p", { class: "muted" }, "Names are exact: “HR” and “hr” are different groups."), h("div", { class: "row" }, submit), message);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    busy(submit, async () => {
      try {
        const saved = await api.put(`${base}/collections/${collection.id}/groups`, { groups: groupsFrom(form.groups.value) });
        form.groups.value = saved.groups.join(", ");
        showOk(message, saved.groups.length ? `Readable by ${saved.groups.join(", ")}.` : "Readable by everyone.");
      } catch (error) {
        showError(message, error);
      }
    });
  });
  return form;
}

/**
 * Change the embedding model: chonkit re-embeds every document into a new version of the collection while
 * questions keep the current one, then swaps it in. Its job shows in the job panel; the last change is shown here.
 */
function modelChanger(base, collection, follow, reload) {
  const message = messageArea();
  const status = h("p", { class: "muted", "data-migration-state": "" });
  const model = h("select", { name: "model" });
  const submit = h("button", { type: "submit" }, "Change embedding model");
  const choice = h("label", {}, "New model", model);
  const explained = h("p", { class: "muted" }, "Every document is embedded again into a new version of the collection; questions use the current one until the new one is complete, then switch at once.");
  const actions = h("div", { class: "row" }, submit);
  const form = h("form", { class: "card stack", "aria-labelledby": "model-title" },
    h("h2", { id: "model-title" }, "Embedding model"), choice, explained, actions, status, message);
  const path = `${base}/collections/${collection.id}/embedding`;
  api.get(`${base}/providers`).then((providers) => {
    const others = providers.embedding_models.filter((m) => m.provider !== collection.embedding_provider || m.model !== collection.model);
    replace(model, others.map((m) => h("option", { value: `${m.provider}|${m.model}` }, `${m.provider} · ${m.model} (${m.dimension} dims)`)));
    if (!others.length) { // nothing to choose: say so plainly, without an empty picker and a dead button
      choice.hidden = explained.hidden = actions.hidden = true;
      message.className = "muted";
      message.textContent = "No other embedding model is configured.";
    }
  }, (error) => showError(message, error));
  const shown = (change) => {
    const m = change.migration;
    replace(status, `Last change: ${m.from_provider} · ${m.from_model} → ${m.embedding_provider} · ${m.model} `, badge(m.state),
      m.error ? ` ${m.error} (${m.error_code})` : "");
    return m.state;
  };
  const latest = () => api.get(path).then((state) => (state.migration ? shown(state) : null));
  latest();
  /** The job ends with its last document; the swap follows on the worker's next turn. */
  async function settled() {
    for (let tries = 0; tries < 60; tries += 1) {
      if ((await latest()) !== "building") return;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const [embeddingProvider, modelName] = form.model.value.split("|");
    busy(submit, async () => {
      try {
        const started = await api.put(path, { embedding_provider: embeddingProvider, model: modelName });
        shown(started);
        showOk(message, `Re-embedding ${plural(started.job.total, "document")} with ${modelName}.`);
        follow(started.job, async () => { await settled(); await reload(); });
      } catch (error) {
        showError(message, error);
      }
    });
  });
  return form;
}

/**
 * The documents to add, each marked when the collection holds it already (embedding it again takes its current
 * bytes and config). The boxes clear once a job has started.
 */
function addDocuments(base, id, follow, reloadDocuments) {
  const message = messageArea();
  const choices = h("div", { class: "stack" }, h("p", { class: "muted" }, "Loading documents…"));
  const submit = h("button", { type: "submit" }, "Embed selected documents");
  const form = h("form", { class: "card stack", "aria-labelledby": "add-title" },
    h("h2", { id: "add-title" }, "Add documents"), h("fieldset", {}, h("legend", {}, "Documents"), choices),
    h("div", { class: "row" }, submit), message);
  let documents = null;
  let held = new Map(); // document id → whether its embedding is current

  function show() {
    if (!documents) return;
    const ticked = new Set([...form.querySelectorAll("input[name=document]:checked")].map((i) => i.value));
    replace(choices, documents.length ? documents.map((d) => h("label", { class: "check" },
      h("input", { type: "checkbox", name: "document", value: d.id, checked: ticked.has(d.id) }), d.name,
      held.has(d.id) ? h("span", { class: held.get(d.id) ? "muted small" : "warn small" },
        held.get(d.id) ? " · in this collection" : " · in this collection, outdated") : null))
      : empty("No documents uploaded yet — upload some under Documents."));
  }

  api.get(`${base}/documents?limit=100`).then((page) => { documents = page.items; show(); },
    (error) => showError(message, error));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const boxes = [...form.querySelectorAll("input[name=document]:checked")];
    const ids = boxes.map((i) => i.value);
    if (!ids.length) { showError(message, problemOf("Choose at least one document.")); return; }
    busy(submit, async () => {
      try {
        const created = await api.post(`${base}/collections/${id}/documents`, { document_ids: ids });
        for (const box of boxes) box.checked = false;
        if (created.job) {
          showOk(message, `Job started for ${created.job.total} document(s).`);
          follow(created.job, reloadDocuments);
        } else {
          showOk(message, "Those documents are already queued in another job.");
        }
      } catch (error) {
        showError(message, error);
      }
    });
  });
  return {
    form,
    /** Mark what the collection holds now. */
    held(inCollection) { held = new Map(inCollection.map((d) => [d.document_id, d.current])); show(); },
  };
}

let following = null;
const JOB_TITLES = { remove: "Removal job ", reembed: "Re-embedding job " };
const FINISHED = ["done", "skipped", "failed", "cancelled"];
const PAGE = 1000; // items per read of the job's pages, the most chonkit gives at once
const RECENT_JOBS = 5; // earlier jobs listed under the one followed
const IN_FLIGHT = ["parsing", "chunking", "embedding", "writing"];

/**
 * Live progress from the job's SSE stream. Its events carry the job's counts but only the items that changed
 * (the first none at all), so the rows are kept by document: seeded from `job`, overwritten by the job's pages
 * read after the first event, and by every item an event brings.
 */
async function followJob(base, job, panel, onFinished) {
  if (following) following.abort();
  const controller = new AbortController();
  following = controller;
  window.addEventListener("hashchange", () => controller.abort(), { once: true }); // leaving the screen ends the stream
  const view = jobView(base, panel, onFinished);
  view.show(job, job.items);
  // An event's item is newer than any page read before it arrived, and every later change comes as an event.
  const changed = new Set();
  let pages = null;
  try {
    for await (const { event, data } of api.events("GET", `${base}/jobs/${job.id}/events`, undefined, controller.signal)) {
      if (!panel.isConnected) { controller.abort(); return; }
      if (event === "error") { panel.append(errorLine(data)); return; }
      if (event !== "job") continue;
      job = data;
      for (const item of data.items) changed.add(item.document_id);
      view.show(job, data.items);
      pages ??= readPages(base, job, view, changed, controller.signal)
        .catch((error) => { if (!controller.signal.aborted) panel.append(errorLine(error)); });
    }
    await pages;
  } catch (error) {
    panel.append(errorLine(error));
  }
  if (!controller.signal.aborted && !["queued", "running"].includes(job.status)) await onFinished();
}

/** Every item of the job as it is now, in job order; items an event has changed keep the event's state. */
async function readPages(base, job, view, changed, signal) {
  for (let offset = 0; offset < job.total && !signal.aborted; offset += PAGE) {
    const page = await api.get(`${base}/jobs/${job.id}?limit=${PAGE}&offset=${offset}`);
    view.place(page.items.filter((item) => !changed.has(item.document_id)), page.items);
  }
}

/** The job panel: counts and actions from the latest event, one row per document updated in place. */
function jobView(base, panel, onFinished) {
  const rows = new Map();
  const items = new Map();
  const head = h("div", {});
  const now = h("p", { class: "muted", "aria-live": "polite" });
  const actions = h("div", { class: "row" });
  const body = h("tbody", {});
  replace(panel, head, now, h("table", {},
    h("thead", {}, h("tr", {}, ["Document", "Stage", "Chunks", "Note"].map((t) => h("th", {}, t)))), body), actions);

  /** Which documents are under way, at which stage; chonkit counts a document's chunks but not those embedded yet. */
  function underWay() {
    const going = [...items.values()].filter((item) => IN_FLIGHT.includes(item.stage));
    now.textContent = going.length ? `Now: ${going.map((item) => `${item.document_name || item.document_id}, ${item.stage}` +
      (item.chunks != null ? ` ${plural(item.chunks, "chunk")}` : "")).join("; ")}` : "";
  }

  function update(item) {
    items.set(item.document_id, item);
    const row = itemRow(item);
    const old = rows.get(item.document_id);
    if (old) old.replaceWith(row); else body.append(row);
    rows.set(item.document_id, row);
  }

  return {
    show(job, items) {
      items.forEach(update);
      const count = (stages) => stages.reduce((sum, stage) => sum + (job.progress[stage] || 0), 0);
      const finished = count(FINISHED);
      const running = ["queued", "running"].includes(job.status);
      replace(head,
        h("h2", { id: "job-title" }, JOB_TITLES[job.kind] || "Embedding job ", badge(job.status)),
        h("label", {}, `${finished} of ${job.total} documents finished`,
          h("progress", { max: job.total || 1, value: finished, "data-job-status": job.status })));
      replace(actions, count(["failed"]) && !running ? retryButton(base, job, panel, onFinished) : null,
        running && !job.cancel_requested ? cancelButton(base, job) : null);
      underWay();
    },
    /** Rows for `items`, then every row of `ordered` moved after the others, in that order. */
    place(items, ordered) {
      items.forEach(update);
      for (const item of ordered) body.append(rows.get(item.document_id));
      underWay();
    },
  };
}

function itemRow(item) {
  const note = item.error ? h("td", { class: "error" }, `${item.error} (${item.error_code})`)
    : h("td", { class: "muted" }, item.reason || "");
  note.dataset.label = "Note";
  return h("tr", { "data-document-id": item.document_id },
    h("td", { "data-label": "Document" }, item.document_name || item.document_id),
    h("td", { "data-label": "Stage" }, badge(item.stage)), h("td", { "data-label": "Chunks" }, item.chunks ?? "–"), note);
}

function retryButton(base, job, panel, onFinished) {
  const retry = h("button", { type: "button", class: "secondary" }, "Retry failed documents");
  retry.addEventListener("click", () => busy(retry, async () => {
    try { followJob(base, await api.post(`${base}/jobs/${job.id}/retry`), panel, onFinished); } catch (error) { notice(error); }
  }));
  return retry;
}

function cancelButton(base, job) {
  const cancel = h("button", { type: "button", class: "danger" }, "Cancel job");
  cancel.addEventListener("click", () => busy(cancel, async () => {
    try { await api.post(`${base}/jobs/${job.id}/cancel`); } catch (error) { notice(error); }
  }));
  return cancel;
}

// The search test bench: every control of the search API (mode, fusion weight, filters, grouping), and each hit
// says which leg found it, so an admin sees what hybrid retrieval changed.
function searchBench(base, id) {
  const results = h("div", { "aria-live": "polite" });
  const submit = h("button", { type: "submit" }, "Search");
  const mode = h("select", { name: "mode" },
    h("option", { value: "hybrid" }, "Hybrid (meaning + keywords)"),
    h("option", { value: "dense" }, "Dense (meaning)"),
    h("option", { value: "lexical" }, "Lexical (keywords)"));
  const weight = h("input", { type: "range", name: "dense_weight", min: 0, max: 1, step: 0.05, value: 0.4 });
  const weightShown = h("output", { for: "bench-weight" }, "0.40");
  weight.id = "bench-weight";
  const weightLabel = h("label", { class: "weight" }, "Meaning's share of hybrid", weight, weightShown);
  weight.addEventListener("input", () => { weightShown.textContent = Number(weight.value).toFixed(2); });
  mode.addEventListener("change", () => { weight.disabled = mode.value !== "hybrid"; });
  const form = h("form", { class: "card stack", "aria-labelledby": "bench-title" },
    h("h2", { id: "bench-title" }, "Search test bench"),
    h("div", { class: "row" },
      h("label", { class: "wide" }, "Query", h("input", { type: "text", name: "query", required: true })),
      field("Results", { name: "limit", type: "number", min: 1, max: 200, value: 5 }),
      field("Max distance (optional)", { name: "max_distance", type: "number", step: "0.01", min: 0 })),
    h("div", { class: "row" }, h("label", {}, "Mode", mode), weightLabel),
    h("div", { class: "row" },
      field("Tags (any of; comma-separated)", { name: "tags", placeholder: "policy" }),
      field("Labels (any of; comma-separated)", { name: "labels" }),
      h("label", { class: "check" }, h("input", { type: "checkbox", name: "group_by" }), "One hit per document")),
    h("div", { class: "row" }, submit), results);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    busy(submit, async () => {
      try {
        const response = await api.post(`${base}/collections/${id}/search`, benchRequest(form));
        replace(results, benchSummary(response), response.hits.length ? response.hits.map(benchHit) : empty("Nothing matched."));
      } catch (error) {
        replace(results, errorLine(error));
      }
    });
  });
  return form;
}

function benchRequest(form) {
  const body = { query: form.query.value, limit: Number(form.limit.value) || 5, mode: form.mode.value };
  if (body.mode === "hybrid") body.dense_weight = Number(form.dense_weight.value);
  if (form.max_distance.value !== "") body.max_distance = Number(form.max_distance.value);
  const tags = listFrom(form.tags.value), labels = listFrom(form.labels.value);
  if (tags.length) body.tags = tags;
  if (labels.length) body.labels = labels;
  if (form.group_by.checked) body.group_by = "document";
  return body;
}

function benchSummary(response) {
  const grouped = response.hits.length && response.hits[0].chunk_count != null;
  const chunks = response.hits.reduce((sum, hit) => sum + (hit.chunk_count ?? 1), 0);
  const found = grouped ? `${plural(response.hits.length, "document")} from ${plural(chunks, "chunk")}` : plural(chunks, "hit");
  return h("p", { class: "muted" },
    `${found} · ${response.mode} · embed ${response.embed_ms.toFixed(1)} ms · search ${response.search_ms.toFixed(1)} ms`);
}

/** "dense #3 · keyword #1 (BM25 4.21) · fused 0.032": where each leg ranked the hit, and which leg missed it. */
function legsText(legs) {
  const parts = [];
  if (legs.dense_rank != null) parts.push(`dense #${legs.dense_rank}`);
  if (legs.lexical_rank != null) {
    parts.push(`keyword #${legs.lexical_rank}` + (legs.lexical_score != null ? ` (BM25 ${legs.lexical_score.toFixed(2)})` : ""));
  }
  if (legs.fused_score != null) {
    if (legs.dense_rank == null) parts.unshift("dense not found");
    if (legs.lexical_rank == null) parts.push("keyword not found");
    parts.push(`fused ${legs.fused_score.toFixed(3)}`);
  }
  return parts.join(" · ");
}

function benchHit(hit) {
  const where = `${hit.document_name || hit.document_id} ${pages(hit.page_start, hit.page_end)}`.trim();
  const meta = [
    hit.chunk_count != null ? plural(hit.chunk_count, "matching chunk") : null,
    `distance ${hit.distance.toFixed(3)}`,
    hit.label ? `label ${hit.label}` : null,
    hit.tags.length ? `tags ${hit.tags.join(", ")}` : null,
  ].filter(Boolean).join(" · ");
  return h("div", { class: "chunk" },
    h("strong", {}, where), h("span", { class: "legs" }, legsText(hit.legs)), h("span", { class: "muted small" }, meta),
    "\n", hit.content);
}

function deleteButton(base, collection) {
  const button = h("button", { type: "button", class: "danger" }, "Delete collection");
  button.addEventListener("click", () => {
    if (!confirm(`Delete the collection “${collection.name}” and all its vectors?`)) return;
    busy(button, async () => {
      try { await api.del(`${base}/collections/${collection.id}`); location.hash = "#/collections"; } catch (error) { notice(error); }
    });
  });
  return button;
}
