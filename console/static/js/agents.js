// Admin: agents (create, edit, activate), their collections (top_k, max_distance, instruction), and access.
import * as api from "./api.js";
import { h, replace, field, messageArea, showError, showOk, busy, badge, empty, groupsFrom } from "./ui.js";

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
      agents.length ? h("table", {},
        h("thead", {}, h("tr", {}, ["Name", "Groups", "Collections", "Model", "State"].map((t) => h("th", {}, t)))),
        h("tbody", {}, agents.map((a) => h("tr", {},
          h("td", {}, h("a", { href: `#/agents/${a.id}` }, a.name)),
          h("td", {}, a.groups.length ? a.groups.join(", ") : h("span", { class: "muted" }, "everyone")),
          h("td", {}, a.collections.map((c) => c.name).join(", ") || h("span", { class: "muted" }, "none")),
          h("td", {}, `${a.config.llm_provider} ${a.config.llm_model}`),
          h("td", {}, badge(a.active ? "active" : "inactive"))))))
        : empty("No agents yet. Create one above.")));
}

export async function agentScreen(main, services, id) {
  const base = services.kappi;
  const [agent, collections] = await Promise.all([api.get(`${base}/admin/agents/${id}`), api.get(`${services.chonkit}/collections`)]);
  const assignments = h("section", { class: "card", "aria-labelledby": "assigned" });
  const reload = async () => renderAssignments(base, await api.get(`${base}/admin/agents/${id}`), assignments, reload);
  renderAssignments(base, agent, assignments, reload);
  replace(main,
    h("p", {}, h("a", { href: "#/agents" }, "← All agents")),
    h("h1", {}, agent.name, " ", badge(agent.active ? "active" : "inactive")),
    h("div", { class: "grid" }, editForm(base, agent), assignForm(base, id, collections, reload)),
    assignments, accessView(base, id));
}

function editForm(base, agent) {
  const message = messageArea();
  const submit = h("button", { type: "submit" }, "Save changes");
  const toggle = h("button", { type: "button", class: "secondary" }, agent.active ? "Deactivate" : "Activate");
  const form = h("form", { class: "card stack", "aria-labelledby": "edit-agent" },
    h("h2", { id: "edit-agent" }, "Settings"),
    field("Name", { name: "name", required: true, value: agent.name }),
    field("Description", { name: "description", value: agent.description }),
    field("Groups that may use it (comma-separated; empty = everyone)", { name: "groups", value: agent.groups.join(", ") }),
    h("div", { class: "row" },
      field("LLM provider", { name: "llm_provider", value: agent.config.llm_provider }),
      field("Model", { name: "llm_model", value: agent.config.llm_model })),
    h("label", {}, "System prompt", h("textarea", { name: "system_prompt", value: agent.config.system_prompt })),
    h("p", { class: "muted" }, `Version ${agent.current_version}`),
    h("div", { class: "row" }, submit, toggle), message);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    busy(submit, async () => {
      try {
        const saved = await api.patch(`${base}/admin/agents/${agent.id}`, {
          name: form.name.value.trim(), description: form.description.value, groups: groupsFrom(form.groups.value),
          llm_provider: form.llm_provider.value.trim(), llm_model: form.llm_model.value.trim(),
          system_prompt: form.system_prompt.value,
        });
        showOk(message, `Saved (version ${saved.current_version}).`);
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
  const form = h("form", { class: "card stack", "aria-labelledby": "assign-title" },
    h("h2", { id: "assign-title" }, "Assign a collection"),
    collections.length ? h("label", {}, "Collection", select) : empty("No collections exist yet."),
    h("div", { class: "row" },
      field("Top k", { name: "top_k", type: "number", min: 1, max: 50, value: 5 }),
      field("Max distance (optional)", { name: "max_distance", type: "number", step: "0.01", min: 0 })),
    field("Instruction (what this collection is for)", { name: "instruction" }),
    h("div", { class: "row" }, submit), message, results);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!collections.length) return;
    busy(submit, async () => {
      const [vectorProvider, name] = select.value.split("|");
      const spec = { vector_provider: vectorProvider, name, top_k: Number(form.top_k.value) || 5, instruction: form.instruction.value };
      if (form.max_distance.value !== "") spec.max_distance = Number(form.max_distance.value);
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

function renderAssignments(base, agent, panel, reload) {
  replace(panel, h("h2", { id: "assigned" }, "Collections this agent searches"),
    agent.collections.length ? h("table", {},
      h("thead", {}, h("tr", {}, ["Collection", "Top k", "Max distance", "Instruction", ""].map((t) => h("th", {}, t)))),
      h("tbody", {}, agent.collections.map((c) => {
        const remove = h("button", { type: "button", class: "danger" }, "Remove");
        remove.addEventListener("click", () => busy(remove, async () => {
          try {
            await api.put(`${base}/admin/agents/${agent.id}/collections`, { remove: [{ vector_provider: c.vector_provider, name: c.name }] });
            await reload();
          } catch (error) { alert(error.detail); }
        }));
        return h("tr", {}, h("td", {}, `${c.name} (${c.vector_provider})`), h("td", {}, c.top_k),
          h("td", {}, c.max_distance ?? "–"), h("td", {}, c.instruction || ""), h("td", {}, remove));
      })))
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
          h("p", {}, answer.agent_visible ? h("strong", { class: "ok" }, "The agent is visible to this user.")
            : h("strong", { class: "error" }, "The agent is hidden from this user (inactive, or not in its groups).")),
          answer.collections.length ? h("table", {},
            h("thead", {}, h("tr", {}, ["Collection", "Searchable", "Why"].map((t) => h("th", {}, t)))),
            h("tbody", {}, answer.collections.map((v) => h("tr", {},
              h("td", {}, `${v.collection} (${v.vector_provider})`),
              h("td", {}, v.searchable ? h("span", { class: "ok" }, "yes") : h("span", { class: "error" }, "no")),
              h("td", {}, `${v.reason}: ${v.detail}`)))))
            : empty("The agent has no collections."));
      } catch (error) {
        replace(results, h("p", { class: "error" }, error.detail));
      }
    });
  });
  return form;
}
