// The queue at a glance: GET /api/v1/stats, refreshed every few seconds.
import { clear, fill, h } from "./dom.js";
import { api } from "./api.js";
import { duration, everyProjectOnly, statusBadge, when } from "./format.js";

export async function statsPage(main, _params, ctx) {
  ctx.title("Queue");
  const cards = h("div", { class: "cards" });
  const lanes = h("tbody");
  const workers = h("ul", { class: "plain" });
  main.append(h("h1", { tabindex: "-1" }, "Queue"), cards,
    h("section", { "aria-labelledby": "lanes-h" }, h("h2", { id: "lanes-h" }, "Queued jobs by lane and labels"),
      h("div", { class: "table-wrap" }, h("table", {},
        h("thead", {}, h("tr", {}, ["Priority", "Labels", "Jobs"].map((c) => h("th", { scope: "col" }, c)))), lanes))),
    h("section", { "aria-labelledby": "workers-h" }, h("h2", { id: "workers-h" }, "Workers by state"), workers));
  const card = (label, value, extra) => h("div", { class: "card" }, h("div", { class: "card-value" }, String(value)), h("div", { class: "card-label" }, label), extra || null);
  const load = async () => {
    const st = await api("/api/v1/stats", { signal: ctx.signal });
    fill(cards, 
      card("queued", st.queued_total),
      card("assigned", st.assigned),
      card("running", st.running),
      card("retrying", st.retrying),
      card("oldest queued wait", st.queued_total ? duration(st.oldest_queued_wait_seconds * 1000) : "\u2014",
        st.oldest_queued_at ? h("div", { class: "muted small" }, "since ", when(st.oldest_queued_at)) : null));
    clear(lanes);
    for (const q of st.queued) {
      lanes.append(h("tr", {}, h("td", {}, q.priority),
        h("td", {}, q.labels.length ? q.labels.map((l) => h("span", { class: "tag" }, l)) : h("span", { class: "muted" }, "none")),
        h("td", {}, String(q.jobs))));
    }
    if (st.queued.length === 0) lanes.append(h("tr", {}, h("td", { colspan: "3", class: "muted" }, "Nothing is queued.")));
    clear(workers);
    const states = Object.entries(st.workers || {});
    for (const [state, n] of states) workers.append(h("li", {}, statusBadge(state), " ", String(n)));
    if (states.length === 0) workers.append(h("li", { class: "muted" }, "No workers."));
  };
  try {
    await load();
  } catch (e) {
    if (e.status !== 403) throw e;
    clear(main).append(h("h1", { tabindex: "-1" }, "Queue"), everyProjectOnly("The queue's numbers"));
    return;
  }
  const t = setInterval(() => load().catch(() => {}), 3000);
  ctx.onCleanup(() => clearInterval(t));
}
