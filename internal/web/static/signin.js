// Sign in with an API token. The token is checked against the API, then kept for this
// tab (sessionStorage) or, when asked, on this device (localStorage).
import { h } from "./dom.js";
import { api, live, setToken } from "./api.js";
import { navigate } from "./app.js";

export function signinPage(main, _params, ctx) {
  ctx.title("Sign in");
  const next = new URL(location.href).searchParams.get("next") || "/";
  const token = h("input", { type: "password", id: "token", name: "token", required: true, autocomplete: "current-password", spellcheck: "false", "aria-describedby": "token-help" });
  const remember = h("input", { type: "checkbox", id: "remember" });
  const error = h("p", { class: "error", role: "alert", id: "signin-error", hidden: true });
  const submit = h("button", { type: "submit" }, "Sign in");
  const form = h("form", {
    class: "signin", onsubmit: async (ev) => {
      ev.preventDefault();
      const t = token.value.trim();
      if (!t) return;
      submit.disabled = true;
      error.hidden = true;
      try {
        // Any read will do; the runs list is what most tokens may see.
        await api("/api/v1/runs?limit=1", { headers: { Authorization: "Bearer " + t }, noRedirect: true, signal: ctx.signal });
        setToken(t, remember.checked);
        live.reset();
        navigate(next.startsWith("/") && !next.startsWith("//") ? next : "/", { replace: true });
      } catch (e) {
        if (e.name === "AbortError") return;
        error.textContent = e.status === 401 ? "That token is not valid." : e.status === 403 ? "That token may not read runs: use a read, write or admin token." : "Could not sign in: " + e.message;
        error.hidden = false;
        submit.disabled = false;
        token.focus();
      }
    },
  },
  h("div", { class: "field" }, h("label", { for: "token" }, "API token"), token,
    h("p", { id: "token-help", class: "muted small" }, "Create one with ", h("code", {}, "gantry token create --db <the server's --db> --role write --name dashboard"),
      " (", h("code", {}, "read"), " is enough to look).")),
  h("div", { class: "field checkbox" }, remember, h("label", { for: "remember" }, "Remember on this device")),
  error, submit);
  main.append(h("h1", { tabindex: "-1" }, "Sign in to Gantry"),
    h("p", {}, "This server needs an API token."), form);
  token.focus();
}
