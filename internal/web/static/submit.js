// Submit a pipeline: paste or load a YAML or JSON definition and start a run. A definition
// the coordinator rejects is shown mistake by mistake, with its line.
import { h } from "./dom.js";
import { raw } from "./api.js";
import { navigate } from "./app.js";

const example = `name: hello
jobs:
  build:
    steps:
      - run: echo "building" && mkdir -p out && echo app > out/app
    artifacts: { paths: [out/app] }
  test:
    needs: [build]
    steps:
      - run: test -f out/app && echo "tests passed"
`;

export function submitPage(main, _params, ctx) {
  ctx.title("New run");
  const text = h("textarea", {
    id: "pipeline", name: "pipeline", rows: 18, spellcheck: "false", required: true,
    class: "mono", "aria-describedby": "pipeline-help",
  });
  text.value = example;
  const file = h("input", {
    type: "file", id: "pipeline-file", accept: ".yml,.yaml,.json,application/json,text/yaml",
    onchange: async () => {
      const f = file.files && file.files[0];
      if (f) text.value = await f.text();
    },
  });
  const errors = h("div", { class: "error", role: "alert", id: "submit-errors", hidden: true });
  const button = h("button", { type: "submit", id: "submit-run" }, "Start run");
  const form = h("form", {
    class: "submit-run", onsubmit: async (ev) => {
      ev.preventDefault();
      const body = text.value;
      if (!body.trim()) return;
      button.disabled = true;
      errors.hidden = true;
      const json = body.trimStart().startsWith("{");
      try {
        const res = await raw("/api/v1/runs", {
          method: "POST", body, signal: ctx.signal,
          headers: { "Content-Type": json ? "application/json" : "application/yaml" },
        });
        const run = await res.json();
        navigate("/runs/" + encodeURIComponent(run.id));
      } catch (e) {
        if (e.name === "AbortError") return;
        errors.replaceChildren(h("p", {}, "The run was not started: " + e.message));
        if (e.details && e.details.length) {
          errors.append(h("ul", {}, e.details.map((d) =>
            h("li", {}, d.line ? `line ${d.line}${d.column ? ":" + d.column : ""}: ` : "", d.path ? d.path + ": " : "", d.message))));
        }
        errors.hidden = false;
        button.disabled = false;
        text.focus();
      }
    },
  },
  h("div", { class: "field" }, h("label", { for: "pipeline" }, "Pipeline (YAML or JSON)"), text,
    h("p", { id: "pipeline-help", class: "muted small" }, "The same definition ", h("code", {}, "gantry submit"), " takes; see docs/pipelines.md.")),
  h("div", { class: "field" }, h("label", { for: "pipeline-file" }, "Or load a file"), file),
  errors, button);
  main.append(h("h1", { tabindex: "-1" }, "New run"), form);
}
