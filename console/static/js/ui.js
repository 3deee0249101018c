// Small DOM helpers: elements are built with textContent, never innerHTML, so no text from a document,
// a chat or an error message can ever become markup.

/** h("button", {class: "x", onclick: f}, "Save") */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) el.addEventListener(key.slice(2), value);
    else if (key === "class") el.className = value;
    else if (key === "value") el.value = value;
    else if (key === "checked") el.checked = Boolean(value);
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function replace(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A labelled input; `label` wraps it so the text is its accessible name. */
export function field(label, attrs = {}) {
  return h("label", {}, label, h("input", { type: "text", ...attrs }));
}

let counter = 0;
export const uid = (prefix) => `${prefix}-${++counter}`;

/** A message area for one form or panel: errors in plain words from the problem's `detail`. */
export function messageArea() {
  return h("p", { role: "status", "aria-live": "polite", class: "muted" });
}

export function showError(area, error) {
  area.className = "error";
  area.textContent = plainWords(error);
}

export function showOk(area, text) {
  area.className = "ok";
  area.textContent = text;
}

/** An error raised by the page itself, shown like a problem from a service. */
export function problemOf(detail) {
  const error = new Error(detail);
  error.detail = detail;
  return error;
}

/** A problem's `detail` as a sentence; a request refused for its fields (400 or 422) lists them instead. */
export function plainWords(error) {
  if (error && typeof error.detail === "string") {
    const fields = fieldErrors(error.body);
    const words = fields.length ? fields.join("; ") : sentence(error.detail);
    return error.status === 401 ? `${words}. Sign in again.` : words;
  }
  return "Something went wrong. Try again.";
}

// Each entry of a problem's `errors` names a field by `key` (or `field`); the key `data` is the whole body,
// as in "Object contains unknown field `nope`", so it names nothing worth showing.
function fieldErrors(body) {
  const errors = body && Array.isArray(body.errors) ? body.errors : [];
  return errors.filter((e) => e && typeof e.message === "string" && e.message).map((e) => {
    const where = e.key ?? e.field;
    return sentence(e.message) + (where && where !== "data" ? ` at ${where}` : "");
  });
}

const sentence = (text) => text.charAt(0).toUpperCase() + text.slice(1);

/** An error in place of content that could not be loaded. */
export function errorLine(error) {
  return h("p", { class: "error" }, plainWords(error));
}

/** The page-wide notice, for errors that belong to no form. */
export function notice(error) {
  const el = document.getElementById("notice");
  if (!error) { el.hidden = true; el.textContent = ""; return; }
  el.textContent = plainWords(error);
  el.hidden = false;
  el.scrollIntoView({ block: "nearest" });
}

/** Disable a button while `work` runs, so a double click does not send twice. */
export async function busy(button, work) {
  button.disabled = true;
  try { return await work(); } finally { button.disabled = false; }
}

/** `table` with each body cell named by its column's heading (data-label), which phone widths show beside it. */
export function labelled(table) {
  const names = [...table.querySelectorAll("thead th")].map((th) => th.textContent);
  for (const row of table.querySelectorAll("tbody tr")) {
    [...row.children].forEach((cell, i) => { if (names[i]) cell.dataset.label = names[i]; });
  }
  return table;
}

export function badge(text) { return h("span", { class: `badge ${text}` }, text); }

export function empty(text) { return h("p", { class: "empty" }, text); }

/** "hr, legal, hr" → ["hr", "legal"]: comma-separated names, trimmed, without duplicates. */
export function listFrom(text) {
  return [...new Set(text.split(",").map((g) => g.trim()).filter(Boolean))];
}

export const groupsFrom = listFrom;

export function pages(start, end) {
  if (start == null) return "";
  return end != null && end !== start ? `pages ${start}–${end}` : `page ${start}`;
}

/** plural(1, "chunk") → "1 chunk"; plural(3, "chunk") → "3 chunks". */
export function plural(n, noun) {
  return `${n} ${noun}${n === 1 ? "" : "s"}`;
}

export function bytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}
