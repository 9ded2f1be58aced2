// Quarantining a test and releasing it (docs/tests.md#quarantine), from a project's Tests
// page, a run's Tests tab and a job's tests. Quarantine opens a dialog that asks who is to
// fix the test, for how long (at most 90 days) and why, and PUTs the quarantine; Release
// asks first, then DELETEs it. Both take the maintainer role on the project; what the API
// refuses (403 for a role too low, 400 for what it will not take) is said where the action
// was, in its own words, and the dialog stays open with what was typed.
import { h } from "./dom.js";
import { api, sendJSON } from "./api.js";
import { testID } from "./format.js";
import { confirmDialog, modal } from "./actions.js";

// DAYS are the lengths offered; the API takes at most 90 days (store.MaxQuarantine).
const DAYS = [1, 3, 7, 14, 30, 60, 90];
const DEFAULT_DAYS = 14;
// MAX_TEXT bounds an owner and a reason, as the API does (in bytes there; a text of many
// non-ASCII letters may still pass here and be refused there, which the dialog shows).
const MAX_TEXT = 1024;
const DAY_MS = 24 * 60 * 60 * 1000;

function quarantinePath(project) {
  return "/api/v1/projects/" + encodeURIComponent(project) + "/tests/quarantine";
}

/** endsOn says when a quarantine put now for days days ends, in the reader's time. */
function endsOn(days) {
  return new Date(Date.now() + days * DAY_MS).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

/**
 * quarantineDialog asks for test t's quarantine in project and puts it. It resolves with
 * the quarantine the API made, or null when the dialog was closed without one.
 */
function quarantineDialog(project, t, signal) {
  return new Promise((resolve) => {
    const name = testID(t);
    const owner = h("input", { type: "text", id: "quarantine-owner", name: "owner", required: true, maxlength: String(MAX_TEXT),
      autocomplete: "off", spellcheck: "false", "aria-describedby": "quarantine-owner-help" });
    const days = h("select", { id: "quarantine-for", name: "for", "aria-describedby": "quarantine-until" },
      DAYS.map((d) => h("option", { value: d + "d", selected: d === DEFAULT_DAYS }, d === 1 ? "1 day" : d + " days")));
    const until = h("span", { class: "muted small", id: "quarantine-until" });
    const showUntil = () => { until.textContent = "Ends about " + endsOn(parseInt(days.value, 10)) + ", by itself."; };
    days.addEventListener("change", showUntil);
    showUntil();
    const reason = h("textarea", { id: "quarantine-reason", name: "reason", rows: 3, maxlength: String(MAX_TEXT) });
    const error = h("p", { class: "error", id: "quarantine-error", role: "alert", hidden: true });
    const submit = h("button", { type: "submit", id: "quarantine-submit" }, "Quarantine");
    const cancel = h("button", { type: "button", class: "secondary", id: "quarantine-cancel" }, "Cancel");
    const form = h("form", { class: "quarantine-form" },
      h("h2", { id: "quarantine-h" }, "Quarantine a test"),
      h("p", { class: "mono break", id: "quarantine-test" }, name),
      h("p", { class: "muted small", id: "quarantine-about" },
        "While the quarantine lasts, a job whose only failures are quarantined tests succeeds. The test still runs, and its failures are kept and shown."),
      h("div", { class: "field" }, h("label", { for: "quarantine-owner" }, "Owner"), owner,
        h("span", { class: "muted small", id: "quarantine-owner-help" }, "Who is to fix the test.")),
      h("div", { class: "field" }, h("label", { for: "quarantine-for" }, "For"), days, until),
      h("div", { class: "field" }, h("label", { for: "quarantine-reason" }, "Reason ", h("span", { class: "muted" }, "(optional)")), reason),
      error,
      h("div", { class: "actions" }, cancel, submit));
    const dialog = h("dialog", { class: "form-dialog", id: "quarantine-dialog", "aria-labelledby": "quarantine-h",
      "aria-describedby": "quarantine-test quarantine-about" }, form);
    const close = modal(dialog, (q) => resolve(q || null), signal);
    cancel.addEventListener("click", () => close(null));
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      submit.disabled = true;
      submit.textContent = "Quarantining\u2026";
      error.hidden = true;
      let q;
      try {
        q = await sendJSON("PUT", quarantinePath(project),
          { suite: t.suite || "", name: t.name, owner: owner.value, reason: reason.value, for: days.value }, signal);
      } catch (e) {
        if (e.name === "AbortError") return;
        // Everything typed stays: the reader fixes what the API said and tries again.
        error.textContent = "Could not quarantine it: " + e.message;
        error.hidden = false;
        submit.disabled = false;
        submit.textContent = "Quarantine";
        if (!dialog.contains(document.activeElement)) submit.focus(); // it was on the button, disabled meanwhile
        return;
      }
      close(q);
    });
    owner.focus();
  });
}

/**
 * quarantineButton is a Quarantine button for test t (its suite and name) of project,
 * which opens the quarantine dialog; done(q) hears the quarantine made.
 */
export function quarantineButton(project, t, { signal, done }) {
  const btn = h("button", { type: "button", class: "small-button secondary quarantine-button", "aria-haspopup": "dialog",
    "aria-label": "Quarantine " + testID(t) }, "Quarantine");
  btn.addEventListener("click", async () => {
    const q = await quarantineDialog(project, t, signal);
    if (q) done(q);
  });
  return btn;
}

/**
 * releaseButton is a Release button for the quarantined test t of project. It asks
 * first, then ends the quarantine; say(text, failed) hears how it goes, done() that the
 * test is out of quarantine (released now, or already by someone else or its expiry).
 */
export function releaseButton(project, t, { signal, done, say }) {
  const name = testID(t);
  const btn = h("button", { type: "button", class: "small-button danger release-button", "aria-label": "Release " + name }, "Release");
  btn.addEventListener("click", async () => {
    if (!await confirmDialog({
      title: `Release ${name}?`,
      text: "Its quarantine ends now: from the next job on, a failure of this test fails its job again.",
      confirm: "Release", keep: "Keep quarantined",
    })) return;
    btn.disabled = true;
    say(`Releasing ${name}\u2026`);
    try {
      await api(quarantinePath(project) + "?" + new URLSearchParams({ suite: t.suite || "", name: t.name }), { method: "DELETE", signal });
      say(`${name} is released from quarantine.`);
    } catch (e) {
      if (e.name === "AbortError") return;
      if (e.status !== 404) {
        say(`Could not release ${name}: ${e.message}`, true);
        btn.disabled = false;
        btn.focus();
        return;
      }
      say(`${name} was no longer quarantined.`);
    }
    done();
  });
  return btn;
}

/** quarantinedUntil says what a quarantine made: the test and when it ends. */
export function quarantinedUntil(q) {
  return `${testID(q)} is quarantined until ${new Date(q.expires_at).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" })}, owned by ${q.owner}.`;
}
