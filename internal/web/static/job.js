// A job: its status, steps, artifacts and log. The log (logview.js) follows a running
// attempt live over the WebSocket, and draws only what is in view of a long one; its
// ::error::, ::warning:: and ::notice:: lines are listed above it as the attempt's
// annotations, each linking to its line, and a failed attempt opens at its error. Below
// the log, the attempt's tests, as a run's Tests tab shows them (tests.js), and its
// summary ($GITHUB_STEP_SUMMARY), rendered (summary.js).
import { clear, fill, h } from "./dom.js";
import { api, download, getToken, live, post, postJSON } from "./api.js";
import { LEVELS, logView } from "./logview.js";
import { TERMINAL, bytes, liveDuration, shortID, statusBadge, when } from "./format.js";
import { announce } from "./app.js";
import { summaryContent } from "./summary.js";
import { confirmCancel, renderAttempts as listAttempts, stepsOf } from "./actions.js";
import { count, jobTests } from "./tests.js";

const REFRESH_MS = 2000;

export async function jobPage(main, [id], ctx) {
  ctx.title("Job " + shortID(id));
  const crumbs = h("p", { class: "crumbs" }, h("a", { href: "/" }, "Runs"), " / \u2026");
  const h1 = h("h1", { tabindex: "-1" }, "Job ", h("span", { class: "mono" }, shortID(id)));
  main.append(crumbs, h1);
  const jobPath = "/api/v1/jobs/" + encodeURIComponent(id);
  let job = await api(jobPath, { signal: ctx.signal });
  // A job's name: template, when the definition gives one, else its key. A name that
  // reads what the job's needs left changes when the job is claimed.
  let shownName = "";
  function showName(j) {
    const name = j.display_name || j.key;
    if (name === shownName) return;
    shownName = name;
    ctx.title(name);
    fill(crumbs, h("a", { href: "/" }, "Runs"), " / ",
      h("a", { href: "/runs/" + j.run_id }, j.run_number ? `${j.project} #${j.run_number}` : "run " + shortID(j.run_id)), " / ", name);
    fill(h1, name);
  }
  showName(job);

  const badge = h("span", { role: "status", "aria-label": "Job status", id: "job-status" });
  const meta = h("dl", { class: "meta" });
  const message = h("p", { class: "action-message", role: "status" });
  const cancelBtn = h("button", { type: "button", class: "danger", id: "cancel-job" }, "Cancel job");
  const retryBtn = h("button", { type: "button", id: "retry-job" }, "Re-run job");
  const attemptsNav = h("div", { class: "attempts", role: "group", "aria-label": "Attempts" });
  // Approval: shown while the job's environment holds it, and after, with who decided.
  const approvalBox = h("section", { class: "approval", id: "approval", "aria-labelledby": "approval-h", hidden: true });
  const approveBtn = h("button", { type: "button", id: "approve-job" }, "Approve");
  const rejectBtn = h("button", { type: "button", class: "danger", id: "reject-job" }, "Reject");
  const approvalComment = h("input", { type: "text", id: "approval-comment", placeholder: "Comment (optional)", autocomplete: "off" });
  const stepsList = h("ol", { class: "steps" });
  const stepsNote = h("p", { class: "muted" });
  const artifactsList = h("div");
  const annotationsBox = h("section", { class: "annotations", id: "annotations", "aria-labelledby": "annotations-h", hidden: true });
  const summaryBox = h("section", { class: "summaries", id: "job-summary", "aria-labelledby": "summary-h", hidden: true });
  // The attempt's tests, below the log (a failed job opens at its error in the log), and
  // how many failed among the facts at the top, linking down to them.
  const testsBox = h("section", { class: "job-tests", id: "job-tests", "aria-labelledby": "job-tests-h", hidden: true });
  const testsLink = h("a", { href: "#job-tests", id: "job-tests-count" });
  const testsItem = h("div", { hidden: true }, h("dt", {}, "Tests"), h("dd", {}, testsLink));

  // The log.
  const log = logView({ rawPath: (n) => `${jobPath}/logs?attempt=${n}&download=true` });
  const logState = log.state;
  ctx.onCleanup(() => log.cleanup());

  main.append(
    h("div", { class: "page-head" }, badge),
    meta,
    h("div", { class: "actions" }, cancelBtn, retryBtn), message,
    approvalBox,
    attemptsNav,
    annotationsBox,
    h("div", { class: "job-body" },
      h("div", { class: "job-side" },
        h("section", { "aria-labelledby": "steps-h" }, h("h2", { id: "steps-h" }, "Steps"), stepsNote, stepsList),
        h("section", { "aria-labelledby": "artifacts-h" }, h("h2", { id: "artifacts-h" }, "Artifacts"), artifactsList)),
      h("section", { "aria-labelledby": "log-h", class: "log-section" },
        h("h2", { id: "log-h" }, "Log"),
        log.tools, logState, log.box)),
    testsBox,
    summaryBox);

  let viewed = job.attempt || 1; // the attempt whose log and artifacts are shown
  let artifacts = [];

  const act = (btn, path, verb, ask) => btn.addEventListener("click", async () => {
    if (ask && !await ask()) return;
    btn.disabled = true;
    message.textContent = verb + "\u2026";
    try {
      const j = await post(path, ctx.signal);
      message.textContent = verb + " requested.";
      setJob(j);
    } catch (e) {
      if (e.name === "AbortError") return;
      message.textContent = "Could not " + verb.toLowerCase() + ": " + e.message;
      btn.disabled = false;
    }
  });
  act(cancelBtn, jobPath + "/cancel", "Cancel", () => confirmCancel("job"));
  act(retryBtn, jobPath + "/rerun", "Re-run");

  const decide = (btn, verb) => btn.addEventListener("click", async () => {
    approveBtn.disabled = rejectBtn.disabled = true;
    message.textContent = verb + "\u2026";
    try {
      const j = await postJSON(jobPath + "/" + verb.toLowerCase(), { comment: approvalComment.value }, ctx.signal);
      message.textContent = verb === "Approve" ? "Approval recorded." : "Rejected.";
      approvalComment.value = "";
      setJob(j);
    } catch (e) {
      if (e.name === "AbortError") return;
      message.textContent = "Could not " + verb.toLowerCase() + ": " + e.message;
      approveBtn.disabled = rejectBtn.disabled = false;
    }
  });
  decide(approveBtn, "Approve");
  decide(rejectBtn, "Reject");

  let approvalShown = "";
  function renderApproval(j) {
    const a = j.approval;
    approvalBox.hidden = !a;
    if (!a) return;
    // Redraw only on a change: the poll must not take the comment field from under a typist.
    const key = j.status + JSON.stringify(a);
    if (key === approvalShown) return;
    approvalShown = key;
    const waiting = j.status === "waiting_approval";
    const approved = a.decisions.filter((d) => d.decision === "approved").length;
    fill(approvalBox,
      h("h2", { id: "approval-h" }, waiting ? "Waiting for approval" : "Approval"),
      h("p", {}, "Environment ", h("strong", { id: "approval-environment" }, a.environment),
        j.environment && j.environment.url ? [" (", h("a", { href: j.environment.url, rel: "noopener" }, j.environment.url), ")"] : null,
        ` needs ${a.required} approval${a.required === 1 ? "" : "s"}`,
        a.approvers.length ? " from " + a.approvers.join(", ") : "", `: ${approved} so far.`),
      a.decisions.length ? h("ul", { class: "plain", id: "approval-decisions" }, a.decisions.map((d) =>
        h("li", { dataset: { decision: d.decision } }, h("strong", {}, d.approver), " ", d.decision, " ", when(d.at),
          d.comment ? h("span", { class: "muted" }, " \u2014 " + d.comment) : null))) : null,
      waiting ? h("div", { class: "actions" },
        h("div", { class: "field" }, h("label", { for: "approval-comment" }, "Comment"), approvalComment),
        approveBtn, rejectBtn) : null);
    approveBtn.disabled = rejectBtn.disabled = !waiting;
  }

  function setJob(j) {
    const before = job;
    job = j;
    if (before.status !== j.status) announce("Job " + j.status);
    showName(j);
    fill(badge, statusBadge(j.status));
    fill(meta, 
      // A retry from the user goes past max_attempts, which bounds automatic retries.
      item("Attempt", !j.attempt ? "not started" : j.attempt <= j.max_attempts ? `${j.attempt} of ${j.max_attempts}` : String(j.attempt)),
      j.waiting ? item("Waiting", h("span", { id: "job-waiting", dataset: { code: j.waiting.code } }, j.waiting.message)) : null,
      j.failure_kind ? item("Failure", h("span", { id: "failure-kind" }, j.failure_kind)) : null,
      j.reason ? item("Not run", h("span", { id: "job-reason" }, j.reason)) : null,
      j.exit_code !== undefined ? item("Exit code", String(j.exit_code)) : null,
      item("Priority", j.priority),
      j.worker_id ? item("Worker", h("span", { class: "mono" }, j.worker_id)) : null,
      j.queued_at ? item("Queued", when(j.queued_at)) : null,
      j.started_at ? item("Started", when(j.started_at)) : null,
      item("Duration", liveDuration(j.started_at, j.finished_at)),
      j.needs ? item("Needs", j.needs.join(", ")) : null,
      // The url, when the environment has one: a url that reads what the steps left is
      // known once the job ended.
      j.environment ? item("Environment", h("span", { id: "job-environment" }, j.environment.name,
        j.environment.url ? [" (", h("a", { href: j.environment.url, rel: "noopener", id: "job-environment-url" }, j.environment.url), ")"] : null)) : null,
      testsItem);
    renderApproval(j);
    cancelBtn.disabled = TERMINAL.has(j.status);
    retryBtn.disabled = !TERMINAL.has(j.status);
    renderAttempts();
    renderSteps();
    if (viewed === j.attempt) log.setSteps(j.steps);
    // The job started, or a retry started a new attempt while the latest was followed.
    if (!before.attempt && j.attempt) showAttempt(j.attempt);
    else if (j.attempt > before.attempt && viewed === before.attempt) showAttempt(j.attempt);
  }

  function renderAttempts() {
    listAttempts(attemptsNav, job, viewed, showAttempt);
  }

  function renderSteps() {
    const steps = stepsOf(job, viewed);
    stepsNote.textContent = steps === job.steps && viewed !== job.attempt && job.attempt ? `Steps of attempt ${job.attempt}, the latest.` : "";
    clear(stepsList);
    for (const st of steps) {
      const exit = st.exit_code !== undefined ? "exit " + st.exit_code : "";
      stepsList.append(h("li", { dataset: { status: st.status, exitCode: st.exit_code ?? "" } },
        statusBadge(st.status), " ", h("span", { class: "mono step-name" }, st.name),
        h("span", { class: "muted step-detail" }, exit, exit && st.started_at ? " \u00b7 " : "", liveDuration(st.started_at, st.finished_at))));
    }
    if (!steps.length) stepsList.append(h("li", { class: "muted" }, "No steps."));
  }

  function renderArtifacts() {
    clear(artifactsList);
    const mine = artifacts.filter((a) => a.attempt === viewed);
    if (mine.length === 0) {
      artifactsList.append(h("p", { class: "muted" }, "No artifacts for this attempt."));
      return;
    }
    artifactsList.append(h("ul", { class: "artifacts" }, mine.map((a) => {
      const path = "/api/v1/artifacts/" + encodeURIComponent(a.id);
      const file = a.name.split("/").pop();
      let link;
      if (a.state !== "stored") {
        link = h("span", {}, a.name, h("span", { class: "muted" }, " (" + a.state + ")"));
      } else if (getToken()) {
        // A link cannot carry the token: fetch with it and save the answer.
        link = h("button", {
          type: "button", class: "link-button", onclick: async (ev) => {
            const btn = ev.currentTarget;
            btn.disabled = true;
            try { await download(path, file); } catch (e) { message.textContent = "Download failed: " + e.message; }
            btn.disabled = false;
          },
        }, a.name);
      } else {
        link = h("a", { href: path, download: file }, a.name);
      }
      return h("li", {}, link, " ", h("span", { class: "muted" }, bytes(a.size)), " ",
        h("span", { class: "muted mono", title: "SHA-256 " + a.sha256 }, a.sha256.slice(0, 12)));
    })));
  }

  async function loadArtifacts() {
    try {
      artifacts = await api(jobPath + "/artifacts", { signal: ctx.signal });
    } catch (e) {
      if (e.name === "AbortError") return;
      artifacts = [];
      fill(artifactsList, h("p", { class: "muted" }, "Artifacts unavailable: " + e.message));
      return;
    }
    renderArtifacts();
  }

  async function loadAnnotations() {
    const n = viewed;
    let as;
    try {
      as = await api(`${jobPath}/annotations?attempt=${n}`, { signal: ctx.signal });
    } catch (e) {
      if (e.name === "AbortError") return;
      as = []; // a coordinator too old to keep them, or a passing error: shown on the next load
    }
    if (n !== viewed) return;
    annotationsBox.hidden = as.length === 0;
    fill(annotationsBox, h("h2", { id: "annotations-h" }, "Annotations"),
      h("ul", { class: "plain annotation-list" }, as.map((a) => annotationItem(a))));
    // A failed attempt opens at its first error, else at the end of its failed step.
    if (openAtError) {
      const err = as.find((a) => a.level === "error");
      log.focusError(err ? err.seq : 0);
    }
  }

  // The summary of the attempt shown: what its steps wrote to $GITHUB_STEP_SUMMARY.
  async function loadSummary() {
    const n = viewed;
    let s;
    try {
      s = await api(`${jobPath}/summary?attempt=${n}`, { signal: ctx.signal, headers: { Accept: "application/json" } });
    } catch (e) {
      if (e.name === "AbortError") return;
      s = { bytes: 0 }; // a coordinator too old to keep them, or a passing error: shown on the next load
    }
    if (n !== viewed) return;
    summaryBox.hidden = !s.bytes;
    fill(summaryBox, h("h2", { id: "summary-h" }, "Summary"),
      s.bytes ? h("article", { class: "summary" }, summaryContent(s.html || "")) : null);
  }

  // The tests of the attempt shown: a view of its own for each attempt, read again when
  // the attempt ends (the worker sends them before it does).
  let tests = null, testsAttempt = 0;
  function loadTests() {
    const n = viewed;
    if (!tests || testsAttempt !== n) {
      testsBox.hidden = testsItem.hidden = true;
      const view = jobTests(job, n, ctx, {
        onCounts: (v) => { if (tests === view) showTestCounts(v); },
        finished: () => n !== job.attempt || TERMINAL.has(job.status),
      });
      tests = view;
      testsAttempt = n;
      fill(testsBox, h("h2", { id: "job-tests-h" }, "Tests"), view.el);
    }
    // A coordinator without test results, or a passing error: tried again when the attempt ends.
    tests.load().catch(() => {});
  }

  function showTestCounts(v) {
    const failing = (v.counts.failed || 0) + (v.counts.errored || 0);
    testsBox.hidden = testsItem.hidden = v.total === 0;
    testsLink.textContent = failing ? `${count(failing)} failed of ${count(v.total)}` : `${count(v.total)}, none failed`;
    testsLink.classList.toggle("error", failing > 0);
  }

  // Log state of the attempt being shown. openAtError: it had failed when it was opened.
  // followingLatest: it is the latest attempt, running.
  let ended = false, unsubscribe = () => {}, openAtError = false, followingLatest = false;

  function showAttempt(n) {
    unsubscribe();
    viewed = n;
    ended = false;
    const running = n === job.attempt && !TERMINAL.has(job.status);
    openAtError = n === job.attempt && job.status === "failed";
    followingLatest = running;
    log.reset(n, { isLive: running, jobSteps: n === job.attempt ? job.steps : [], failed: openAtError, name: job.key });
    logState.textContent = `Attempt ${n}: loading\u2026`;
    renderAttempts();
    renderSteps();
    renderArtifacts();
    loadAnnotations();
    loadSummary();
    loadTests();
    if (!job.attempt) {
      logState.textContent = "The job has not started: no log yet.";
      unsubscribe = () => {};
      return;
    }
    unsubscribe = live.subscribe(() => ({ topic: "logs", job_id: id, attempt: n, after_seq: log.lineCount() }), onLog);
  }

  function onLog(msg) {
    if (msg.type === "subscribed") {
      // Only a running attempt is followed; a finished one is read to its end.
      if (!ended) logState.textContent = followingLatest ? `Attempt ${viewed}: following live.` : `Attempt ${viewed}: loading\u2026`;
    } else if (msg.type === "lines") {
      log.add(msg.lines);
      if (!followingLatest && !ended) logState.textContent = `Attempt ${viewed}: loading\u2026 ${log.lineCount().toLocaleString("en")} lines`;
    } else if (msg.type === "end") {
      ended = true;
      followingLatest = false;
      log.setLive(false);
      log.end();
      // status is the job's now: the attempt's own result only when it was the last.
      const count = log.lineCount();
      const lines = `${count.toLocaleString("en")} line${count === 1 ? "" : "s"}.`;
      logState.textContent = msg.latest_attempt > msg.attempt
        ? `Attempt ${msg.attempt} ended; attempt ${msg.latest_attempt} followed (the job is ${msg.status} now). ${lines}`
        : `Attempt ${msg.attempt} ended: ${msg.status}. ${lines}`;
      refresh();
      loadArtifacts();
      loadAnnotations();
      loadSummary();
      loadTests();
    } else if (msg.type === "error") {
      logState.textContent = "Log unavailable: " + msg.message;
    }
  }
  ctx.onCleanup(() => unsubscribe());

  async function refresh() {
    try {
      setJob(await api(jobPath, { signal: ctx.signal }));
    } catch { /* shown on the next try */ }
  }

  setJob(job);
  showAttempt(viewed);
  loadArtifacts();
  const timer = setInterval(() => { if (!TERMINAL.has(job.status)) refresh(); }, REFRESH_MS);
  ctx.onCleanup(() => clearInterval(timer));
}

// annotationItem shows one annotation: its level, where it points, its title and message,
// and a link to the log line that raised it (on the job's page, href may lead there).
export function annotationItem(a, href = "") {
  let where = a.file || "";
  if (where && a.line) where += ":" + a.line + (a.col ? ":" + a.col : "");
  return h("li", { class: "annotation", dataset: { level: a.level, seq: String(a.seq) } },
    h("span", { class: "level level-" + a.level }, LEVELS[a.level] || a.level), " ",
    a.job ? h("span", { class: "mono" }, a.job, " ") : null,
    where ? h("span", { class: "mono muted annotation-where" }, where, " ") : null,
    a.title ? h("strong", {}, a.title, ": ") : null,
    h("span", { class: "annotation-message" }, a.message), " ",
    h("a", { href: href + "#L" + a.seq, class: "muted" }, "line " + a.seq));
}

// item is one term of a <dl>; a <div> may group a dt and its dd.
function item(term, ...value) {
  return h("div", {}, h("dt", {}, term), h("dd", {}, ...value));
}
