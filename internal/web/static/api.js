// The API client: bearer token, JSON errors, 401 -> sign-in, and one shared WebSocket
// that carries every live subscription of the page.

const TOKEN_KEY = "gantry.token";

export function getToken() {
  return sessionStorage.getItem(TOKEN_KEY) || localStorage.getItem(TOKEN_KEY) || "";
}

/** setToken keeps the token for this tab, or on this device when remember is set. */
export function setToken(token, remember) {
  clearToken();
  (remember ? localStorage : sessionStorage).setItem(TOKEN_KEY, token);
}

export function clearToken() {
  sessionStorage.removeItem(TOKEN_KEY);
  localStorage.removeItem(TOKEN_KEY);
}

/** ApiError is an answer in the API's error format (or a network failure, status 0). */
export class ApiError extends Error {
  constructor(status, code, message, details = []) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details; // [{path, line, column, message}] for a rejected pipeline
  }
}

let onUnauthorized = () => {};

/** setUnauthorizedHandler sets what happens on a 401: the app sends you to sign in. */
export function setUnauthorizedHandler(fn) {
  onUnauthorized = fn;
}

function authHeaders(headers) {
  const out = new Headers(headers || {});
  const t = getToken();
  if (t && !out.has("Authorization")) out.set("Authorization", "Bearer " + t);
  return out;
}

let anonymousOK = false;

/** anonymousWorks reports whether a request without a token was answered: auth is off. */
export function anonymousWorks() {
  return anonymousOK;
}

/** raw fetches path with the token and returns the Response, throwing ApiError on errors. */
export async function raw(path, opts = {}) {
  let res;
  try {
    res = await fetch(path, { ...opts, headers: authHeaders(opts.headers) });
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, "network", "cannot reach the server: " + e.message);
  }
  if (res.ok) {
    if (!getToken()) anonymousOK = true;
    return res;
  }
  let code = "http_" + res.status, message = res.status + " " + res.statusText, details = [];
  try {
    const body = await res.json();
    if (body && body.error) ({ code, message } = body.error);
    if (body && body.error && Array.isArray(body.error.details)) details = body.error.details;
  } catch { /* not JSON */ }
  if (res.status === 401 && !opts.noRedirect) onUnauthorized();
  throw new ApiError(res.status, code, message, details);
}

/** api calls a JSON endpoint and returns the decoded answer. */
export async function api(path, opts = {}) {
  const res = await raw(path, opts);
  return res.status === 204 ? null : res.json();
}

export function post(path, signal) {
  return api(path, { method: "POST", signal });
}

/** postJSON posts body as JSON and returns the decoded answer. */
export function postJSON(path, body, signal) {
  return sendJSON("POST", path, body, signal);
}

/** sendJSON sends body as JSON with method (PUT, PATCH, POST) and returns the decoded answer. */
export function sendJSON(method, path, body, signal) {
  return api(path, { method, signal, headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
}

/**
 * download asks the API, with the token, for an artifact's short-lived signed URL and
 * opens it: an <a href> to the API cannot carry the token, and the bytes come straight
 * from the blob store (which names the file), never through this page's memory.
 */
export async function download(path, filename) {
  const { url } = await api(path + "?redirect=false");
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  a.rel = "noopener";
  document.body.append(a);
  a.click();
  a.remove();
}

/**
 * Live multiplexes subscriptions over one WebSocket to /api/v1/ws. It connects on the
 * first subscription, reconnects with backoff when the connection drops, and then
 * subscribes again with the message each subscriber gives for "now" (a log resumes after
 * the last line it received).
 */
class Live {
  constructor() {
    this.ws = null;
    this.subs = new Map(); // id -> {message: () => object, onMessage}
    this.next = 1;
    this.backoff = 500;
    this.timer = null;
    this.listeners = new Set();
    this.state = "closed";
  }

  /** subscribe starts a subscription; message() makes its subscribe message. */
  subscribe(message, onMessage) {
    const id = "s" + this.next++;
    this.subs.set(id, { message, onMessage });
    if (this.ws && this.ws.readyState === WebSocket.OPEN) this.send(id);
    else this.connect();
    return () => {
      this.subs.delete(id);
      if (this.ws && this.ws.readyState === WebSocket.OPEN) {
        this.ws.send(JSON.stringify({ type: "unsubscribe", id }));
      }
    };
  }

  /** onState calls fn with "connecting", "open" or "closed" as the connection changes. */
  onState(fn) {
    this.listeners.add(fn);
    fn(this.state);
    return () => this.listeners.delete(fn);
  }

  setState(st) {
    this.state = st;
    for (const fn of this.listeners) fn(st);
  }

  send(id) {
    const sub = this.subs.get(id);
    this.ws.send(JSON.stringify({ ...sub.message(), type: "subscribe", id }));
  }

  connect() {
    if (this.ws || this.timer) return;
    const proto = location.protocol === "https:" ? "wss:" : "ws:";
    let url = proto + "//" + location.host + "/api/v1/ws";
    const t = getToken();
    if (t) url += "?access_token=" + encodeURIComponent(t);
    const ws = new WebSocket(url);
    this.ws = ws;
    this.setState("connecting");
    ws.onopen = () => {
      this.backoff = 500;
      this.setState("open");
      for (const id of this.subs.keys()) this.send(id);
    };
    ws.onmessage = (ev) => {
      let msg;
      try { msg = JSON.parse(ev.data); } catch { return; }
      const sub = this.subs.get(msg.id);
      if (sub) sub.onMessage(msg);
    };
    ws.onclose = () => {
      this.ws = null;
      this.setState("closed");
      if (this.subs.size === 0) return;
      this.timer = setTimeout(() => { this.timer = null; this.connect(); }, this.backoff);
      this.backoff = Math.min(this.backoff * 2, 10_000);
    };
  }

  /** reset closes the connection, for a new token; subscriptions reconnect. */
  reset() {
    if (this.ws) this.ws.close();
  }
}

export const live = new Live();
