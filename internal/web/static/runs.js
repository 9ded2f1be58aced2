// The runs list: newest first, filtered by status, project, ref, branch, event and actor
// (kept in the URL), with how many runs match, paged with the API's cursor, refreshed
// every few seconds. Each run shows its true state (waiting for approval or for a worker,
// not just "running"), its commit and why it failed.
import { clear, h } from "./dom.js";
import { api } from "./api.js";
import { liveDuration, shortID, statusBadge, when } from "./format.js";

const STATUSES = ["pending", "running", "success", "failed", "cancelled"];
const EVENTS = ["push", "pull_request", "tag", "schedule", "dispatch", "api"];
const FILTERS = ["status", "project", "ref", "branch", "event", "actor"];
// What a run's state says in words, where the word alone is not plain.
const STATE_WORDS = { waiting_approval: "waiting for approval", queued: "waiting for a worker", retrying: "waiting to retry" };
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
  const filter = Object.fromEntries(FILTERS.map((k) => [k, url.searchParams.get(k) || ""]));
  const cursor = url.searchParams.get("cursor") || "";

  const statusSelect = h("select", { id: "f-status", name: "status" },
    h("option", { value: "" }, "any"),
    STATUSES.map((st) => h("option", { value: st, selected: st === filter.status }, st)));
  const project = h("input", { id: "f-project", name: "project", value: filter.project, autocomplete: "off", placeholder: "all projects" });
  const ref = h("input", { id: "f-ref", name: "ref", value: filter.ref, autocomplete: "off", placeholder: "refs/heads/main" });
  const branch = h("input", { id: "f-branch", name: "branch", value: filter.branch, autocomplete: "off", placeholder: "any branch" });
  const eventSelect = h("select", { id: "f-event", name: "event" },
    h("option", { value: "" }, "any"),
    [...new Set([...EVENTS, filter.event].filter(Boolean))].map((e) => h("option", { value: e, selected: e === filter.event }, e)));
  const actor = h("input", { id: "f-actor", name: "actor", value: filter.actor, autocomplete: "off", placeholder: "anyone" });
  const form = h("form", {
    class: "filters", role: "search", "aria-label": "Filter runs",
    onsubmit: (ev) => {
      ev.preventDefault();
      history.pushState(null, "", "/" + query({ status: statusSelect.value, project: project.value.trim(), ref: ref.value.trim(),
        branch: branch.value.trim(), event: eventSelect.value, actor: actor.value.trim() }));
      dispatchEvent(new PopStateEvent("popstate"));
    },
  },
  h("div", { class: "field" }, h("label", { for: "f-status" }, "Status"), statusSelect),
  h("div", { class: "field" }, h("label", { for: "f-project" }, "Project"), project),
  h("div", { class: "field" }, h("label", { for: "f-branch" }, "Branch"), branch),
  h("div", { class: "field" }, h("label", { for: "f-event" }, "Event"), eventSelect),
  h("div", { class: "field" }, h("label", { for: "f-actor" }, "Actor"), actor),
  h("div", { class: "field" }, h("label", { for: "f-ref" }, "Ref"), ref),
  h("div", { class: "field actions" }, h("button", { type: "submit" }, "Apply"),
    FILTERS.some((k) => filter[k]) ? h("a", { href: "/", class: "button secondary" }, "Clear") : null));

  const tbody = h("tbody");
  const table = h("table", { class: "runs" },
    h("caption", { class: "visually-hidden" }, "Runs, newest first"),
    h("thead", {}, h("tr", {},
      ["Status", "Run", "Project", "Trigger", "Jobs", "Created", "Duration"].map((c, i) =>
        h("th", { scope: "col", class: i >= 3 ? "wide-only" : null }, c)))),
    tbody);
  const pager = h("nav", { class: "pager", "aria-label": "Pages" });
  const status = h("p", { class: "muted", role: "status" });
  const total = h("p", { class: "runs-total muted", id: "runs-total", "aria-live": "polite" });
  main.append(h("div", { class: "page-head" }, h("h1", { tabindex: "-1" }, "Runs")),
    form, total, h("div", { class: "table-wrap" }, table), status, pager);

  const load = async () => {
    const q = query({ ...filter, cursor, limit: "25" });
    const page = await api("/api/v1/runs" + q, { signal: ctx.signal });
    renderRows(tbody, page.runs);
    if (typeof page.total === "number") {
      const n = page.total.toLocaleString("en-US") + (page.total_capped ? "+" : "");
      total.textContent = (n === "1" ? "1 run" : n + " runs") + (FILTERS.some((k) => filter[k]) ? " match" : "");
    }
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

// stateBadge is a run's state as a badge, its word made plain where it needs to be.
function stateBadge(state) {
  const b = statusBadge(state);
  if (STATE_WORDS[state]) b.lastChild.textContent = STATE_WORDS[state];
  return b;
}

function renderRows(tbody, runs) {
  // Rows are rebuilt on every refresh; keep the keyboard focus where it was.
  const focused = tbody.contains(document.activeElement) ? document.activeElement.dataset.focusKey : null;
  clear(tbody);
  for (const r of runs) {
    const t = r.trigger || {};
    const who = t.user || t.actor || "";
    const trig = [t.branch || t.ref, t.sha ? t.sha.slice(0, 7) : "", t.event, who].filter(Boolean).join(" \u00b7 ");
    const state = r.state || r.status;
    const subject = (t.message || "").split("\n")[0];
    const f = r.failure;
    tbody.append(h("tr", { dataset: { runId: r.id, status: r.status, state } },
      h("td", {}, stateBadge(state), r.cancel_requested && !["success", "failed", "cancelled"].includes(r.status) ? h("span", { class: "muted" }, " cancelling") : null),
      h("td", { class: "run-cell" },
        h("a", { href: "/runs/" + r.id, dataset: { focusKey: r.id } },
          r.number ? h("span", { class: "run-number" }, "#" + r.number + " ") : null, r.name || "(unnamed)"),
        // The id's start only for a run the server did not number: ids made in the same
        // second start alike.
        r.number ? null : [" ", h("span", { class: "muted mono" }, shortID(r.id))],
        subject ? h("div", { class: "run-commit", title: t.message }, subject,
          t.author_name ? h("span", { class: "muted" }, " \u2014 " + t.author_name) : null) : null,
        f ? h("div", { class: "run-reason", title: f.reason },
          h("span", { "aria-hidden": "true" }, "\u2717 "), f.reason,
          f.failed_jobs > 1 ? h("span", { class: "muted" }, ` (+${f.failed_jobs - 1} more)`) : null) : null),
      h("td", {}, r.project),
      h("td", { class: "wide-only" }, trig),
      h("td", { class: "wide-only" }, `${r.jobs_finished}/${r.jobs_total}`),
      h("td", { class: "wide-only" }, when(r.created_at)),
      h("td", { class: "wide-only" }, liveDuration(r.started_at, r.finished_at))));
  }
  if (focused) {
    const el = tbody.querySelector(`[data-focus-key="${CSS.escape(focused)}"]`);
    if (el) el.focus();
  }
}
