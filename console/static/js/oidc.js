// OpenID Connect sign-in: the authorization-code flow with PKCE (S256), code exchanged by the console server
// (POST /console/oidc/token) so the page talks only to its own origin.
//
// Across the round trip to the provider, the PKCE verifier, state and nonce wait in sessionStorage — the
// standard place for them: this tab only, gone when it closes, useless without the provider's one-time code,
// and removed the moment the provider answers. Tokens never go there: they stay in api.js's memory.
import * as api from "./api.js";

const PENDING = "ragu.oidc.pending";
const PENDING_MAX_AGE_MS = 10 * 60 * 1000;
const MIN_REFRESH_SECONDS = 5;

/** A sign-in that failed on this side; `detail` is shown as it is. */
export class SignInError extends Error {
  constructor(detail) {
    super(detail);
    this.detail = detail;
    this.code = "sign_in_failed";
  }
}

function base64url(bytes) {
  let text = "";
  for (const byte of new Uint8Array(bytes)) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

const randomString = (bytes) => base64url(crypto.getRandomValues(new Uint8Array(bytes)));

function redirectUri(config) {
  return config.oidc.redirect_uri || location.origin + location.pathname;
}

/** Leave for the provider's sign-in page; the answer comes back to this page (see completeSignIn). */
export async function startSignIn(config) {
  if (!window.isSecureContext || !crypto.subtle) {
    throw new SignInError("Signing in needs a secure page: open the console over https (or on localhost).");
  }
  const provider = await api.get("/console/oidc/provider");
  const verifier = randomString(32);
  const challenge = base64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
  const pending = {
    state: randomString(16), nonce: randomString(16), verifier, redirect_uri: redirectUri(config),
    issuer: provider.issuer, return_to: location.hash, created: Date.now(),
  };
  sessionStorage.setItem(PENDING, JSON.stringify(pending));
  const url = new URL(provider.authorization_endpoint);
  const params = {
    response_type: "code", client_id: config.oidc.client_id, redirect_uri: pending.redirect_uri,
    scope: config.oidc.scopes, state: pending.state, nonce: pending.nonce,
    code_challenge: challenge, code_challenge_method: "S256",
  };
  for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value);
  location.assign(url.href);
}

/** Whether this page load is the provider's answer to a sign-in. */
export function isCallback() {
  const query = new URLSearchParams(location.search);
  return query.has("code") || query.has("error");
}

function takePending() {
  const raw = sessionStorage.getItem(PENDING);
  sessionStorage.removeItem(PENDING);
  try { return raw ? JSON.parse(raw) : null; } catch { return null; }
}

/** Check the provider's answer against the sign-in this tab started, then have the server redeem the code. */
export async function completeSignIn() {
  const query = new URLSearchParams(location.search);
  const pending = takePending();
  // The code leaves the address bar and the history at once, whatever happens next.
  history.replaceState(null, "", location.pathname + ((pending && pending.return_to) || ""));
  if (!pending || Date.now() - pending.created > PENDING_MAX_AGE_MS) {
    throw new SignInError("This sign-in was not started in this tab, or took too long. Sign in again.");
  }
  if (query.get("state") !== pending.state) {
    throw new SignInError("The identity provider's answer does not match the sign-in started here " +
      "(state mismatch), so it was ignored. Sign in again.");
  }
  if (query.has("iss") && query.get("iss") !== pending.issuer) {
    throw new SignInError("The answer came from another identity provider than the one asked, so it was ignored.");
  }
  if (query.has("error")) {
    throw new SignInError(`The identity provider did not sign you in: ${query.get("error_description") || query.get("error")}`);
  }
  return api.post("/console/oidc/token", {
    code: query.get("code"), code_verifier: pending.verifier, redirect_uri: pending.redirect_uri, nonce: pending.nonce,
  });
}

let refreshTimer = null;

/**
 * Renew the session's tokens before they expire, for as long as the provider hands out refresh tokens.
 * `onRefreshed(session)` gets each renewed session; `onEnded(error)` is called when renewal is refused.
 */
export function keepFresh(session, onRefreshed, onEnded) {
  stopRefreshing();
  if (!session.refresh_token) return;
  const delay = Math.max(MIN_REFRESH_SECONDS, session.expires_in * 0.75) * 1000;
  refreshTimer = setTimeout(async () => {
    if (api.current() !== session) return;
    try {
      const renewed = await api.post("/console/oidc/refresh", { refresh_token: session.refresh_token });
      if (api.current() !== session) return;
      const next = { ...renewed, id_token: renewed.id_token || session.id_token };
      onRefreshed(next);
      keepFresh(api.current(), onRefreshed, onEnded);
    } catch (error) {
      if (api.current() === session) onEnded(error);
    }
  }, delay);
}

export function stopRefreshing() {
  clearTimeout(refreshTimer);
  refreshTimer = null;
}

/** Sign out at the provider too, when it offers RP-initiated logout; false when it does not. */
export async function signOutAtProvider(config, session) {
  const provider = await api.get("/console/oidc/provider");
  if (!provider.end_session_endpoint) return false;
  const url = new URL(provider.end_session_endpoint);
  url.searchParams.set("client_id", config.oidc.client_id);
  url.searchParams.set("post_logout_redirect_uri", redirectUri(config));
  if (session.id_token) url.searchParams.set("id_token_hint", session.id_token);
  location.assign(url.href);
  return true;
}
