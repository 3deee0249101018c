// Admin: upload (drag and drop, many files, a result per file), list and search, details, delete, previews
// with a parse and chunk config editor.
import * as api from "./api.js";
import { h, replace, field, messageArea, showError, showOk, busy, badge, empty, bytes, pages, notice, listFrom, problemOf, plural,
  errorLine, labelled } from "./ui.js";

// The chunk config's strategies, their fields and defaults, as chonkit/document/chunking/config.py declares them
// (a browser test compares the two); `null` saved means the default, fixed windows.
const CHUNK_FIELDS = {
  fixed: { unit: "tokens", size: 250, overlap: 25, snap_to_sentences: true, repeat_headings: true, snap_to_headings: true },
  structure: { unit: "tokens", size: 250, overlap: 25 },
  parent_child: { unit: "tokens", parent_size: 1000, child_size: 250, child_overlap: 25 },
};
const STRATEGIES = {
  "": ["Default", "Fixed windows of 250 tokens, 25 shared between neighbours, headings repeated."],
  fixed: ["Fixed windows", "Windows of a set size; neighbours share the overlap."],
  structure: ["One chunk per section", "Each heading's section is a chunk; a longer one is cut like fixed windows."],
  parent_child: ["Parent and child chunks", "Small children are searched; the larger parent around them is what the agent reads."],
};
const CHUNK_LABELS = {
  unit: "Unit", size: "Size", overlap: "Overlap", snap_to_sentences: "End windows at sentence ends",
  repeat_headings: "Repeat headings", snap_to_headings: "Start a window at each heading", parent_size: "Parent size",
  child_size: "Child size", child_overlap: "Child overlap",
};
const OCR_MODES = { auto: "auto: pages without a text layer, and images", force: "force: every page", off: "off" };

/** The chunk config as a form: a strategy, then only its fields; the parse config's OCR mode beside it. */
function chunkFields() {
  // disabled until the saved config arrives: a choice made before would be overwritten by it
  const strategy = h("select", { name: "strategy", disabled: true },
    Object.entries(STRATEGIES).map(([value, [label]]) => h("option", { value }, label)));
  const hint = h("p", { class: "muted small" });
  const inputs = {};
  const labels = {};
  for (const name of Object.keys(CHUNK_LABELS)) {
    const kind = typeof CHUNK_FIELDS.fixed[name] === "boolean" ? "checkbox" : name === "unit" ? "select" : "number";
    const input = kind === "select" ? h("select", { name }, h("option", { value: "tokens" }, "tokens"), h("option", { value: "characters" }, "characters"))
      : h("input", kind === "checkbox" ? { type: "checkbox", name } : { type: "number", name, min: name.endsWith("overlap") ? 0 : 1, step: 1 });
    inputs[name] = input;
    labels[name] = kind === "checkbox" ? h("label", { class: "check" }, input, CHUNK_LABELS[name]) : h("label", {}, CHUNK_LABELS[name], input);
  }
  const fieldset = h("fieldset", { class: "chunking stack" }, h("legend", {}, "Chunking"),
    h("label", {}, "Chunking strategy", strategy), hint,
    h("div", { class: "row" }, ["unit", "size", "overlap", "parent_size", "child_size", "child_overlap"].map((n) => labels[n])),
    ["snap_to_sentences", "repeat_headings", "snap_to_headings"].map((n) => labels[n]));
  let saved = null;

  function show(chosen) {
    strategy.value = chosen;
    hint.textContent = STRATEGIES[chosen][1];
    const values = saved && saved.strategy === chosen ? { ...CHUNK_FIELDS[chosen], ...saved } : CHUNK_FIELDS[chosen] ?? {};
    for (const [name, input] of Object.entries(inputs)) {
      labels[name].hidden = !(name in values);
      if (!(name in values)) continue;
      if (input.type === "checkbox") input.checked = Boolean(values[name]); else input.value = String(values[name]);
    }
  }
  strategy.addEventListener("change", () => show(strategy.value));
  return {
    fieldset,
    /** Show a chunk config as saved (null: the default). */
    set(chunk) {
      if (chunk && !Object.hasOwn(CHUNK_FIELDS, chunk.strategy)) {
        throw problemOf(`The form knows no chunking strategy “${chunk.strategy}”: keep editing it as JSON.`);
      }
      saved = chunk;
      show(chunk ? chunk.strategy : "");
      strategy.disabled = false;
    },
    /** The config the fields say (null: the default). */
    get() {
      if (!strategy.value) return null;
      const chunk = { strategy: strategy.value };
      for (const name of Object.keys(CHUNK_FIELDS[strategy.value])) {
        const input = inputs[name];
        chunk[name] = input.type === "checkbox" ? input.checked : input.type === "number" ? Number(input.value) : input.value;
      }
      return chunk;
    },
  };
}

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
      labelled(h("table", {},
        h("thead", {}, h("tr", {}, ["Name", "Type", "Pages", "Size", ""].map((t) => h("th", {}, t)))),
        h("tbody", {}, page.items.map((doc) => h("tr", {},
          h("td", {}, doc.name, doc.label ? h("span", { class: "muted" }, ` · ${doc.label}`) : null,
            doc.tags.length ? h("div", {}, doc.tags.map((t) => h("span", { class: "badge" }, t))) : null),
          h("td", {}, doc.doc_type),
          h("td", {}, doc.page_count ?? "–"),
          h("td", {}, bytes(doc.size_bytes)),
          h("td", {}, h("div", { class: "row" },
            h("button", { type: "button", class: "secondary", "aria-label": `Preview ${doc.name}`, "data-preview": doc.id, onclick: () => open(doc) }, "Preview"),
            h("button", { type: "button", class: "danger", "aria-label": `Delete ${doc.name}`, onclick: (e) => remove(e.currentTarget, doc) }, "Delete")))))))),
      page.total > page.items.length ? h("p", { class: "muted" }, `Showing ${page.items.length} of ${page.total}.`) : null);
  }

  async function remove(button, doc) {
    if (!confirm(`Delete “${doc.name}”? It is removed from every collection too.`)) return;
    await busy(button, async () => {
      try {
        await api.del(`${base}/documents/${doc.id}`);
        if (shown === doc.id) close();
        await refresh();
      } catch (error) {
        notice(error);
      }
    });
  }

  /** Back to the list, at the document that was open. */
  function close() {
    const id = shown;
    shown = null;
    panel.hidden = true;
    replace(panel);
    listSection.hidden = false;
    const button = list.querySelector(`button[data-preview="${id}"]`);
    if (button) { button.scrollIntoView({ block: "center" }); button.focus(); }
  }

  /** The document's details, config and preview take the list's place, at the top of the screen's content. */
  async function open(doc) {
    shown = doc.id;
    const body = h("div", {}, h("p", { class: "muted" }, "Loading…"));
    const parseButton = h("button", { type: "button", class: "secondary" }, "Parsed text");
    const chunkButton = h("button", { type: "button", class: "secondary" }, "Chunks");
    parseButton.addEventListener("click", () => busy(parseButton, () => parsed(base, doc, body)));
    chunkButton.addEventListener("click", () => busy(chunkButton, () => chunks(base, doc, body, {})));
    const back = h("button", { type: "button", class: "secondary" }, "← All documents");
    back.addEventListener("click", close);
    const heading = h("h2", { id: "doc-title", tabindex: "-1" }, doc.name);
    replace(panel, h("div", { class: "row" }, back), heading,
      h("div", { class: "grid" }, detailsForm(base, doc, refresh), configEditor(base, doc, body)),
      h("h3", {}, "Preview"), h("div", { class: "row" }, parseButton, chunkButton, downloadButton(base, doc)), body);
    listSection.hidden = true;
    panel.hidden = false;
    panel.scrollIntoView({ block: "start" });
    heading.focus({ preventScroll: true });
    await parsed(base, doc, body);
  }

  const listSection = h("section", { class: "card", "aria-labelledby": "doc-list" },
    h("h2", { id: "doc-list" }, "All documents"), h("label", {}, "Search", search), list);
  replace(main, h("h1", {}, "Documents"), uploader(base, refresh), listSection, panel);
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

/**
 * How the document is parsed and chunked: a form (the chunking strategy and its fields, the OCR mode), or the whole
 * config as JSON one click away (page ranges, line filters and sections are edited there).
 */
function configEditor(base, doc, body) {
  const message = messageArea();
  const chunking = chunkFields();
  const ocr = h("select", { name: "ocr", disabled: true }, Object.entries(OCR_MODES).map(([value, label]) => h("option", { value }, label)));
  const parseNote = h("p", { class: "muted small" });
  const fields = h("div", { class: "stack" }, chunking.fieldset, h("label", {}, "Text recognition (OCR)", ocr), parseNote);
  const text = h("textarea", { name: "config", rows: 9, spellcheck: "false", class: "code" });
  const json = h("label", { hidden: true }, "Parse and chunk config (JSON)", text);
  const toggle = h("button", { type: "button", class: "secondary", disabled: true }, "Edit as JSON");
  // Until the saved config arrives, saving would overwrite it with the form's defaults.
  const tryIt = h("button", { type: "button", class: "secondary", disabled: true }, "Preview chunks with this config");
  const submit = h("button", { type: "submit", disabled: true }, "Save config");
  const form = h("form", { class: "stack", "aria-label": "Parse and chunk config", novalidate: true },
    fields, json, h("div", { class: "row" }, tryIt, submit, toggle), message);
  let parse = {}; // the saved parse config; the form changes its OCR mode only

  function show(config) {
    parse = config.parse ?? {};
    chunking.set(config.chunk ?? null);
    ocr.value = parse.ocr ?? "auto";
    const other = [parse.page_range ? pages(parse.page_range.start, parse.page_range.end) : null,
      parse.line_filters?.length ? plural(parse.line_filters.length, "line filter") : null,
      parse.sections?.length ? plural(parse.sections.length, "section") : null].filter(Boolean);
    parseNote.textContent = other.length ? `Parsing also keeps ${other.join(", ")} (edit them as JSON).` : "";
    text.value = JSON.stringify(config, null, 2);
  }
  const fromForm = () => ({ parse: { ...parse, ocr: ocr.value }, chunk: chunking.get() });
  const asJson = () => !json.hidden;

  api.get(`${base}/documents/${doc.id}/config`).then((config) => {
    show(config);
    for (const control of [toggle, ocr, tryIt, submit]) control.disabled = false;
  },
    (error) => showError(message, error));

  function edited() {
    if (!asJson()) return fromForm();
    try {
      return JSON.parse(text.value);
    } catch (error) {
      throw problemOf(`The config is not valid JSON (${error.message}).`);
    }
  }

  toggle.addEventListener("click", () => {
    try {
      if (asJson()) show(edited()); else text.value = JSON.stringify(fromForm(), null, 2);
      message.textContent = "";
    } catch (error) {
      showError(message, error);
      return;
    }
    json.hidden = !json.hidden;
    fields.hidden = !json.hidden;
    toggle.textContent = asJson() ? "Edit as a form" : "Edit as JSON";
    (asJson() ? text : chunking.fieldset.querySelector("select")).focus();
  });
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
        show(await api.put(`${base}/documents/${doc.id}/config`, edited()));
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
  // One control: the label, drawn as a button; the browser's own file control is hidden but still takes focus.
  const zone = h("div", { class: "drop" },
    h("p", {}, "Drop files here, or "), input, h("label", { for: "upload-files", class: "pick" }, "choose files to upload"),
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
