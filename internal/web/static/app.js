// The dashboard's shell: a router over the History API, the header, and the page clock.
import { clear, h } from "./dom.js";
import { clearToken, getToken, live, setUnauthorizedHandler } from "./api.js";
import { tick } from "./format.js";
import { runsPage } from "./runs.js";
import { runByNumberPage, runPage } from "./run.js";
import { jobPage } from "./job.js";
import { workersPage } from "./workers.js";
import { statsPage } from "./stats.js";
import { signinPage } from "./signin.js";
import { submitPage } from "./submit.js";
import { dispatchPage } from "./dispatch.js";
import { projectsPage } from "./projects.js";
import { projectPage } from "./project.js";
import { projectTestsPage } from "./tests.js";
import { approvalsPage, refreshInboxCount } from "./actions.js";

const routes = [
  [/^\/(?:runs)?$/, runsPage, "runs"],
  [/^\/runs\/new$/, submitPage, "new"],
  [/^\/dispatch$/, dispatchPage, "dispatch"],
  [/^\/runs\/([^/]+)$/, runPage, "runs"],
  [/^\/jobs\/([^/]+)$/, jobPage, "runs"],
  [/^\/approvals$/, approvalsPage, "approvals"],
  [/^\/projects$/, projectsPage, "projects"],
  [/^\/projects\/([^/]+)$/, projectPage, "projects"],
  [/^\/projects\/([^/]+)\/tests$/, projectTestsPage, "projects"],
  [/^\/projects\/([^/]+)\/runs\/([0-9]+)$/, runByNumberPage, "runs"],
  [/^\/workers$/, workersPage, "workers"],
  [/^\/stats$/, statsPage, "stats"],
  [/^\/signin$/, signinPage, ""],
];

let current = null; // {controller, cleanups}
let shown = ""; // the path and query of the page shown
let firstRender = true;

/** navigate goes to an app path, as a click on a link would. */
export function navigate(path, { replace = false } = {}) {
  if (replace) history.replaceState(null, "", path);
  else history.pushState(null, "", path);
  render();
}

/**
 * setQuery puts search ("" or "?...") in the URL for a page that has shown it itself (a
 * tab, a form's question): pushed, or in place with replace. The page is not made again;
 * going back to another query makes it from that URL.
 */
export function setQuery(search, { replace = false } = {}) {
  const path = location.pathname + search;
  if (replace) history.replaceState(null, "", path);
  else history.pushState(null, "", path);
  shown = path;
}

/** announce tells screen readers something that changed without a page change. */
export function announce(text) {
  const el = document.getElementById("announcer");
  el.textContent = "";
  setTimeout(() => { el.textContent = text; }, 50);
}

function renderSession() {
  const el = clear(document.getElementById("session"));
  if (!getToken()) return;
  el.append(h("button", {
    type: "button", class: "link-button", onclick: () => {
      clearToken();
      live.reset();
      navigate("/signin");
    },
  }, "Sign out"));
}

function render() {
  shown = location.pathname + location.search;
  if (current) {
    current.controller.abort();
    for (const fn of current.cleanups) fn();
  }
  const main = clear(document.getElementById("main"));
  const path = location.pathname;
  let page = null, params = [], section = "";
  for (const [re, fn, sec] of routes) {
    const m = re.exec(path);
    if (m) { page = fn; params = m.slice(1).map(decodeURIComponent); section = sec; break; }
  }
  for (const a of document.querySelectorAll("[data-nav]")) {
    if (a.dataset.nav === section) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  renderSession();
  refreshInboxCount();
  const ctx = {
    controller: new AbortController(),
    cleanups: [],
    get signal() { return this.controller.signal; },
    onCleanup(fn) { this.cleanups.push(fn); },
    /** every runs fn now and then every ms until the page is left. */
    every(ms, fn) {
      fn();
      const t = setInterval(fn, ms);
      this.cleanups.push(() => clearInterval(t));
    },
    title(text) { document.title = text ? text + " \u00b7 Gantry" : "Gantry"; },
  };
  current = ctx;
  if (!page) {
    ctx.title("Not found");
    main.append(h("h1", { tabindex: "-1" }, "Page not found"),
      h("p", {}, "There is no page at ", h("code", {}, path), ". ", h("a", { href: "/" }, "See all runs"), "."));
  } else {
    Promise.resolve(page(main, params, ctx)).catch((e) => {
      if (e.name === "AbortError" || ctx.signal.aborted) return;
      showError(main, e);
    });
  }
  // Move focus to the new page's heading, as a page load would, unless the URL names a
  // place in the page (a log line).
  if (!location.hash && !firstRender) {
    const h1 = main.querySelector("h1");
    if (h1) h1.focus({ preventScroll: true });
  }
  firstRender = false;
}

/** showError shows what went wrong in place of the page. */
export function showError(main, e) {
  if (e && e.status === 401) return; // on the way to sign-in
  main.append(h("div", { class: "error", role: "alert" },
    h("strong", {}, e && e.status === 404 ? "Not found: " : "Something went wrong: "),
    (e && e.message) || String(e)));
}

// Links inside the app change the page without a reload.
document.addEventListener("click", (ev) => {
  if (ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.altKey) return;
  const a = ev.target.closest("a[href]");
  // getAttribute, not .href and .target: on an SVG <a> those are not strings.
  if (!a || a.getAttribute("target") || a.hasAttribute("download")) return;
  const url = new URL(a.getAttribute("href"), location.href);
  if (url.origin !== location.origin || url.pathname.startsWith("/api/") || url.pathname.startsWith("/blobs/")) return;
  if (url.pathname === location.pathname && url.search === location.search && url.hash) return; // an anchor
  ev.preventDefault();
  navigate(url.pathname + url.search + url.hash);
});

// A change of the hash alone (#L120, a line of a log) is the page's own (hashchange): the
// page is not made again.
window.addEventListener("popstate", () => {
  if (location.pathname + location.search !== shown) render();
});

setUnauthorizedHandler(() => {
  if (location.pathname === "/signin") return;
  clearToken();
  const next = location.pathname + location.search + location.hash;
  navigate("/signin?next=" + encodeURIComponent(next), { replace: true });
});

setInterval(tick, 1000);
setInterval(refreshInboxCount, 30000);
render();
