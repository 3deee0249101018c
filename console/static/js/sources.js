// Admin: a collection's sources, the folders and web sites it is kept in sync with. Add one, sync it now, set
// its schedule, delete it; each shows its last run: the report (added, changed, removed, unchanged, failed and
// skipped, with reasons) and, while the run lists or embeds, its live progress from the run's SSE stream.
import * as api from "./api.js";
import { h, replace, field, messageArea, showError, showOk, busy, badge, empty, listFrom, notice, errorLine, plural } from "./ui.js";

const ACTIVE = ["queued", "listing", "embedding"];
const JOB_FINISHED = ["done", "skipped", "failed", "cancelled"];
const MODES = { page: "One page", sitemap: "The pages of a sitemap", crawl: "Crawl a site from a start page" };

/** Adds the sources section to a collection's screen `view`, after its documents. */
export async function sourcesSection(view, services, collectionId) {
  const base = `${services.chonkit}/collections/${collectionId}/sources`;
  const list = h("div", { class: "stack" }, h("p", { class: "muted" }, "Loading sources…"));
  const section = h("section", { class: "card stack", "aria-labelledby": "sources-title" },
    h("h2", { id: "sources-title" }, "Sources"),
    h("p", { class: "muted" }, "Folders on the server and web sites this collection is kept in sync with: a sync " +
      "embeds what is new, re-embeds what changed and removes what is gone, compared by content."),
    list, addForm(base, () => reload()));
  const documents = view.querySelector('[aria-labelledby="in-collection"]');
  if (documents) documents.after(section); else view.append(section);

  const following = new Map(); // source id → AbortController of the run being followed
  window.addEventListener("hashchange", () => following.forEach((c) => c.abort()), { once: true });

  async function reload() {
    let sources;
    try {
      sources = await api.get(`${base}`);
    } catch (error) {
      replace(list, errorLine(error));
      return;
    }
    following.forEach((c) => c.abort());
    following.clear();
    replace(list, sources.length ? sources.map((source) => sourceCard(source)) : empty("No sources yet. Add a folder or a web site below."));
  }

  function sourceCard(source) {
    const runPanel = h("div", { class: "stack", "aria-live": "polite" });
    const items = h("span", { class: "muted" }, plural(source.item_count, "item"));
    const card = h("article", { class: "card stack", "data-source-id": source.id, "aria-label": `Source ${source.name}` },
      h("div", { class: "row" }, h("h3", { class: "grow" }, source.name), badge(source.kind), items),
      h("p", { class: "muted" }, describe(source.spec)),
      h("div", { class: "row" }, syncButton(source, runPanel, items), scheduleForm(source), deleteButton(source)),
      runPanel);
    showRun(runPanel, source, source.last_run, items);
    return card;
  }

  function syncButton(source, runPanel, items) {
    const button = h("button", { type: "button" }, "Sync now");
    button.setAttribute("aria-label", `Sync ${source.name} now`);
    button.addEventListener("click", () => busy(button, async () => {
      try {
        showRun(runPanel, source, await api.post(`${base}/${source.id}/sync`), items);
      } catch (error) {
        notice(error); // e.g. 409 sync_in_progress: the run shown stays as it is
      }
    }));
    return button;
  }

  function scheduleForm(source) {
    const message = messageArea();
    const minutes = h("input", { type: "number", name: "schedule_minutes", min: 1, max: 525600,
      value: source.schedule_minutes ?? "", placeholder: "on demand" });
    const save = h("button", { type: "submit", class: "secondary" }, "Save schedule");
    const form = h("form", { class: "row", "aria-label": `Schedule of ${source.name}` },
      h("label", {}, "Sync every (minutes; empty: on demand only)", minutes), save, message);
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      busy(save, async () => {
        try {
          const value = minutes.value.trim() === "" ? null : Number(minutes.value);
          const saved = await api.patch(`${base}/${source.id}`, { schedule_minutes: value });
          showOk(message, saved.schedule_minutes ? `Every ${plural(saved.schedule_minutes, "minute")}.` : "On demand only.");
        } catch (error) {
          showError(message, error);
        }
      });
    });
    return form;
  }

  function deleteButton(source) {
    const button = h("button", { type: "button", class: "danger", "aria-label": `Delete source ${source.name}` }, "Delete");
    button.addEventListener("click", () => {
      if (!confirm(`Delete the source “${source.name}”? The documents only it brought are removed from this collection.`)) return;
      busy(button, async () => {
        try { await api.del(`${base}/${source.id}`); await reload(); } catch (error) { notice(error); }
      });
    });
    return button;
  }

  /** Show `run` in `panel`; while it is active, follow its events until it finishes, then refresh the count. */
  function showRun(panel, source, run, items) {
    if (!run) { replace(panel, empty("Never synced.")); return; }
    const view = runView(panel, source, items);
    view.show(run);
    if (!ACTIVE.includes(run.status)) return;
    following.get(source.id)?.abort();
    const controller = new AbortController();
    following.set(source.id, controller);
    (async () => {
      let latest = run;
      try {
        const path = `${base}/${source.id}/runs/${run.id}/events`;
        for await (const { event, data } of api.events("GET", path, undefined, controller.signal)) {
          if (!panel.isConnected) { controller.abort(); return; }
          if (event === "error") { panel.append(errorLine(data)); return; }
          if (event !== "run") continue;
          latest = data;
          view.show(latest);
        }
      } catch (error) {
        panel.append(errorLine(error));
        return;
      }
      if (controller.signal.aborted || ACTIVE.includes(latest.status)) return;
      // The collection's documents changed: a screen showing them can listen for this and reload them.
      panel.dispatchEvent(new CustomEvent("ragu:collection-changed", { bubbles: true }));
      try {
        const fresh = await api.get(`${base}/${source.id}`);
        replace(items, plural(fresh.item_count, "item"));
      } catch (error) {
        panel.append(errorLine(error));
      }
    })();
  }

  function runView(panel, source, items) {
    return {
      show(run) {
        replace(panel,
          h("p", {}, runTitle(run), " ", badge(run.status), " ", h("span", { class: "muted" }, runWhen(run))),
          ACTIVE.includes(run.status) ? progress(run) : null,
          ACTIVE.includes(run.status) && !run.cancel_requested ? cancelButton(source, run) : null,
          run.error ? h("p", { class: "error" }, `${run.error} (${run.error_code})`) : null,
          report(run.report),
          retryable(run) ? retryButton(panel, source, run, items) : null);
      },
    };
  }

  function cancelButton(source, run) {
    const button = h("button", { type: "button", class: "danger" }, "Cancel sync");
    button.addEventListener("click", () => busy(button, async () => {
      try { await api.post(`${base}/${source.id}/runs/${run.id}/cancel`); } catch (error) { notice(error); }
    }));
    return button;
  }

  function retryButton(panel, source, run, items) {
    const button = h("button", { type: "button", class: "secondary" }, "Retry what failed");
    button.addEventListener("click", () => busy(button, async () => {
      try {
        showRun(panel, source, await api.post(`${base}/${source.id}/runs/${run.id}/retry`), items);
      } catch (error) {
        notice(error);
      }
    }));
    return button;
  }

  await reload();
}

function describe(spec) {
  if (spec.kind === "folder") {
    const globs = [`include ${spec.include.join(", ")}`];
    if (spec.exclude.length) globs.push(`exclude ${spec.exclude.join(", ")}`);
    return `Folder ${spec.path} · ${globs.join(" · ")}`;
  }
  const limits = [`${spec.max_pages} pages at most`];
  if (spec.mode === "crawl") limits.unshift(`${plural(spec.depth, "link")} deep`);
  return `${MODES[spec.mode] || spec.mode}: ${spec.url} · ${limits.join(" · ")}`;
}

function runTitle(run) {
  const trigger = { manual: "Sync", schedule: "Scheduled sync", retry: "Retry" }[run.trigger] || "Sync";
  return h("strong", {}, `Last run: ${trigger}`);
}

function runWhen(run) {
  const at = run.finished_at || run.started_at || run.created_at;
  const verb = run.finished_at ? "finished" : run.started_at ? "started" : "queued";
  return at ? `${verb} ${new Date(at).toLocaleString()}` : "";
}

function progress(run) {
  if (run.status !== "embedding" || !run.job_progress) {
    const text = run.status === "queued" ? "Waiting for the syncer…" : "Listing the source and comparing it…";
    return h("label", {}, text, h("progress", { "data-run-status": run.status }));
  }
  const counts = Object.values(run.job_progress);
  const total = counts.reduce((sum, n) => sum + n, 0);
  const finished = JOB_FINISHED.reduce((sum, stage) => sum + (run.job_progress[stage] || 0), 0);
  return h("label", {}, `Embedding: ${finished} of ${total} documents finished`,
    h("progress", { max: total || 1, value: finished, "data-run-status": run.status }));
}

const COUNTS = ["added", "changed", "removed", "unchanged", "failed", "skipped"];

function report(result) {
  const counts = h("p", { class: "counts", "aria-label": "Report" }, COUNTS.map((name, i) =>
    [i ? " · " : "", h("span", { "data-count": name }, h("strong", {}, String(result[name])), ` ${name}`)]));
  const problems = result.problems.length ? h("details", { open: result.problems.length <= 5 },
    h("summary", {}, `${plural(result.problems.length, "item")} not taken`),
    h("ul", { class: "plain" }, result.problems.map((p) => h("li", {},
      badge(p.action), " ", h("span", { class: "grow" }, p.key), " ", h("span", { class: "muted" }, `${p.reason} (${p.code})`)))))
    : null;
  return [counts, problems];
}

function retryable(run) {
  return !ACTIVE.includes(run.status) && (run.status !== "done" || run.report.failed > 0);
}

function addForm(base, onAdded) {
  const message = messageArea();
  const kind = h("select", { name: "kind" }, h("option", { value: "web" }, "A web site"), h("option", { value: "folder" }, "A folder on the server"));
  const mode = h("select", { name: "mode" }, Object.entries(MODES).map(([value, text]) => h("option", { value }, text)));
  // No class on the fieldsets: .stack's display would override their hidden attribute.
  const web = h("fieldset", {}, h("legend", {}, "Web site"), h("div", { class: "stack" },
    field("URL", { name: "url", type: "url", placeholder: "https://intranet.example/handbook/" }),
    h("div", { class: "row" }, h("label", {}, "What to fetch", mode),
      field("Link depth (crawl)", { name: "depth", type: "number", min: 0, max: 5, value: 1 }),
      field("Pages at most", { name: "max_pages", type: "number", min: 1, max: 1000, value: 100 })),
    h("p", { class: "muted" }, "Pages are fetched as RaguBot, honouring robots.txt; only their visible text is kept.")));
  const folder = h("fieldset", { hidden: true }, h("legend", {}, "Folder"), h("div", { class: "stack" },
    field("Folder on the server (under an allowed root)", { name: "path", placeholder: "/srv/handbook" }),
    h("div", { class: "row" },
      field("Include (globs, comma-separated)", { name: "include", value: "**/*" }),
      field("Exclude (globs, comma-separated)", { name: "exclude", placeholder: "drafts/**" }))));
  kind.addEventListener("change", () => {
    web.hidden = kind.value !== "web";
    folder.hidden = kind.value !== "folder";
  });
  const submit = h("button", { type: "submit" }, "Add source");
  const form = h("form", { class: "stack", "aria-labelledby": "new-source" },
    h("h3", { id: "new-source" }, "Add a source"),
    h("div", { class: "row" }, field("Source name", { name: "name", required: true, maxlength: 100 }), h("label", {}, "Kind", kind),
      field("Sync every (minutes; empty: on demand only)", { name: "schedule", type: "number", min: 1 })),
    web, folder, h("div", { class: "row" }, submit), message);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    busy(submit, async () => {
      const spec = kind.value === "web"
        ? { kind: "web", url: form.url.value.trim(), mode: mode.value, depth: Number(form.depth.value), max_pages: Number(form.max_pages.value) }
        : { kind: "folder", path: form.path.value.trim(), exclude: listFrom(form.exclude.value) };
      if (spec.kind === "folder" && listFrom(form.include.value).length) spec.include = listFrom(form.include.value);
      const body = { name: form.name.value.trim(), spec };
      if (form.schedule.value.trim() !== "") body.schedule_minutes = Number(form.schedule.value);
      try {
        const created = await api.post(base, body);
        showOk(message, `Added “${created.name}”. Sync it now to fill the collection.`);
        form.name.value = "";
        await onAdded();
      } catch (error) {
        showError(message, error);
      }
    });
  });
  return form;
}
