// Calls to chonkit and kappi with the signed-in user's token. The token lives only in this module's
// memory: never in localStorage, sessionStorage or cookies, so reloading the page signs you out.

let session = null;

export function signIn(value) { session = value; }
export function signOut() { session = null; }
export function current() { return session; }

/** An error from a service, carrying the problem-details `code` and plain-words `detail`. */
export class ApiError extends Error {
  constructor(status, code, detail, body = null) {
    super(detail);
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.body = body;
  }
}

function headers(extra = {}) {
  const h = { Accept: "application/json", ...extra };
  if (session) h.Authorization = `Bearer ${session.token}`;
  return h;
}

async function problem(response) {
  let body = null;
  try { body = await response.json(); } catch { body = null; }
  const detail = body && typeof body.detail === "string" ? body.detail : `${response.status} ${response.statusText}`;
  return new ApiError(response.status, (body && body.code) || "http_error", detail, body);
}

async function send(method, path, body, extraHeaders = {}) {
  let response;
  try {
    response = await fetch(path, { method, headers: headers(extraHeaders), body });
  } catch {
    throw new ApiError(0, "network_error", "The server could not be reached. Check that Ragu is running.");
  }
  if (!response.ok) throw await problem(response);
  if (response.status === 204) return null;
  const type = response.headers.get("content-type") || "";
  return type.includes("json") ? response.json() : response.text();
}

export const get = (path) => send("GET", path);
export const del = (path) => send("DELETE", path);
export const post = (path, json) => send("POST", path, json === undefined ? undefined : JSON.stringify(json),
  json === undefined ? {} : { "Content-Type": "application/json" });
export const put = (path, json) => send("PUT", path, JSON.stringify(json), { "Content-Type": "application/json" });
export const patch = (path, json) => send("PATCH", path, JSON.stringify(json), { "Content-Type": "application/json" });

/** Fetch a file with the bearer token and hand it to the browser as a download named `filename`. */
export async function download(path, filename) {
  let response;
  try {
    response = await fetch(path, { headers: headers({ Accept: "*/*" }) });
  } catch {
    throw new ApiError(0, "network_error", "The server could not be reached. Check that Ragu is running.");
  }
  if (!response.ok) throw await problem(response);
  const url = URL.createObjectURL(await response.blob());
  const link = document.createElement("a");
  link.href = url;
  link.download = filename;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

/** Multipart upload; answers the per-file results even when every file was rejected. */
export async function upload(path, files) {
  const form = new FormData();
  for (const file of files) form.append("files", file, file.name);
  try {
    return await send("POST", path, form);
  } catch (error) {
    if (error instanceof ApiError && error.body && Array.isArray(error.body.results)) return { results: error.body.results };
    throw error;
  }
}

/**
 * Server-Sent Events over fetch, because EventSource can neither POST nor send an Authorization header.
 * Yields {event, data} with data parsed as JSON; stops when the stream ends or `signal` aborts.
 */
export async function* events(method, path, json, signal) {
  const init = { method, headers: headers({ Accept: "text/event-stream" }), signal };
  if (json !== undefined) {
    init.body = JSON.stringify(json);
    init.headers["Content-Type"] = "application/json";
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (error) {
    if (signal && signal.aborted) return;
    throw new ApiError(0, "network_error", "The server could not be reached. Check that Ragu is running.");
  }
  if (!response.ok) throw await problem(response);
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  let name = "message";
  let data = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      const lines = buffer.split(/\r\n|\r|\n/);
      buffer = lines.pop();
      for (const line of lines) {
        if (line === "") {
          if (data.length) yield { event: name, data: JSON.parse(data.join("\n")) };
          name = "message";
          data = [];
        } else if (line.startsWith(":")) {
          continue;
        } else {
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
          if (field === "event") name = text;
          else if (field === "data") data.push(text);
        }
      }
    }
  } catch (error) {
    if (signal && signal.aborted) return;
    throw error;
  } finally {
    reader.releaseLock();
  }
}
