// Registered workers, refreshed every few seconds.
import { clear, h } from "./dom.js";
import { api } from "./api.js";
import { bytes, everyProjectOnly, statusBadge, when } from "./format.js";

export async function workersPage(main, _params, ctx) {
  ctx.title("Workers");
  const tbody = h("tbody");
  const empty = h("p", { class: "muted", role: "status" });
  main.append(h("h1", { tabindex: "-1" }, "Workers"),
    h("div", { class: "table-wrap" }, h("table", {},
      h("thead", {}, h("tr", {}, ["Name", "State", "Labels", "CPU", "Memory", "Max jobs", "Version", "Last seen"].map((c) => h("th", { scope: "col" }, c)))),
      tbody)), empty);
  const load = async () => {
    const { workers } = await api("/api/v1/workers", { signal: ctx.signal });
    clear(tbody);
    for (const w of workers) {
      tbody.append(h("tr", { dataset: { state: w.state } },
        h("td", {}, w.name, h("br"), h("span", { class: "muted mono small" }, w.id)),
        h("td", {}, statusBadge(w.state)),
        h("td", {}, w.labels.length ? w.labels.map((l) => h("span", { class: "tag" }, l)) : h("span", { class: "muted" }, "none")),
        h("td", {}, w.milli_cpu ? (w.milli_cpu / 1000).toString() : "any"),
        h("td", {}, w.memory ? bytes(w.memory) : "any"),
        h("td", {}, String(w.max_jobs)),
        h("td", { class: "mono" }, w.version),
        h("td", {}, when(w.last_seen_at))));
    }
    empty.textContent = workers.length ? "" : "No worker has registered. Start one with: gantry worker --server " + location.origin;
  };
  try {
    await load();
  } catch (e) {
    if (e.status !== 403) throw e;
    clear(main).append(h("h1", { tabindex: "-1" }, "Workers"), everyProjectOnly("Workers"));
    return;
  }
  const t = setInterval(() => load().catch(() => {}), 5000);
  ctx.onCleanup(() => clearInterval(t));
}
