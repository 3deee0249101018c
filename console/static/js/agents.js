// Admin: agents (create, edit, activate, versions), their collections (top_k, max_distance, instruction, retrieval
// mode and weight, tag/label filters), and access.
import * as api from "./api.js";
import { h, replace, field, messageArea, showError, showOk, busy, badge, empty, groupsFrom, notice, errorLine, uid, labelled } from "./ui.js";

export async function agentsScreen(main, services) {
  const base = services.kappi;
  const agents = await api.get(`${base}/admin/agents`);
  const message = messageArea();
  const submit = h("button", { type: "submit" }, "Create agent");
  const form = h("form", { class: "card stack", "aria-labelledby": "new-agent" },
    h("h2", { id: "new-agent" }, "New agent"),
    h("div", { class: "row" }, field("Name", { name: "name", required: true }),
      field("Groups that may use it (comma-separated; empty = everyone)", { name: "groups" })),
    field("Description", { name: "description" }),
    h("div", { class: "row" }, submit), message);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    busy(submit, async () => {
      try {
        const agent = await api.post(`${base}/admin/agents`, {
          name: form.name.value.trim(), description: form.description.value, groups: groupsFrom(form.groups.value),
        });
        location.hash = `#/agents/${agent.id}`;
      } catch (error) {
        showError(message, error);
      }
    });
  });
  replace(main, h("h1", {}, "Agents"), form,
    h("section", { class: "card", "aria-labelledby": "all-agents" }, h("h2", { id: "all-agents" }, "All agents"),
      agents.length ? labelled(h("table", {},
        h("thead", {}, h("tr", {}, ["Name", "Groups", "Collections", "LLM", "State"].map((t) => h("th", {}, t)))),
        h("tbody", {}, agents.map((a) => h("tr", {},
          h("td", {}, h("a", { href: `#/agents/${a.id}` }, a.name)),
          h("td", {}, a.groups.length ? a.groups.join(", ") : h("span", { class: "muted" }, "everyone")),
          h("td", {}, a.collections.map((c) => c.name).join(", ") || h("span", { class: "muted" }, "none")),
          h("td", {}, llmName(a.config.llm_provider, a.config.llm_model)),
          h("td", {}, badge(a.active ? "active" : "inactive")))))))
        : empty("No agents yet. Create one above.")));
}

export async function agentScreen(main, services, id) {
  const base = services.kappi;
  const [agent, collections, llms] = await Promise.all([
    api.get(`${base}/admin/agents/${id}`), api.get(`${services.chonkit}/collections`), api.get(`${base}/admin/llms`)]);
  const assignments = h("section", { class: "card", "aria-labelledby": "assigned" });
  const reload = async () => renderAssignments(base, await api.get(`${base}/admin/agents/${id}`), assignments, reload);
  renderAssignments(base, agent, assignments, reload);
  const title = h("h1", {});
  const versions = h("section", { class: "card", "aria-labelledby": "versions-title" });
  const showAgent = (current) => replace(title, current.name, " ", badge(current.active ? "active" : "inactive"));
  const onSaved = async (saved) => { showAgent(saved); await showVersions(base, saved, versions); };
  showAgent(agent);
  replace(main,
    h("p", {}, h("a", { href: "#/agents" }, "← All agents")),
    title,
    h("div", { class: "grid" }, editForm(base, agent, onSaved, llms), assignForm(base, id, collections, reload)),
    assignments, versions, accessView(base, id));
  await showVersions(base, agent, versions);
}

/** The configuration history: every change to the LLM or its instructions made a version. */
async function showVersions(base, agent, panel) {
  let versions;
  try {
    versions = await api.get(`${base}/admin/agents/${agent.id}/versions`);
  } catch (error) {
    replace(panel, h("h2", { id: "versions-title" }, "Versions"), errorLine(error));
    return;
  }
  const newestFirst = [...versions].sort((a, b) => b.version - a.version);
  replace(panel, h("h2", { id: "versions-title" }, `Versions (${versions.length})`),
    h("p", { class: "muted" }, "Changing the LLM or its instructions makes a new version; earlier answers keep theirs."),
    labelled(h("table", {},
      h("thead", {}, h("tr", {}, ["Version", "LLM", "Temperature", "Saved by", "When", "System prompt"].map((t) => h("th", {}, t)))),
      h("tbody", {}, newestFirst.map((v) => h("tr", { "data-version": v.version },
        h("td", {}, `v${v.version} `, v.version === agent.current_version ? h("span", { class: "badge active" }, "current") : null),
        h("td", {}, llmName(v.llm_provider, v.llm_model)),
        h("td", {}, rounded(v.temperature)),
        h("td", {}, v.created_by),
        h("td", {}, new Date(v.created_at).toLocaleString()),
        h("td", {}, h("details", {}, h("summary", {}, "Show"), h("div", { class: "chunk" }, v.system_prompt)))))))));
}

// How each settings field is read from its input; only fields whose input changed are sent, so a value
// the form merely displays differently (a float rounded for reading) never makes a new version by itself.
const SETTINGS = {
  name: (v) => v.trim(), description: (v) => v, groups: groupsFrom, llm_provider: (v) => v.trim(),
  llm_model: (v) => v.trim(), temperature: Number, max_tokens: Number, system_prompt: (v) => v,
};

const rounded = (x) => Math.round(x * 100) / 100;

/** "gpt-4o-mini (openai)"; a provider whose one model shares its name ("extractive") is named once. */
const llmName = (provider, model) => (model === provider ? model : `${model} (${provider})`);

/** The LLM fields: a provider picked from those this kappi offers (GET /admin/llms), and a model suggested from
 * the provider's list (typed freely for a server that lists none). An agent's provider that is gone stays shown. */
function llmFields(agent, llms) {
  const offers = new Map(llms.providers.map((offer) => [offer.provider, offer]));
  const current = agent.config.llm_provider;
  const names = offers.has(current) ? [...offers.keys()] : [...offers.keys(), current];
  const label = (name) => {
    const status = offers.get(name)?.status;
    if (!offers.has(name)) return `${name} (not available here)`;
    return status === "ready" ? name : `${name} (${status === "starting" ? "loading" : "stopped"})`;
  };
  const provider = h("select", { name: "llm_provider" },
    names.map((name) => h("option", { value: name, selected: name === current }, label(name))));
  const suggestions = h("datalist", { id: uid("llm-models") });
  const model = h("input", { type: "text", name: "llm_model", value: agent.config.llm_model, list: suggestions.id });
  const suggest = () => replace(suggestions, (offers.get(provider.value)?.models || []).map((m) => h("option", { value: m })));
  provider.addEventListener("change", () => {
    const models = offers.get(provider.value)?.models || [];
    if (models.length && !models.includes(model.value)) model.value = models[0];
    suggest();
  });
  suggest();
  return h("div", { class: "row" }, h("label", {}, "LLM provider", provider), h("label", { class: "full" }, "Model", model, suggestions));
}

function editForm(base, agent, onSaved, llms) {
  const message = messageArea();
  const submit = h("button", { type: "submit" }, "Save changes");
  const toggle = h("button", { type: "button", class: "secondary" }, agent.active ? "Deactivate" : "Activate");
  const form = h("form", { class: "card stack", "aria-labelledby": "edit-agent" },
    h("h2", { id: "edit-agent" }, "Settings"),
    field("Name", { name: "name", required: true, value: agent.name }),
    field("Description", { name: "description", value: agent.description }),
    field("Groups that may use it (comma-separated; empty = everyone)", { name: "groups", value: agent.groups.join(", ") }),
    llmFields(agent, llms),
    h("div", { class: "row" },
      field("Temperature", { name: "temperature", type: "number", min: 0, max: 2, step: "0.1", value: rounded(agent.config.temperature) }),
      field("Max answer tokens", { name: "max_tokens", type: "number", min: 1, max: 32000, value: agent.config.max_tokens })),
    h("label", {}, "System prompt", h("textarea", { name: "system_prompt", value: agent.config.system_prompt })),
    h("div", { class: "row" }, submit, toggle), message);
  const values = () => Object.fromEntries(Object.keys(SETTINGS).map((name) => [name, form[name].value]));
  let shown = values();
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const changed = Object.fromEntries(Object.entries(SETTINGS)
      .filter(([name]) => form[name].value !== shown[name]).map(([name, read]) => [name, read(form[name].value)]));
    if (!Object.keys(changed).length) { showOk(message, "Nothing changed."); return; }
    busy(submit, async () => {
      try {
        const saved = await api.patch(`${base}/admin/agents/${agent.id}`, changed);
        showOk(message, saved.current_version > agent.current_version
          ? `Saved as version ${saved.current_version}.` : "Saved (no new version: the LLM and its instructions are unchanged).");
        shown = values();
        Object.assign(agent, saved);
        await onSaved(saved);
      } catch (error) {
        showError(message, error);
      }
    });
  });
  toggle.addEventListener("click", () => busy(toggle, async () => {
    try {
      const saved = await api.post(`${base}/admin/agents/${agent.id}/${agent.active ? "deactivate" : "activate"}`);
      agent.active = saved.active;
      toggle.textContent = saved.active ? "Deactivate" : "Activate";
      await onSaved(saved);
      showOk(message, saved.active ? "Active: users in its groups can chat with it." : "Inactive: hidden from users.");
    } catch (error) {
      showError(message, error);
    }
  }));
  return form;
}

function assignForm(base, id, collections, reload) {
  const message = messageArea();
  const results = h("ul", { class: "plain" });
  const submit = h("button", { type: "submit" }, "Assign collection");
  const select = h("select", { name: "collection", required: true },
    collections.map((c) => h("option", { value: `${c.vector_provider}|${c.name}` }, `${c.name} (${c.vector_provider})`)));
  const mode = h("select", { name: "mode" }, Object.entries(MODES).map(([value, label]) => h("option", { value }, label)));
  const form = h("form", { class: "card stack", "aria-labelledby": "assign-title" },
    h("h2", { id: "assign-title" }, "Assign a collection"),
    collections.length ? h("label", {}, "Collection", select) : empty("No collections exist yet."),
    h("div", { class: "row" },
      field("Top k", { name: "top_k", type: "number", min: 1, max: 50, value: 5 }),
      field("Max distance (optional)", { name: "max_distance", type: "number", step: "0.01", min: 0 })),
    field("Instruction (what this collection is for)", { name: "instruction" }),
    h("div", { class: "row" },
      h("label", {}, "Retrieval mode", mode),
      field("Dense weight (hybrid: 1 = by meaning only, 0 = by words only)",
        { name: "dense_weight", type: "number", step: "0.05", min: 0, max: 1, value: 0.4 })),
    h("div", { class: "row" },
      field("Only documents tagged (comma-separated; empty = all)", { name: "tags", placeholder: "policy" }),
      field("Only documents labelled (comma-separated; empty = all)", { name: "labels" })),
    h("div", { class: "row" }, submit), message, results);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!collections.length) return;
    busy(submit, async () => {
      const [vectorProvider, name] = select.value.split("|");
      const spec = { vector_provider: vectorProvider, name, top_k: Number(form.top_k.value) || 5, instruction: form.instruction.value };
      if (form.max_distance.value !== "") spec.max_distance = Number(form.max_distance.value);
      spec.mode = mode.value;
      if (form.dense_weight.value !== "") spec.dense_weight = Number(form.dense_weight.value);
      const tags = groupsFrom(form.tags.value), labels = groupsFrom(form.labels.value);
      spec.tags = tags.length ? tags : null;
      spec.labels = labels.length ? labels : null;
      try {
        const report = await api.put(`${base}/admin/agents/${id}/collections`, { add: [spec] });
        replace(results, report.results.map((r) => h("li", {}, `${r.action} ${r.name}`,
          r.ok ? h("span", { class: "ok" }, "ok") : h("span", { class: "error" }, r.detail || r.code))));
        message.textContent = "";
        await reload();
      } catch (error) {
        showError(message, error);
      }
    });
  });
  return form;
}

const MODES = { hybrid: "hybrid (meaning and words)", dense: "dense (meaning)", lexical: "lexical (words, BM25)" };

/** How an assignment is searched, in a table cell: its mode (with the hybrid weight) and its filters. */
function retrievalOf(c) {
  const mode = c.mode === "hybrid" ? `hybrid, dense weight ${c.dense_weight}` : c.mode;
  const filters = [c.tags && `tags: ${c.tags.join(", ")}`, c.labels && `labels: ${c.labels.join(", ")}`].filter(Boolean);
  return [mode, filters.length ? h("div", { class: "muted" }, filters.join("; ")) : null].filter(Boolean);
}

function renderAssignments(base, agent, panel, reload) {
  replace(panel, h("h2", { id: "assigned" }, "Collections this agent searches"),
    agent.collections.length ? labelled(h("table", {},
      h("thead", {}, h("tr", {}, ["Collection", "Top k", "Max distance", "Search", "Instruction", ""].map((t) => h("th", {}, t)))),
      h("tbody", {}, agent.collections.map((c) => {
        const remove = h("button", { type: "button", class: "danger", "aria-label": `Remove ${c.name}` }, "Remove");
        remove.addEventListener("click", () => busy(remove, async () => {
          try {
            await api.put(`${base}/admin/agents/${agent.id}/collections`, { remove: [{ vector_provider: c.vector_provider, name: c.name }] });
            await reload();
          } catch (error) { notice(error); }
        }));
        return h("tr", {}, h("td", {}, `${c.name} (${c.vector_provider})`), h("td", {}, c.top_k),
          h("td", {}, c.max_distance ?? "–"), h("td", {}, ...retrievalOf(c)), h("td", {}, c.instruction || ""),
          h("td", {}, remove));
      }))))
      : empty("No collections assigned: the agent will answer without sources."));
}

function accessView(base, id) {
  const results = h("div", { "aria-live": "polite" });
  const submit = h("button", { type: "submit" }, "Check access");
  const form = h("form", { class: "card stack", "aria-labelledby": "access-title" },
    h("h2", { id: "access-title" }, "Access check"),
    h("p", { class: "muted" }, "What could a user in these groups search through this agent — and why not the rest?"),
    field("Groups (comma-separated)", { name: "groups", placeholder: "hr" }),
    h("div", { class: "row" }, submit), results);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    busy(submit, async () => {
      try {
        const answer = await api.post(`${base}/admin/agents/${id}/access`, { groups: groupsFrom(form.groups.value) });
        replace(results,
          h("p", {}, !answer.agent_visible
            ? h("strong", { class: "error" }, "The agent is hidden from this user (inactive, or not in its groups).")
            : answer.searches_nothing
              ? h("strong", { class: "error" }, "This user can search nothing through this agent: "
                + "every collection it searches is restricted to groups they are not in.")
              : h("strong", { class: "ok" }, "The agent is visible to this user.")),
          answer.collections.length ? labelled(h("table", {},
            h("thead", {}, h("tr", {}, ["Collection", "Searchable", "Why"].map((t) => h("th", {}, t)))),
            h("tbody", {}, answer.collections.map((v) => h("tr", {},
              h("td", {}, `${v.collection} (${v.vector_provider})`),
              h("td", {}, v.searchable ? h("span", { class: "ok" }, "yes") : h("span", { class: "error" }, "no")),
              h("td", {}, `${v.reason}: ${v.detail}`))))))
            : empty("The agent has no collections."));
      } catch (error) {
        replace(results, errorLine(error));
      }
    });
  });
  return form;
}
