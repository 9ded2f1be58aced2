// The runs list: newest first, filtered by status, project and ref, paged with the
// API's cursor, refreshed every few seconds.
import { clear, h } from "./dom.js";
import { api } from "./api.js";
import { liveDuration, shortID, statusBadge, when } from "./format.js";

const STATUSES = ["pending", "running", "success", "failed", "cancelled"];
const REFRESH_MS = 2000;

// previous remembers, for a page's cursor, the cursor of the page before it, as the user
// walks to older pages: the API pages only forward.
const previous = new Map();

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  const s = q.toString();
  return s ? "?" + s : "";
}

export async function runsPage(main, _params, ctx) {
  ctx.title("Runs");
  const url = new URL(location.href);
  const filter = {
    status: url.searchParams.get("status") || "",
    project: url.searchParams.get("project") || "",
    ref: url.searchParams.get("ref") || "",
  };
  const cursor = url.searchParams.get("cursor") || "";

  const statusSelect = h("select", { id: "f-status", name: "status" },
    h("option", { value: "" }, "any"),
    STATUSES.map((st) => h("option", { value: st, selected: st === filter.status }, st)));
  const project = h("input", { id: "f-project", name: "project", value: filter.project, autocomplete: "off", placeholder: "all projects" });
  const ref = h("input", { id: "f-ref", name: "ref", value: filter.ref, autocomplete: "off", placeholder: "refs/heads/main" });
  const form = h("form", {
    class: "filters", role: "search", "aria-label": "Filter runs",
    onsubmit: (ev) => {
      ev.preventDefault();
      history.pushState(null, "", "/" + query({ status: statusSelect.value, project: project.value.trim(), ref: ref.value.trim() }));
      dispatchEvent(new PopStateEvent("popstate"));
    },
  },
  h("div", { class: "field" }, h("label", { for: "f-status" }, "Status"), statusSelect),
  h("div", { class: "field" }, h("label", { for: "f-project" }, "Project"), project),
  h("div", { class: "field" }, h("label", { for: "f-ref" }, "Ref"), ref),
  h("div", { class: "field actions" }, h("button", { type: "submit" }, "Apply"),
    (filter.status || filter.project || filter.ref) ? h("a", { href: "/", class: "button secondary" }, "Clear") : null));

  const tbody = h("tbody");
  const table = h("table", { class: "runs" },
    h("caption", { class: "visually-hidden" }, "Runs, newest first"),
    h("thead", {}, h("tr", {},
      ["Status", "Run", "Project", "Trigger", "Jobs", "Created", "Duration"].map((c, i) =>
        h("th", { scope: "col", class: i >= 3 && i <= 5 ? "wide-only" : null }, c)))),
    tbody);
  const pager = h("nav", { class: "pager", "aria-label": "Pages" });
  const status = h("p", { class: "muted", role: "status" });
  main.append(h("div", { class: "page-head" }, h("h1", { tabindex: "-1" }, "Runs")),
    form, h("div", { class: "table-wrap" }, table), status, pager);

  const load = async () => {
    const q = query({ ...filter, cursor, limit: "25" });
    const page = await api("/api/v1/runs" + q, { signal: ctx.signal });
    renderRows(tbody, page.runs);
    status.textContent = page.runs.length === 0 ? (cursor ? "No older runs." : "No runs match.") : "";
    clear(pager);
    if (cursor) {
      const prev = previous.get(cursor);
      pager.append(h("a", { href: "/" + query({ ...filter, cursor: prev }), class: "button secondary" },
        prev ? "\u2190 Newer runs" : "\u2190 Newest runs"));
    }
    if (page.next_cursor) {
      previous.set(page.next_cursor, cursor);
      pager.append(h("a", { href: "/" + query({ ...filter, cursor: page.next_cursor }), class: "button secondary", rel: "next" }, "Older runs \u2192"));
    }
  };
  await load();
  const timer = setInterval(() => load().catch(() => {}), REFRESH_MS);
  ctx.onCleanup(() => clearInterval(timer));
}

function renderRows(tbody, runs) {
  // Rows are rebuilt on every refresh; keep the keyboard focus where it was.
  const focused = tbody.contains(document.activeElement) ? document.activeElement.dataset.focusKey : null;
  clear(tbody);
  for (const r of runs) {
    const t = r.trigger || {};
    const trig = [t.branch || t.ref, t.sha ? t.sha.slice(0, 7) : "", t.event].filter(Boolean).join(" \u00b7 ");
    tbody.append(h("tr", { dataset: { runId: r.id, status: r.status } },
      h("td", {}, statusBadge(r.status), r.cancel_requested && r.status === "running" ? h("span", { class: "muted" }, " cancelling") : null),
      h("td", {}, h("a", { href: "/runs/" + r.id, dataset: { focusKey: r.id } }, r.name || "(unnamed)"),
        " ", h("span", { class: "muted mono" }, shortID(r.id))),
      h("td", {}, r.project),
      h("td", { class: "wide-only" }, trig),
      h("td", { class: "wide-only" }, `${r.jobs_finished}/${r.jobs_total}`),
      h("td", { class: "wide-only" }, when(r.created_at)),
      h("td", {}, liveDuration(r.started_at, r.finished_at))));
  }
  if (focused) {
    const el = tbody.querySelector(`[data-focus-key="${CSS.escape(focused)}"]`);
    if (el) el.focus();
  }
}
