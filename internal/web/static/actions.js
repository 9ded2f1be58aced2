// Actions on runs and jobs that ask before they act or that the run and job pages share:
// modal dialogs (a form's, as quarantine.js's) and the confirmation made with one (cancel,
// reject, a test's release), approve and reject of a job waiting for approval, a job's
// attempts (who started each, how it ended), and the approvals inbox: its page and the
// count beside its link in the header.
import { clear, fill, h } from "./dom.js";
import { anonymousWorks, api, getToken, postJSON } from "./api.js";
import { shortID, statusBadge, when } from "./format.js";

/**
 * modal shows dialog as a modal dialog and returns close(value), which takes it away and
 * calls onClose(value) once. Escape, the dialog's own closing and signal's abort (the page
 * was left) close it with undefined. The focus goes back where it was when it opened.
 */
export function modal(dialog, onClose, signal) {
  let closed = false;
  const close = (v) => {
    if (closed) return;
    closed = true;
    if (dialog.open) dialog.close();
    dialog.remove();
    onClose(v);
  };
  dialog.addEventListener("cancel", (ev) => { ev.preventDefault(); close(undefined); }); // Escape
  dialog.addEventListener("close", () => close(undefined));
  if (signal) signal.addEventListener("abort", () => close(undefined), { once: true });
  document.body.append(dialog);
  dialog.showModal();
  return close;
}

/**
 * confirmDialog asks a question in a modal dialog and resolves true when the user
 * confirms; Escape, the keep button and closing the dialog resolve false. The keep button
 * has the focus: Enter does not destroy anything.
 */
export function confirmDialog({ title, text, confirm, keep }) {
  return new Promise((resolve) => {
    const yes = h("button", { type: "button", class: "danger", id: "confirm-yes" }, confirm);
    const no = h("button", { type: "button", class: "secondary", id: "confirm-no" }, keep);
    const dialog = h("dialog", { class: "confirm", id: "confirm-dialog", "aria-labelledby": "confirm-h", "aria-describedby": "confirm-text" },
      h("h2", { id: "confirm-h" }, title), h("p", { id: "confirm-text" }, text), h("div", { class: "actions" }, no, yes));
    const close = modal(dialog, (v) => resolve(v === true));
    yes.addEventListener("click", () => close(true));
    no.addEventListener("click", () => close(false));
    no.focus();
  });
}

/** confirmCancel asks before a run or a job is cancelled. */
export function confirmCancel(what) {
  return confirmDialog({
    title: `Cancel this ${what}?`,
    text: what === "run"
      ? "Jobs not started yet are cancelled at once; running ones are stopped by their worker. You can re-run the run afterwards."
      : "The job is stopped, and the jobs that need it are cancelled. You can re-run it afterwards.",
    confirm: `Cancel ${what}`, keep: "Keep running",
  });
}

/**
 * decideButtons are Approve and Reject for a job waiting for approval, for a list of
 * jobs (the run page, the inbox). A rejection asks first. done(job) gets the job as the
 * decision left it; say(text) reports progress and errors.
 */
export function decideButtons(job, signal, done, say) {
  const name = job.display_name || job.key;
  const approve = h("button", { type: "button", class: "small-button", dataset: { decide: "approve" }, "aria-label": "Approve " + name }, "Approve");
  const reject = h("button", { type: "button", class: "small-button danger", dataset: { decide: "reject" }, "aria-label": "Reject " + name }, "Reject");
  const decide = async (verb) => {
    if (verb === "reject" && !await confirmDialog({
      title: `Reject ${name}?`, text: "The job fails without running, and the jobs that need it are skipped.",
      confirm: "Reject", keep: "Keep waiting",
    })) return;
    approve.disabled = reject.disabled = true;
    say(verb === "approve" ? `Approving ${name}\u2026` : `Rejecting ${name}\u2026`);
    try {
      const j = await postJSON(`/api/v1/jobs/${encodeURIComponent(job.id)}/${verb}`, {}, signal);
      say(verb === "approve" ? `Approval of ${name} recorded.` : `${name} rejected.`);
      refreshInboxCount();
      done(j);
    } catch (e) {
      if (e.name === "AbortError") return;
      say(`Could not ${verb} ${name}: ${e.message}`);
      approve.disabled = reject.disabled = false;
    }
  };
  approve.addEventListener("click", () => decide("approve"));
  reject.addEventListener("click", () => decide("reject"));
  return h("span", { class: "decide" }, approve, reject);
}

/** attemptWho says what started an attempt. */
function attemptWho(a) {
  if (a.cause === "rerun") return "re-run by " + (a.started_by || "someone");
  if (a.cause === "retry") return "retried automatically";
  return "started by the run";
}

/**
 * renderAttempts lists a job's attempts in nav: each with its status, who or what
 * started it and when; one with a log (it was claimed) is a button that shows it. The
 * attempt shown is pressed. Nothing is listed for a job with one attempt.
 */
export function renderAttempts(nav, job, viewed, show) {
  clear(nav);
  const list = job.attempts || [];
  if (list.length < 2) return;
  const total = list.length;
  nav.append(h("h2", { id: "attempts-h" }, "Attempts"), h("ol", { class: "attempt-list plain", id: "attempts", "aria-labelledby": "attempts-h" },
    list.map((a) => {
      const label = `Attempt ${a.attempt} of ${total}`;
      const ran = a.attempt <= (job.attempt || 0);
      const at = a.finished_at || a.started_at || a.queued_at;
      return h("li", { dataset: { attempt: a.attempt, status: a.status || "unknown" } },
        ran ? h("button", {
          type: "button", class: a.attempt === viewed ? "" : "secondary", "aria-pressed": String(a.attempt === viewed),
          onclick: () => show(a.attempt),
        }, label) : h("span", { class: "attempt-label" }, label),
        " ", a.status ? statusBadge(a.status) : h("span", { class: "muted" }, "not kept"),
        h("span", { class: "muted attempt-who" }, " \u00b7 ", attemptWho(a), at ? [" \u00b7 ", when(at)] : null));
    })));
}

/**
 * stepsOf is the steps to show for attempt n: an earlier attempt's as it left them, or
 * the job's own (its current attempt).
 */
export function stepsOf(job, n) {
  const a = (job.attempts || []).find((x) => x.attempt === n && !x.current);
  return a && a.steps ? a.steps : job.steps || [];
}

// The inbox count beside the Approvals link: refreshed on every page and every half
// minute. Without a token it is asked for only once a page's own request showed that
// auth is off, so that a signed-out visitor's browser logs no refused request.
let counting = false;
export async function refreshInboxCount(tries = 5) {
  const el = document.getElementById("approvals-count");
  if (!el || counting || location.pathname === "/signin") return;
  if (!getToken() && !anonymousWorks()) {
    if (tries > 0) setTimeout(() => refreshInboxCount(tries - 1), 1000);
    return;
  }
  counting = true;
  try {
    const { approvals } = await api("/api/v1/approvals", { noRedirect: true });
    el.textContent = approvals.length ? String(approvals.length) : "";
    el.hidden = approvals.length === 0;
    el.setAttribute("aria-label", `${approvals.length} waiting for your approval`);
  } catch {
    el.hidden = true;
  } finally {
    counting = false;
  }
}

/** approvalsPage lists the jobs waiting for the signed-in user's approval. */
export async function approvalsPage(main, _params, ctx) {
  ctx.title("Approvals");
  const message = h("p", { class: "action-message", role: "status", id: "inbox-message" });
  const list = h("div", { id: "inbox" });
  main.append(h("h1", { tabindex: "-1" }, "Waiting for your approval"),
    h("p", { class: "muted" }, getToken()
      ? "Jobs whose environment names you, or a role you hold, among its approvers, in the projects you can see."
      : "Jobs waiting for approval (authentication is off: anyone may decide)."),
    message, list);
  const load = async () => {
    let items;
    try {
      ({ approvals: items } = await api("/api/v1/approvals", { signal: ctx.signal }));
    } catch (e) {
      if (e.name === "AbortError") return;
      fill(list, h("p", { class: "error" }, "Could not list approvals: " + e.message));
      return;
    }
    refreshInboxCount();
    if (!items.length) {
      fill(list, h("p", { class: "muted", id: "inbox-empty" }, "Nothing is waiting for your approval."));
      return;
    }
    fill(list, h("ul", { class: "plain inbox-list" }, items.map((it) => {
      const name = it.job.display_name || it.job.key;
      return h("li", { class: "inbox-item", dataset: { job: it.job.id } },
        h("div", {}, h("a", { href: "/jobs/" + it.job.id, class: "inbox-job" }, name), " ",
          h("span", { class: "muted" }, "to ", h("strong", {}, it.environment), ` \u00b7 ${it.approved} of ${it.required} approvals`)),
        h("div", { class: "muted small" }, h("a", { href: "/runs/" + it.run_id }, it.run_name || "run", " ", it.run_number ? "#" + it.run_number : h("span", { class: "mono" }, shortID(it.run_id))), " in ", it.project,
          it.ref ? " \u00b7 " + it.ref : "", it.author ? " \u00b7 by " + it.author : "",
          it.job.queued_at ? [" \u00b7 waiting since ", when(it.job.queued_at)] : null),
        it.self_review ? h("p", { class: "muted small" }, "You started this run and the environment prevents self-review: you may reject it only.") : null,
        decideButtons(it.job, ctx.signal, () => load(), (t) => { message.textContent = t; }));
    })));
  };
  ctx.every(10000, load);
}
