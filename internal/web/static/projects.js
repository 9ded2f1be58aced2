// The projects: each one's repository and pipeline settings, with links to its page and
// to its runs (the runs list filtered by project).
import { h } from "./dom.js";
import { api } from "./api.js";
import { when } from "./format.js";

/** runsLink is the runs list filtered to project name. */
export function runsLink(name) {
  return "/?project=" + encodeURIComponent(name);
}

/** projectLink is the dashboard page of project name. */
export function projectLink(name) {
  return "/projects/" + encodeURIComponent(name);
}

export async function projectsPage(main, _params, ctx) {
  ctx.title("Projects");
  const { projects } = await api("/api/v1/projects", { signal: ctx.signal });
  const tbody = h("tbody");
  for (const p of projects) {
    tbody.append(h("tr", { dataset: { project: p.name } },
      h("td", {}, h("a", { href: projectLink(p.name) }, p.name)),
      h("td", { class: "mono break" }, p.repo_url || h("span", { class: "muted" }, "none")),
      h("td", { class: "wide-only" }, p.provider || ""),
      h("td", { class: "mono wide-only" }, p.pipeline_path || ""),
      h("td", { class: "mono" }, p.default_branch || ""),
      h("td", { class: "wide-only" }, when(p.created_at)),
      h("td", {}, h("a", { href: runsLink(p.name), "aria-label": "Runs of " + p.name }, "Runs"))));
  }
  main.append(h("h1", { tabindex: "-1" }, "Projects"),
    h("div", { class: "table-wrap" }, h("table", { class: "projects" },
      h("caption", { class: "visually-hidden" }, "Projects, by name"),
      h("thead", {}, h("tr", {},
        ["Name", "Repository", "Provider", "Pipeline", "Default branch", "Created", "Runs"].map((c, i) =>
          h("th", { scope: "col", class: i === 2 || i === 3 || i === 5 ? "wide-only" : null }, c)))),
      tbody)),
    projects.length ? null : h("p", { class: "muted", role: "status" },
      "No project yet. An admin makes one with ", h("code", {}, "gantry project create"), "."));
}
