// Start a run by hand: a registered workflow, or a repository project's pipeline file at a
// ref, with the inputs its on: dispatch declares. The coordinator checks the inputs; those
// it refuses are listed one by one.
import { h } from "./dom.js";
import { api } from "./api.js";
import { navigate } from "./app.js";

/** inputField is the form control of one declared input, by its type. */
function inputField(input) {
  const id = "input-" + input.name;
  const label = h("label", { for: id }, input.name, input.required ? " (required)" : "");
  const help = input.description ? h("p", { class: "muted small" }, input.description) : null;
  let control;
  switch (input.type) {
    case "boolean":
      control = h("input", { type: "checkbox", id, "data-input": input.name, "data-type": "boolean" });
      control.checked = input.default === "true";
      return h("div", { class: "field" }, h("label", {}, control, " ", input.name), help);
    case "choice":
      control = h("select", { id, "data-input": input.name, required: input.required && input.default == null },
        h("option", { value: "" }, input.default != null ? "(default: " + input.default + ")" : "(choose)"),
        (input.options || []).map((o) => h("option", { value: o }, o)));
      break;
    default:
      control = h("input", {
        type: "text", id, "data-input": input.name, inputmode: input.type === "number" ? "decimal" : null,
        placeholder: input.default != null ? "default: " + input.default : "",
        required: input.required && input.default == null,
      });
  }
  return h("div", { class: "field" }, label, control, help);
}

/** freeInputs is the control for a project's inputs, which only its file at the ref knows. */
function freeInputs() {
  return h("div", { class: "field" },
    h("label", { for: "dispatch-inputs-text" }, "Inputs (NAME=VALUE, one a line)"),
    h("textarea", { id: "dispatch-inputs-text", rows: 4, spellcheck: "false", class: "mono", "aria-describedby": "dispatch-inputs-help" }),
    h("p", { id: "dispatch-inputs-help", class: "muted small" },
      "Checked against the inputs the pipeline file at the ref declares under ", h("code", {}, "on: dispatch"), "."));
}

/** collect reads the form's inputs: given values only, so that defaults apply. */
function collect(fields) {
  const inputs = {};
  for (const el of fields.querySelectorAll("[data-input]")) {
    if (el.dataset.type === "boolean") inputs[el.dataset.input] = el.checked;
    else if (el.value !== "") inputs[el.dataset.input] = el.value;
  }
  const text = fields.querySelector("#dispatch-inputs-text");
  const bad = [];
  if (text) {
    for (const line of text.value.split("\n")) {
      if (!line.trim()) continue;
      const eq = line.indexOf("=");
      if (eq <= 0) { bad.push(line); continue; }
      inputs[line.slice(0, eq).trim()] = line.slice(eq + 1);
    }
  }
  return { inputs, bad };
}

export async function dispatchPage(main, _params, ctx) {
  ctx.title("Dispatch");
  const [projects, workflows] = await Promise.all([
    api("/api/v1/projects", { signal: ctx.signal }),
    api("/api/v1/workflows", { signal: ctx.signal }),
  ]);
  const targets = [];
  for (const p of projects.projects || []) {
    if (p.repo_url) targets.push({ key: "project:" + p.name, label: p.name + " \u2014 " + p.pipeline_path + " in " + p.repo_url, project: p });
  }
  for (const w of workflows.workflows || []) {
    if (w.enabled) targets.push({ key: "workflow:" + w.id, label: w.project + " / " + w.name + " (workflow, version " + w.version + ")", workflow: w });
  }
  main.append(h("h1", { tabindex: "-1" }, "Dispatch"));
  if (!targets.length) {
    main.append(h("p", {}, "Nothing can be dispatched yet: connect a project to a repository (",
      h("code", {}, "gantry project create"), ") or register a workflow (", h("code", {}, "gantry workflow create"), ")."));
    return;
  }
  const want = new URLSearchParams(location.search);
  const pick = want.get("workflow") ? "workflow:" + want.get("workflow") : want.get("project") ? "project:" + want.get("project") : "";
  const select = h("select", { id: "dispatch-target", onchange: () => show() },
    targets.map((t) => h("option", { value: t.key, selected: t.key === pick }, t.label)));
  const ref = h("input", { type: "text", id: "dispatch-ref", spellcheck: "false", class: "mono", "aria-describedby": "dispatch-ref-help" });
  const refHelp = h("p", { id: "dispatch-ref-help", class: "muted small" });
  const fields = h("fieldset", { id: "dispatch-inputs" });
  const errors = h("div", { class: "error", role: "alert", id: "dispatch-errors", hidden: true });
  const button = h("button", { type: "submit", id: "dispatch-run" }, "Start run");

  const target = () => targets.find((t) => t.key === select.value);
  function show() {
    const t = target();
    errors.hidden = true;
    if (t.workflow) {
      ref.placeholder = "the default branch, when the project has a repository";
      refHelp.textContent = "A workflow of a project with a repository runs at this ref; leave it empty elsewhere.";
      const ins = t.workflow.inputs || [];
      fields.replaceChildren(h("legend", {}, "Inputs"),
        ...(ins.length ? ins.map(inputField) : [h("p", { class: "muted" }, "This workflow declares no inputs.")]));
    } else {
      ref.placeholder = t.project.default_branch;
      refHelp.textContent = "A branch, a tag or a commit; the file at it must list dispatch in its on:.";
      fields.replaceChildren(h("legend", {}, "Inputs"), freeInputs());
    }
  }
  show();

  const form = h("form", {
    class: "submit-run", onsubmit: async (ev) => {
      ev.preventDefault();
      const t = target();
      const { inputs, bad } = collect(fields);
      errors.hidden = true;
      if (bad.length) {
        errors.replaceChildren(h("p", {}, "Each input line is NAME=VALUE; these are not: " + bad.join(", ")));
        errors.hidden = false;
        return;
      }
      const body = { inputs };
      if (ref.value.trim()) body.ref = ref.value.trim();
      const path = t.workflow
        ? "/api/v1/workflows/" + encodeURIComponent(t.workflow.id) + "/dispatches"
        : "/api/v1/projects/" + encodeURIComponent(t.project.name) + "/dispatches";
      button.disabled = true;
      try {
        const run = await api(path, {
          method: "POST", body: JSON.stringify(body), signal: ctx.signal,
          headers: { "Content-Type": "application/json" },
        });
        navigate("/runs/" + encodeURIComponent(run.id));
      } catch (e) {
        if (e.name === "AbortError") return;
        errors.replaceChildren(h("p", {}, "The run was not started: " + e.message));
        // One mistake is the message itself: said once, not again in a list.
        const one = e.details && e.details.length === 1 && (e.details[0].path ? e.details[0].path + ": " : "") + e.details[0].message === e.message;
        if (e.details && e.details.length && !one) {
          errors.append(h("ul", {}, e.details.map((d) => h("li", {}, d.path ? d.path + ": " : "", d.message))));
        }
        errors.hidden = false;
        button.disabled = false;
      }
    },
  },
  h("div", { class: "field" }, h("label", { for: "dispatch-target" }, "What to run"), select),
  h("div", { class: "field" }, h("label", { for: "dispatch-ref" }, "Ref"), ref, refHelp),
  fields, errors, button);
  main.append(form);
}
