// Sign-in, navigation and routing. Screens live in their own modules; each renders into a view of its own
// inside <main>, so a slow screen that finishes after the user has moved on writes into a detached view
// instead of replacing the screen they are on.
import * as api from "./api.js";
import { h, replace, field, messageArea, showError, busy, groupsFrom, notice, plainWords } from "./ui.js";
import * as oidc from "./oidc.js";
import { documentsScreen } from "./documents.js";
import { collectionsScreen, collectionScreen } from "./collections.js";
import { sourcesSection } from "./sources.js";
import { agentsScreen, agentScreen } from "./agents.js";
import { chatsScreen, chatScreen, newChatScreen } from "./chat.js";

const main = document.getElementById("main");
let config = { sign_in: [], oidc: null, services: { chonkit: "/chonkit", kappi: "/kappi" } };
let signInMessage = null; // why the last sign-in failed or the session ended, shown on the sign-in screen

const routes = [
  [/^#\/documents$/, (view) => documentsScreen(view, config.services), true],
  [/^#\/collections$/, (view) => collectionsScreen(view, config.services), true],
  [/^#\/collections\/([\w-]+)$/, async (view, m) => {
    await collectionScreen(view, config.services, m[1]);
    await sourcesSection(view, config.services, m[1]);
  }, true],
  [/^#\/agents$/, (view) => agentsScreen(view, config.services), true],
  [/^#\/agents\/([\w-]+)$/, (view, m) => agentScreen(view, config.services, m[1]), true],
  [/^#\/chats$/, (view) => chatsScreen(view, config.services), false],
  [/^#\/chats\/new\/([\w-]+)$/, (view, m) => newChatScreen(view, config.services, m[1]), false],
  [/^#\/chats\/([\w-]+)$/, (view, m) => chatScreen(view, config.services, m[1]), false],
];

function navigation(session) {
  const links = [["#/chats", "Chat"]];
  if (session.is_admin) links.push(["#/documents", "Documents"], ["#/collections", "Collections"], ["#/agents", "Agents"]);
  const nav = document.getElementById("nav");
  replace(nav, ...links.map(([href, text]) => h("a", { href }, text)));
  nav.hidden = false;
  replace(document.getElementById("who"),
    h("span", {}, `${session.name || session.subject}${session.is_admin ? " (admin)" : ""}`),
    h("button", { type: "button", class: "secondary", onclick: signOutNow }, "Sign out"));
}

function startSession(session, via) {
  api.signIn({ ...session, via });
  navigation(session);
  if (via === "oidc") {
    oidc.keepFresh(api.current(), (renewed) => api.signIn({ ...renewed, via }), (error) => {
      endSession();
      signInMessage = `Your session ended: ${plainWords(error)}`;
      render();
    });
  }
}

function endSession() {
  oidc.stopRefreshing();
  api.signOut();
}

async function signOutNow() {
  const session = api.current();
  endSession();
  history.replaceState(null, "", location.pathname);
  if (session && session.via === "oidc") {
    try {
      if (await oidc.signOutAtProvider(config, session)) return;
    } catch (error) {
      signInMessage = `Signed out of Ragu, but not at the identity provider: ${plainWords(error)}`;
    }
  }
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
  const view = h("div", { class: "view" }, h("p", { class: "muted" }, "Loading…"));
  replace(main, view);
  try {
    await route[1](view, location.hash.match(route[0]));
  } catch (error) {
    replace(view, h("p", { class: "error", role: "alert" }, plainWords(error)));
  }
  if (view.isConnected && !main.contains(document.activeElement)) main.focus();
}

function signInScreen() {
  const parts = [h("h1", { id: "signin-title" }, "Sign in to Ragu")];
  const message = messageArea();
  if (signInMessage) showError(message, { detail: signInMessage });
  signInMessage = null;
  parts.push(message);
  if (config.sign_in.includes("oidc")) parts.push(providerSignIn(message));
  if (config.sign_in.includes("development")) parts.push(developmentSignIn(message));
  if (!config.sign_in.length) {
    parts.push(h("p", { class: "card" }, "This Ragu accepts tokens from an identity provider (JWKS) but has no " +
      "sign-in configured for the console: set RAGU_OIDC_ISSUER and RAGU_OIDC_CLIENT_ID, or use the APIs with a " +
      "token from your identity provider."));
  }
  replace(main, ...parts);
  const first = main.querySelector("input, button");
  if (first) first.focus();
}

function providerSignIn(message) {
  const host = new URL(config.oidc.issuer).host;
  const button = h("button", { type: "button" }, "Sign in with your organisation's account");
  button.addEventListener("click", () => busy(button, async () => {
    try {
      await oidc.startSignIn(config);
    } catch (error) {
      showError(message, error);
    }
  }));
  return h("section", { class: "card stack", "aria-label": "Sign in with your identity provider" },
    h("p", {}, "You sign in at ", h("strong", {}, host), " and come back here."), h("div", { class: "row" }, button));
}

function developmentSignIn(message) {
  const subject = field("User name", { name: "subject", required: true, autocomplete: "username", value: "" });
  const groups = field("Groups (comma-separated)", { name: "groups", placeholder: "hr, legal" });
  const admin = h("label", { class: "check" }, h("input", { type: "checkbox", name: "admin" }), "Admin");
  const submit = h("button", { type: "submit" }, "Sign in");
  const form = h("form", { class: "card stack", "aria-labelledby": "signin-title" },
    h("p", { class: "dev-banner" }, h("strong", {}, "Development only. "),
      "Anyone who can reach this page can sign in as anyone. Configure a JWKS for production; this form then disappears."),
    subject, groups, admin, h("div", { class: "row" }, submit));
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    busy(submit, async () => {
      try {
        const session = await api.post("/console/dev-token", {
          subject: form.subject.value.trim(),
          groups: groupsFrom(form.groups.value),
          admin: form.admin.checked,
        });
        startSession(session, "development");
        go(session.is_admin ? "#/collections" : "#/chats");
      } catch (error) {
        showError(message, error);
      }
    });
  });
  return form;
}

window.addEventListener("hashchange", render);

try {
  config = await api.get("/console/config");
} catch (error) {
  notice(error);
}
if (oidc.isCallback()) {
  try {
    startSession(await oidc.completeSignIn(), "oidc");
  } catch (error) {
    signInMessage = plainWords(error);
  }
}
render();
