// One project: its settings (never its webhook secret), the URL to give its forge, its
// badge, its secrets' names, its environments and its outbound webhooks; its tests are a
// page of their own (tests.js). Secrets and webhooks are an admin's to read; a smaller
// token gets a note in their place.
import { h } from "./dom.js";
import { api, raw } from "./api.js";
import { when } from "./format.js";
import { runsLink } from "./projects.js";

/** copyField is a read-only text box holding value, with a button that copies it. */
function copyField(id, label, value) {
  const input = h("input", { type: "text", id, readonly: true, value, class: "mono", spellcheck: "false" });
  input.addEventListener("focus", () => input.select());
  const said = h("span", { class: "muted small", role: "status" });
  const copy = h("button", {
    type: "button", class: "secondary", "aria-label": "Copy " + label, onclick: async () => {
      try {
        await navigator.clipboard.writeText(value);
        said.textContent = "Copied.";
      } catch {
        // The clipboard may be refused (no permission, no secure context): the text is
        // selected, ready for the keyboard's copy.
        input.focus();
        said.textContent = "Press Ctrl+C (\u2318C) to copy the selected text.";
      }
    },
  }, "Copy");
  return h("div", { class: "field" }, h("label", { for: id }, label),
    h("div", { class: "copy-field" }, input, copy), said);
}

/** adminOnly says what a 403 on an admin route means, or rethrows any other error. */
function adminOnly(e, what) {
  if (e.status !== 403) throw e;
  return h("p", { class: "note", role: "note" },
    what + " needs an admin token; this one may not read it. Sign in with a token made with ",
    h("code", {}, "--role admin"), " to see it.");
}

/** section is a titled part of the page whose body loads on its own: one failing part does not blank the others. */
function section(id, title, intro) {
  const body = h("div", { id: id + "-body" }, h("p", { class: "muted" }, "Loading\u2026"));
  const el = h("section", { id, "aria-labelledby": id + "-h" }, h("h2", { id: id + "-h" }, title), intro, body);
  return { el, body };
}

async function fill(part, load, signal) {
  try {
    part.body.replaceChildren(...[].concat(await load()).filter(Boolean));
  } catch (e) {
    if (e.name === "AbortError" || signal.aborted || e.status === 401) return;
    part.body.replaceChildren(h("p", { class: "error", role: "alert" }, "Could not load this part: " + e.message));
  }
}

function table(caption, heads, rows) {
  return h("div", { class: "table-wrap" }, h("table", {},
    h("caption", { class: "visually-hidden" }, caption),
    h("thead", {}, h("tr", {}, heads.map((c) => h("th", { scope: "col" }, c)))),
    h("tbody", {}, rows)));
}

function tags(list, none) {
  return list && list.length ? list.map((x) => h("span", { class: "tag mono" }, x)) : h("span", { class: "muted" }, none);
}

export async function projectPage(main, [name], ctx) {
  ctx.title(name);
  const base = "/api/v1/projects/" + encodeURIComponent(name);
  const p = await api(base, { signal: ctx.signal });
  const signal = ctx.signal;

  const setting = (label, value) => [h("dt", {}, label), h("dd", {}, value === "" || value == null ? h("span", { class: "muted" }, "none") : value)];
  const settings = h("dl", { class: "settings", id: "project-settings" },
    setting("Repository", p.repo_url ? h("span", { class: "mono break" }, p.repo_url) : ""),
    setting("Provider", p.provider),
    setting("Pipeline file", p.pipeline_path ? h("span", { class: "mono" }, p.pipeline_path) : ""),
    setting("Default branch", p.default_branch ? h("span", { class: "mono" }, p.default_branch) : ""),
    setting("Webhook secret", p.webhook_secret_set
      ? "set (shown once, when it was made; rotate it to see a new one)"
      : h("span", { class: "error" }, "not set: every hook is refused")),
    p.api_base_url ? setting("Forge API", h("span", { class: "mono break" }, p.api_base_url)) : null,
    p.api_token_file ? setting("Forge API token file", h("span", { class: "mono break" }, p.api_token_file)) : null,
    setting("Created", when(p.created_at)),
    setting("Updated", when(p.updated_at)));

  const hook = h("section", { id: "hook", "aria-labelledby": "hook-h" }, h("h2", { id: "hook-h" }, "Forge webhook"),
    p.hook_path
      ? [h("p", {}, "Give your forge this URL for push, tag and pull request events, with the project's webhook secret ",
        "(", h("code", {}, "application/json"), "):"), copyField("hook-url", "Payload URL", location.origin + p.hook_path)]
      : h("p", { class: "muted" }, "This project has no repository and provider, so no forge sends it hooks."));

  const badgePath = base + "/badge.svg";
  const badgeImg = h("img", { id: "badge-img", alt: "Build status of " + name + ": loading", height: "20" });
  const markdown = "[![" + name + "](" + location.origin + badgePath + ")](" + location.origin + runsLink(name) + ")";
  const badge = h("section", { id: "badge", "aria-labelledby": "badge-h" }, h("h2", { id: "badge-h" }, "Badge"),
    h("p", {}, badgeImg),
    copyField("badge-markdown", "Markdown", markdown),
    h("p", { class: "muted small" }, "The latest finished run on the default branch (", h("code", {}, "?branch="),
      " picks another). With authentication on, a README shows it only if the server runs with ",
      h("code", {}, "--public-badges"), "."));

  const secrets = section("secrets", "Secrets",
    h("p", { class: "muted small" }, "Names only: a value goes in with ", h("code", {}, "gantry secret set"), " and never comes out."));
  const envs = section("environments", "Environments", null);
  const hooks = section("webhooks", "Outbound webhooks", null);

  main.append(
    h("p", { class: "crumbs" }, h("a", { href: "/projects" }, "Projects"), " / ", name),
    h("h1", { tabindex: "-1" }, name),
    h("div", { class: "actions" }, h("a", { href: runsLink(name), class: "button secondary", id: "project-runs" }, "Runs"),
      h("a", { href: "/projects/" + encodeURIComponent(name) + "/tests", class: "button secondary", id: "project-tests" }, "Tests"),
      p.repo_url ? h("a", { href: "/dispatch?project=" + encodeURIComponent(name), class: "button secondary" }, "Dispatch") : null),
    h("section", { "aria-labelledby": "settings-h" }, h("h2", { id: "settings-h" }, "Settings"), settings),
    hook, badge, secrets.el, envs.el, hooks.el);

  // The badge needs the token when auth is on, and an <img> cannot send one: fetch it and
  // show it as a data: URL, which the page's CSP allows.
  raw(badgePath, { signal }).then((res) => res.text()).then((svg) => {
    badgeImg.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(svg);
    badgeImg.alt = "Build status of " + name;
  }).catch((e) => {
    if (e.name === "AbortError" || signal.aborted) return;
    badgeImg.replaceWith(h("span", { class: "muted" }, "The badge could not be loaded: " + e.message));
  });

  fill(secrets, async () => {
    let list, forks;
    try {
      [{ secrets: list }, { secrets_for_forks: forks }] = await Promise.all([
        api(base + "/secrets", { signal }), api(base + "/secret-settings", { signal })]);
    } catch (e) {
      return adminOnly(e, "Reading secrets' names");
    }
    return [
      list.length ? table("Secrets of " + name, ["Name", "Environment", "Updated"], list.map((s) =>
        h("tr", { dataset: { secret: s.name, environment: s.environment } },
          h("td", { class: "mono" }, s.name),
          h("td", {}, s.environment ? h("span", { class: "mono" }, s.environment) : h("span", { class: "muted" }, "all environments")),
          h("td", {}, when(s.updated_at)))))
        : h("p", { class: "muted" }, "No secrets."),
      h("p", { id: "secrets-for-forks" }, "Pull requests from forks ", forks ? h("strong", {}, "get") : "do not get", " secrets."),
    ];
  }, signal);

  fill(envs, async () => {
    const { environments } = await api(base + "/environments", { signal });
    if (!environments.length) {
      return h("p", { class: "muted" }, "No environments: a job's ", h("code", {}, "environment:"), " then runs with no rules.");
    }
    return table("Environments of " + name, ["Name", "Branches", "Tags", "Approvals", "Approvers", "Approval timeout"],
      environments.map((e) => h("tr", { dataset: { environment: e.name } },
        h("td", { class: "mono" }, e.name),
        h("td", {}, tags(e.branches, "any")),
        h("td", {}, tags(e.tags, "any")),
        h("td", {}, e.required_approvals ? String(e.required_approvals) : h("span", { class: "muted" }, "none")),
        h("td", {}, tags(e.approvers, "\u2014")),
        h("td", {}, e.required_approvals ? e.approval_timeout : h("span", { class: "muted" }, "\u2014")))));
  }, signal);

  fill(hooks, async () => {
    let webhooks;
    try {
      ({ webhooks } = await api(base + "/webhooks", { signal }));
    } catch (e) {
      return adminOnly(e, "Reading outbound webhooks");
    }
    if (!webhooks.length) return h("p", { class: "muted" }, "No outbound webhooks.");
    return table("Outbound webhooks of " + name, ["URL", "Events", "Created"], webhooks.map((w) =>
      h("tr", { dataset: { webhook: w.id } },
        h("td", { class: "mono break" }, w.url),
        h("td", {}, tags(w.events, "")),
        h("td", {}, when(w.created_at)))));
  }, signal);
}
