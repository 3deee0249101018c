// Sign-in, navigation and routing. Screens live in their own modules; each renders into <main>.
import * as api from "./api.js";
import { h, replace, field, messageArea, showError, busy, groupsFrom, notice } from "./ui.js";
import { documentsScreen } from "./documents.js";
import { collectionsScreen, collectionScreen } from "./collections.js";
import { agentsScreen, agentScreen } from "./agents.js";
import { chatsScreen, chatScreen } from "./chat.js";

const main = document.getElementById("main");
let config = { dev_sign_in: false, services: { chonkit: "/chonkit", kappi: "/kappi" } };

const routes = [
  [/^#\/documents$/, () => documentsScreen(main, config.services), true],
  [/^#\/collections$/, () => collectionsScreen(main, config.services), true],
  [/^#\/collections\/([\w-]+)$/, (m) => collectionScreen(main, config.services, m[1]), true],
  [/^#\/agents$/, () => agentsScreen(main, config.services), true],
  [/^#\/agents\/([\w-]+)$/, (m) => agentScreen(main, config.services, m[1]), true],
  [/^#\/chats$/, () => chatsScreen(main, config.services), false],
  [/^#\/chats\/([\w-]+)$/, (m) => chatScreen(main, config.services, m[1]), false],
];

function navigation(session) {
  const links = [["#/chats", "Chat"]];
  if (session.is_admin) links.push(["#/documents", "Documents"], ["#/collections", "Collections"], ["#/agents", "Agents"]);
  const nav = document.getElementById("nav");
  replace(nav, ...links.map(([href, text]) => h("a", { href }, text)));
  nav.hidden = false;
  replace(document.getElementById("who"),
    h("span", {}, `${session.subject}${session.is_admin ? " (admin)" : ""}`),
    h("button", { type: "button", class: "secondary", onclick: signOutNow },
      "Sign out"));
}

function signOutNow() {
  api.signOut();
  history.replaceState(null, "", location.pathname);
  render();
}

function go(hash) {
  if (location.hash === hash) render();
  else location.hash = hash;
}

function markCurrent() {
  for (const a of document.querySelectorAll("#nav a")) {
    if (location.hash.startsWith(a.getAttribute("href"))) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

async function render() {
  notice(null);
  const session = api.current();
  if (!session) {
    document.getElementById("nav").hidden = true;
    replace(document.getElementById("who"));
    signInScreen();
    return;
  }
  const route = routes.find(([pattern, , adminOnly]) => pattern.test(location.hash) && (!adminOnly || session.is_admin));
  if (!route) {
    location.replace(session.is_admin ? "#/collections" : "#/chats");
    return;
  }
  markCurrent();
  try {
    await route[1](location.hash.match(route[0]));
  } catch (error) {
    notice(error);
  }
  if (!main.contains(document.activeElement)) main.focus();
}

function signInScreen() {
  if (!config.dev_sign_in) {
    replace(main, h("h1", {}, "Sign in"),
      h("p", { class: "card" }, "This Ragu is configured with an identity provider (JWKS). Signing in through it " +
        "is not supported by the console yet; use the APIs with a token from your identity provider."));
    return;
  }
  const message = messageArea();
  const subject = field("User name", { name: "subject", required: true, autocomplete: "username", value: "" });
  const groups = field("Groups (comma-separated)", { name: "groups", placeholder: "hr, legal" });
  const admin = h("label", { class: "check" }, h("input", { type: "checkbox", name: "admin" }), "Admin");
  const submit = h("button", { type: "submit" }, "Sign in");
  const form = h("form", { class: "card stack", "aria-labelledby": "signin-title" },
    h("p", { class: "dev-banner" }, h("strong", {}, "Development only. "),
      "Anyone who can reach this page can sign in as anyone. Configure a JWKS for production; this form then disappears."),
    subject, groups, admin, submit, message);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    busy(submit, async () => {
      try {
        const token = await api.post("/console/dev-token", {
          subject: form.subject.value.trim(),
          groups: groupsFrom(form.groups.value),
          admin: form.admin.checked,
        });
        api.signIn(token);
        navigation(token);
        go(token.is_admin ? "#/collections" : "#/chats");
      } catch (error) {
        showError(message, error);
      }
    });
  });
  replace(main, h("h1", { id: "signin-title" }, "Sign in to Ragu"), form);
  form.subject.focus();
}

window.addEventListener("hashchange", render);

try {
  config = await api.get("/console/config");
} catch (error) {
  notice(error);
}
render();
