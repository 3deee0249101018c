// Admin: upload (drag and drop, many files, a result per file), list and search, details, delete, previews
// with a parse and chunk config editor.
import * as api from "./api.js";
import { h, replace, field, messageArea, showError, showOk, busy, badge, empty, bytes, pages, notice, listFrom, problemOf, plural,
  errorLine } from "./ui.js";

const CONFIG_HINT = 'chunk: {"strategy": "fixed" | "structure" | "parent_child", "unit": "tokens" | "characters", ' +
  '"size", "overlap"} (fixed: "repeat_headings", "snap_to_headings", both true by default; parent_child: ' +
  'parent_size, child_size, child_overlap); null = fixed, 250 tokens, overlap 25. ' +
  'parse: {"page_range": {"start", "end"}, "line_filters": [regex…], "sections": [{"start", "end"}…], ' +
  '"ocr": "auto" (pages without a text layer, and images) | "force" (every page) | "off"}.';

export async function documentsScreen(main, services) {
  const base = services.chonkit;
  const list = h("div");
  const panel = h("section", { class: "card", "aria-labelledby": "doc-title", hidden: true });
  const search = h("input", { type: "search", name: "q", placeholder: "Search by name" });
  let timer = null;
  let shown = null;
  search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(refresh, 250); });

  async function refresh() {
    const query = search.value.trim() ? `&q=${encodeURIComponent(search.value.trim())}` : "";
    try {
      const page = await api.get(`${base}/documents?limit=100${query}`);
      replace(list, documentTable(page));
    } catch (error) {
      replace(list, errorLine(error));
    }
  }

  function documentTable(page) {
    if (!page.items.length) return empty(search.value ? "No document matches that search." : "No documents yet. Upload some above.");
    return h("div", {},
      h("table", {},
        h("thead", {}, h("tr", {}, ["Name", "Type", "Pages", "Size", ""].map((t) => h("th", {}, t)))),
        h("tbody", {}, page.items.map((doc) => h("tr", {},
          h("td", {}, doc.name, doc.label ? h("span", { class: "muted" }, ` · ${doc.label}`) : null,
            doc.tags.length ? h("div", {}, doc.tags.map((t) => h("span", { class: "badge" }, t))) : null),
          h("td", {}, doc.doc_type),
          h("td", {}, doc.page_count ?? "–"),
          h("td", {}, bytes(doc.size_bytes)),
          h("td", {}, h("div", { class: "row" },
            h("button", { type: "button", class: "secondary", "aria-label": `Preview ${doc.name}`, onclick: () => open(doc) }, "Preview"),
            h("button", { type: "button", class: "danger", "aria-label": `Delete ${doc.name}`, onclick: (e) => remove(e.currentTarget, doc) }, "Delete"))))))),
      page.total > page.items.length ? h("p", { class: "muted" }, `Showing ${page.items.length} of ${page.total}.`) : null);
  }

  async function remove(button, doc) {
    if (!confirm(`Delete “${doc.name}”? It is removed from every collection too.`)) return;
    await busy(button, async () => {
      try {
        await api.del(`${base}/documents/${doc.id}`);
        if (shown === doc.id) { panel.hidden = true; shown = null; }
        await refresh();
      } catch (error) {
        notice(error);
      }
    });
  }

  async function open(doc) {
    shown = doc.id;
    panel.hidden = false;
    const body = h("div", {}, h("p", { class: "muted" }, "Loading…"));
    const parseButton = h("button", { type: "button", class: "secondary" }, "Parsed text");
    const chunkButton = h("button", { type: "button", class: "secondary" }, "Chunks");
    parseButton.addEventListener("click", () => busy(parseButton, () => parsed(base, doc, body)));
    chunkButton.addEventListener("click", () => busy(chunkButton, () => chunks(base, doc, body, {})));
    replace(panel, h("h2", { id: "doc-title" }, doc.name),
      h("div", { class: "grid" }, detailsForm(base, doc, refresh), configEditor(base, doc, body)),
      h("h3", {}, "Preview"), h("div", { class: "row" }, parseButton, chunkButton, downloadButton(base, doc)), body);
    await parsed(base, doc, body);
    panel.scrollIntoView({ block: "nearest" });
  }

  replace(main,
    h("h1", {}, "Documents"),
    uploader(base, refresh),
    h("section", { class: "card", "aria-labelledby": "doc-list" },
      h("h2", { id: "doc-list" }, "All documents"),
      h("label", {}, "Search", search),
      list),
    panel);
  await refresh();
}

function detailsForm(base, doc, refresh) {
  const message = messageArea();
  const submit = h("button", { type: "submit" }, "Save details");
  const form = h("form", { class: "stack", "aria-label": "Details" },
    field("Name", { name: "name", required: true, value: doc.name }),
    field("Label", { name: "label", value: doc.label || "" }),
    field("Tags (comma-separated)", { name: "tags", value: doc.tags.join(", ") }),
    h("p", { class: "muted" }, `${doc.media_type} · uploaded ${new Date(doc.created_at).toLocaleString()}` +
      (doc.ocr_pages?.length ? ` · ${plural(doc.ocr_pages.length, "page")} without a text layer, read by OCR` : "")),
    h("div", { class: "row" }, submit), message);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    busy(submit, async () => {
      try {
        const saved = await api.patch(`${base}/documents/${doc.id}`, {
          name: form.name.value.trim(), label: form.label.value.trim() || null, tags: listFrom(form.tags.value),
        });
        Object.assign(doc, saved);
        showOk(message, "Saved.");
        await refresh();
      } catch (error) {
        showError(message, error);
      }
    });
  });
  return form;
}

function configEditor(base, doc, body) {
  const message = messageArea();
  const text = h("textarea", { name: "config", rows: 7, spellcheck: "false", class: "code" });
  const tryIt = h("button", { type: "button", class: "secondary" }, "Preview chunks with this config");
  const submit = h("button", { type: "submit" }, "Save config");
  const form = h("form", { class: "stack", "aria-label": "Parse and chunk config" },
    h("label", {}, "Parse and chunk config (JSON)", text),
    h("p", { class: "muted small" }, CONFIG_HINT), h("div", { class: "row" }, tryIt, submit), message);
  api.get(`${base}/documents/${doc.id}/config`).then((config) => { text.value = JSON.stringify(config, null, 2); },
    (error) => showError(message, error));

  function edited() {
    try {
      return JSON.parse(text.value);
    } catch (error) {
      throw problemOf(`The config is not valid JSON (${error.message}).`);
    }
  }

  text.addEventListener("keydown", (e) => { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) form.requestSubmit(); });
  tryIt.addEventListener("click", () => busy(tryIt, async () => {
    try {
      const config = edited();
      message.textContent = "";
      await chunks(base, doc, body, { parse: config.parse ?? null, chunk: config.chunk ?? null });
    } catch (error) {
      showError(message, error);
    }
  }));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    busy(submit, async () => {
      try {
        const saved = await api.put(`${base}/documents/${doc.id}/config`, edited());
        text.value = JSON.stringify(saved, null, 2);
        showOk(message, "Saved: collections use it the next time they embed this document.");
      } catch (error) {
        showError(message, error);
      }
    });
  });
  return form;
}

function downloadButton(base, doc) {
  const button = h("button", { type: "button", class: "secondary" }, "Download original");
  button.addEventListener("click", () => busy(button, async () => {
    try { await api.download(`${base}/documents/${doc.id}/content`, doc.name); } catch (error) { notice(error); }
  }));
  return button;
}

async function parsed(base, doc, body) {
  try {
    const result = await api.post(`${base}/documents/${doc.id}/preview/parse`, {});
    replace(body,
      h("p", { class: "muted" }, `${result.characters} characters, ${result.block_count} blocks, ${result.sections.length} sections` +
        (result.ocr_pages?.length ? `, ${plural(result.ocr_pages.length, "page")} read by OCR` : "") +
        (result.truncated ? " (truncated)" : "")),
      result.sections.map((section) => h("div", {},
        h("h4", {}, section.title || "(untitled section)", " ", h("small", { class: "muted" }, pages(section.page_start, section.page_end))),
        section.blocks.map((block) => h("div", { class: "chunk" }, block.ocr ? [badge("OCR"), " "] : null, block.text)))));
  } catch (error) {
    replace(body, errorLine(error));
  }
}

async function chunks(base, doc, body, request) {
  try {
    const result = await api.post(`${base}/documents/${doc.id}/preview/chunks`, request);
    replace(body,
      h("p", { class: result.oversized.length ? "warn" : "muted" },
        `${plural(result.chunk_count, "chunk")} for ${result.model} (at most ${result.max_tokens} tokens each)` +
        (result.oversized.length ? `, ${result.oversized.length} oversized: embedding would fail` : "") +
        (result.truncated ? " (truncated)" : "")),
      result.chunks.map((chunk) => h("div", { class: "chunk" },
        h("strong", {}, `#${chunk.index} · ${chunk.token_count} tokens ${pages(chunk.page_start, chunk.page_end)}`),
        chunk.oversized ? h("span", { class: "warn" }, " oversized") : null, chunk.ocr ? [" ", badge("OCR")] : null,
        "\n", chunk.text)));
  } catch (error) {
    replace(body, errorLine(error));
  }
}

// What chonkit accepts, by file name (chonkit/document/parsing/doctype.py); a browser test compares the two.
const UPLOAD_TYPES = [["PDF", [".pdf"]], ["DOCX", [".docx"]], ["Markdown", [".md", ".markdown"]],
  ["HTML", [".html", ".htm"]], ["text", [".txt"]], ["CSV", [".csv"]], ["JSON", [".json"]], ["PNG", [".png"]],
  ["JPEG", [".jpg", ".jpeg"]], ["TIFF", [".tif", ".tiff"]]];
const UPLOAD_NAMES = UPLOAD_TYPES.map(([name]) => name);
const UPLOAD_HINT = `${UPLOAD_NAMES.slice(0, -1).join(", ")} and ${UPLOAD_NAMES.at(-1)}.`;

function uploader(base, refresh) {
  const accept = UPLOAD_TYPES.flatMap(([, extensions]) => extensions).join(",");
  const input = h("input", { type: "file", multiple: true, name: "files", id: "upload-files", accept });
  const zone = h("div", { class: "drop" },
    h("p", {}, "Drop files here, or "), h("label", { for: "upload-files" }, "choose files to upload"), input,
    h("p", { class: "muted" }, UPLOAD_HINT));
  const results = h("ul", { class: "plain", "aria-live": "polite" });
  const message = messageArea();

  async function send(files) {
    if (!files.length) return;
    replace(results);
    message.className = "muted";
    message.textContent = `Uploading ${files.length} file(s)…`;
    try {
      const response = await api.upload(`${base}/documents`, files);
      replace(results, response.results.map((r) => h("li", {},
        h("span", {}, r.filename), badge(r.status),
        r.error ? h("span", { class: "error" }, r.error.detail) : null)));
      const created = response.results.filter((r) => r.status === "created").length;
      const total = response.results.length;
      // green only when every file was created; none created is a failure, some a warning
      message.className = created === total ? "ok" : created === 0 ? "error" : "warn";
      message.textContent = `${created} created, ${total - created} not created.`;
      await refresh();
    } catch (error) {
      showError(message, error);
    }
    input.value = "";
  }

  input.addEventListener("change", () => send([...input.files]));
  zone.addEventListener("dragover", (e) => { e.preventDefault(); zone.classList.add("over"); });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (e) => { e.preventDefault(); zone.classList.remove("over"); send([...e.dataTransfer.files]); });
  return h("section", { class: "card", "aria-labelledby": "upload-title" }, h("h2", { id: "upload-title" }, "Upload"), zone, message, results);
}
