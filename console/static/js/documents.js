// Admin: upload (drag and drop, many files, a result per file), list and search, delete, previews.
import * as api from "./api.js";
import { h, replace, messageArea, showError, showOk, busy, badge, empty, bytes, pages } from "./ui.js";

export async function documentsScreen(main, services) {
  const base = services.chonkit;
  const list = h("div");
  const preview = h("section", { class: "card", "aria-label": "Preview", hidden: true });
  const search = h("input", { type: "search", name: "q", placeholder: "Search by name" });
  let timer = null;
  search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(refresh, 250); });

  async function refresh() {
    const query = search.value.trim() ? `&q=${encodeURIComponent(search.value.trim())}` : "";
    try {
      const page = await api.get(`${base}/documents?limit=100${query}`);
      replace(list, documentTable(page));
    } catch (error) {
      replace(list, h("p", { class: "error" }, error.detail));
    }
  }

  function documentTable(page) {
    if (!page.items.length) return empty(search.value ? "No document matches that search." : "No documents yet. Upload some above.");
    return h("table", {},
      h("thead", {}, h("tr", {}, h("th", {}, "Name"), h("th", {}, "Type"), h("th", {}, "Pages"), h("th", {}, "Size"), h("th", {}, ""))),
      h("tbody", {}, page.items.map((doc) => h("tr", {},
        h("td", {}, doc.name),
        h("td", {}, doc.doc_type),
        h("td", {}, doc.page_count ?? "–"),
        h("td", {}, bytes(doc.size_bytes)),
        h("td", { class: "row" },
          h("button", { type: "button", class: "secondary", onclick: () => showPreview(doc) }, "Preview"),
          h("button", { type: "button", class: "danger", onclick: (e) => remove(e.currentTarget, doc) }, "Delete"))))),
      page.total > page.items.length ? h("p", { class: "muted" }, `Showing ${page.items.length} of ${page.total}.`) : null);
  }

  async function remove(button, doc) {
    if (!confirm(`Delete “${doc.name}”? Collections keep their vectors until the document is removed from them.`)) return;
    await busy(button, async () => {
      try { await api.del(`${base}/documents/${doc.id}`); await refresh(); } catch (error) { alert(error.detail); }
    });
  }

  async function showPreview(doc) {
    preview.hidden = false;
    const body = h("div", {}, h("p", { class: "muted" }, "Loading…"));
    const parseButton = h("button", { type: "button", class: "secondary" }, "Parsed text");
    const chunkButton = h("button", { type: "button", class: "secondary" }, "Chunks");
    parseButton.addEventListener("click", () => busy(parseButton, () => parsed(doc, body)));
    chunkButton.addEventListener("click", () => busy(chunkButton, () => chunks(doc, body)));
    replace(preview, h("h2", {}, `Preview: ${doc.name}`), h("div", { class: "row" }, parseButton, chunkButton), body);
    await parsed(doc, body);
    preview.scrollIntoView({ block: "nearest" });
  }

  async function parsed(doc, body) {
    try {
      const result = await api.post(`${base}/documents/${doc.id}/preview/parse`, {});
      replace(body,
        h("p", { class: "muted" }, `${result.characters} characters, ${result.block_count} blocks, ${result.sections.length} sections` +
          (result.truncated ? " (truncated)" : "")),
        result.sections.map((section) => h("div", {},
          h("h3", {}, section.title || "(untitled section)", " ", h("small", { class: "muted" }, pages(section.page_start, section.page_end))),
          section.blocks.map((block) => h("div", { class: "chunk" }, block.text)))));
    } catch (error) {
      replace(body, h("p", { class: "error" }, error.detail));
    }
  }

  async function chunks(doc, body) {
    try {
      const result = await api.post(`${base}/documents/${doc.id}/preview/chunks`, {});
      replace(body,
        h("p", { class: "muted" }, `${result.chunk_count} chunks for ${result.model} (at most ${result.max_tokens} tokens each)` +
          (result.oversized.length ? `, ${result.oversized.length} oversized` : "") + (result.truncated ? " (truncated)" : "")),
        result.chunks.map((chunk) => h("div", { class: "chunk" },
          h("strong", {}, `#${chunk.index} · ${chunk.token_count} tokens ${pages(chunk.page_start, chunk.page_end)}`),
          chunk.oversized ? h("span", { class: "warn" }, " oversized") : null, "\n", chunk.text)));
    } catch (error) {
      replace(body, h("p", { class: "error" }, error.detail));
    }
  }

  replace(main,
    h("h1", {}, "Documents"),
    uploader(base, refresh),
    h("section", { class: "card", "aria-labelledby": "doc-list" },
      h("h2", { id: "doc-list" }, "All documents"),
      h("label", {}, "Search", search),
      list),
    preview);
  await refresh();
}

function uploader(base, refresh) {
  const input = h("input", { type: "file", multiple: true, name: "files", id: "upload-files" });
  const zone = h("div", { class: "drop" },
    h("p", {}, "Drop files here, or "), h("label", { for: "upload-files" }, "choose files to upload"), input,
    h("p", { class: "muted" }, "PDF, DOCX, HTML, Markdown and text."));
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
      showOk(message, `${created} created, ${response.results.length - created} not created.`);
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
