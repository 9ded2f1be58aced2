// A run: why it failed (a box at the top: the job, the step, how it ended and its first
// error lines, linked into the job's log), its DAG (coloured live from the WebSocket's run topic), its jobs, a timeline of
// when each job ran, the annotations its jobs' steps raised (::error:: and kin), the
// summaries they wrote ($GITHUB_STEP_SUMMARY), and cancel and retry. A run with test
// results has a second tab, Tests (tests.js), with its failing tests first.
import { clear, fill, h } from "./dom.js";
import { api, live, post, postJSON } from "./api.js";
import { draw } from "./dag.js";
import { TERMINAL, liveDuration, parseTime, runLabel, setDuration, shortID, statusBadge, when } from "./format.js";
import { announce, navigate, setQuery, showError } from "./app.js";
import { count, runTests } from "./tests.js";
import { annotationItem } from "./job.js";
import { summaryContent } from "./summary.js";
import { confirmCancel, decideButtons } from "./actions.js";

export async function runPage(main, [id], ctx) {
  ctx.title("Run " + shortID(id));
  const h1 = h("h1", { tabindex: "-1" }, "Run ", h("span", { class: "mono" }, shortID(id)));
  const crumbs = h("p", { class: "crumbs" }, h("a", { href: "/" }, "Runs"), " / ", shortID(id));
  main.append(crumbs, h1);
  const run = await api("/api/v1/runs/" + encodeURIComponent(id), { signal: ctx.signal });
  ctx.title(`${run.name || "Run"} ${runLabel(run)} \u00b7 ${run.project}`);
  fill(crumbs, h("a", { href: "/" }, "Runs"), " / ", `${run.project} ${runLabel(run)}`);

  const badge = h("span", { role: "status", "aria-label": "Run status", id: "run-status" });
  const meta = h("dl", { class: "meta" });
  const message = h("p", { class: "action-message", role: "status" });
  const cancelBtn = h("button", { type: "button", class: "danger", id: "cancel-run" }, "Cancel run");
  const retryBtn = h("button", { type: "button", id: "retry-run" }, "Re-run failed jobs");
  const rerunAllBtn = h("button", { type: "button", class: "secondary", id: "rerun-all" }, "Re-run all jobs");
  const liveState = h("span", { class: "live-state muted" });
  fill(h1, run.name || "Run", " ", h("span", { class: "mono muted run-number" }, runLabel(run)));

  const act = (btn, path, verb, body, ask) => btn.addEventListener("click", async () => {
    if (ask && !await ask()) return;
    btn.disabled = true;
    message.textContent = verb + "\u2026";
    try {
      const r = body ? await postJSON(path, body, ctx.signal) : await post(path, ctx.signal);
      message.textContent = verb + " requested.";
      update(r, r.jobs);
    } catch (e) {
      if (e.name === "AbortError") return;
      message.textContent = "Could not " + verb.toLowerCase() + ": " + e.message;
      btn.disabled = false;
    }
  });
  act(cancelBtn, `/api/v1/runs/${encodeURIComponent(id)}/cancel`, "Cancel", null, () => confirmCancel("run"));
  act(retryBtn, `/api/v1/runs/${encodeURIComponent(id)}/rerun`, "Re-run", { jobs: "failed" });
  act(rerunAllBtn, `/api/v1/runs/${encodeURIComponent(id)}/rerun`, "Re-run", { jobs: "all" });

  const graph = draw(run.jobs);
  const jobsBody = h("tbody");
  const timeline = h("ol", { class: "timeline", "aria-label": "Job timeline" });
  const annotationsBox = h("section", { class: "annotations", id: "annotations", "aria-labelledby": "annotations-h", hidden: true });
  const summariesBox = h("section", { class: "summaries", id: "summaries", "aria-labelledby": "summaries-h", hidden: true });
  const failureBox = h("section", { class: "failure", id: "failure", "aria-labelledby": "failure-h", hidden: true });

  const overview = h("div", { id: "panel-overview", class: "tab-panel" },
    annotationsBox,
    h("section", { "aria-labelledby": "graph-h" }, h("h2", { id: "graph-h" }, "Graph"),
      graph.el),
    h("section", { "aria-labelledby": "jobs-h" }, h("h2", { id: "jobs-h" }, "Jobs"),
      h("div", { class: "table-wrap" }, h("table", {},
        h("thead", {}, h("tr", {}, ["Job", "Status", "Attempt", "Duration", "Needs"].map((c) => h("th", { scope: "col" }, c)))),
        jobsBody))),
    h("section", { "aria-labelledby": "timeline-h" }, h("h2", { id: "timeline-h" }, "Timeline"), timeline),
    summariesBox);

  const tests = runTests(run, ctx, {
    jobName: (jobID, key) => {
      const j = jobs.find((x) => x.id === jobID);
      return (j && j.display_name) || key;
    },
    onCounts: (v) => setTestCounts(v),
    finished: () => TERMINAL.has(current.status),
  });
  const tabs = runTabs(overview, h("div", { id: "panel-tests", class: "tab-panel" }, h("h2", { class: "visually-hidden" }, "Tests"), tests.el));

  main.append(
    h("div", { class: "page-head" }, badge, liveState),
    failureBox,
    meta,
    h("div", { class: "actions" }, cancelBtn, retryBtn, rerunAllBtn), message,
    tabs.el);

  let jobs = run.jobs, current = run, lastStatus = run.status, annotationsAt = "", summariesAt = "", failureAt = "", testsAt = "";

  // The Tests tab shows once the run has test results (or when asked for by its URL),
  // labelled with how many failed.
  function setTestCounts(v) {
    const failing = (v.counts.failed || 0) + (v.counts.errored || 0);
    tabs.setTests(v.total > 0, failing ? count(failing) + " failed" : count(v.total), failing > 0);
  }

  // The tests are read again whenever a job ends or starts again: the worker sends a
  // job's results before it ends.
  async function loadTests(r) {
    const at = `${r.status}/${r.jobs_finished}/${jobs.map((j) => j.attempt).join(",")}`;
    if (at === testsAt) return;
    testsAt = at;
    try {
      await tests.load();
    } catch (e) {
      if (e.name !== "AbortError") testsAt = ""; // try again on the next notice
    }
  }

  // Why the run failed: in the run's own answer, read again when the run ends (the live
  // feed's runs do not carry it).
  async function loadFailure(r) {
    if (r.failure) {
      failureAt = r.status;
      renderFailure(failureBox, r.failure);
      return;
    }
    if (r.status !== "failed" && r.status !== "cancelled") {
      failureAt = "";
      failureBox.hidden = true;
      return;
    }
    if (failureAt === r.status) return;
    failureAt = r.status;
    try {
      const full = await api("/api/v1/runs/" + encodeURIComponent(id), { signal: ctx.signal });
      if (full.failure) renderFailure(failureBox, full.failure);
    } catch (e) {
      if (e.name !== "AbortError") failureAt = ""; // try again on the next notice
    }
  }

  // The annotations are read again whenever a job ends or starts again, not on every
  // notice.
  async function loadAnnotations(r) {
    const at = `${r.status}/${r.jobs_finished}/${jobs.map((j) => j.attempt).join(",")}`;
    if (at === annotationsAt) return;
    annotationsAt = at;
    let as;
    try {
      as = await api(`/api/v1/runs/${encodeURIComponent(id)}/annotations`, { signal: ctx.signal });
    } catch (e) {
      if (e.name !== "AbortError") annotationsAt = ""; // try again on the next notice
      return;
    }
    annotationsBox.hidden = as.length === 0;
    fill(annotationsBox, h("h2", { id: "annotations-h" }, "Annotations"),
      h("ul", { class: "plain annotation-list" }, as.map((a) => annotationItem(a, "/jobs/" + a.job_id))));
  }

  // The summaries are read again whenever a job starts, ends or starts again (its
  // steps' summaries are all kept before it ends), not on every notice.
  async function loadSummaries(r) {
    const at = `${r.status}/${jobs.map((j) => j.attempt + ":" + j.status).join(",")}`;
    if (at === summariesAt) return;
    summariesAt = at;
    let ss;
    try {
      ss = await api(`/api/v1/runs/${encodeURIComponent(id)}/summaries?include=html`, { signal: ctx.signal });
    } catch (e) {
      if (e.name !== "AbortError") summariesAt = ""; // try again on the next notice
      return;
    }
    const title = new Map(jobs.map((j) => [j.id, j.display_name || j.key]));
    summariesBox.hidden = ss.length === 0;
    fill(summariesBox, h("h2", { id: "summaries-h" }, "Summaries"),
      ss.map((s) => h("article", { class: "summary", dataset: { key: s.job }, "aria-label": "Summary of " + (title.get(s.job_id) || s.job) },
        h("p", { class: "summary-job" }, h("a", { href: "/jobs/" + s.job_id }, title.get(s.job_id) || s.job),
          s.attempt > 1 ? h("span", { class: "muted" }, " attempt " + s.attempt) : null),
        summaryContent(s.html || ""))));
  }

  function update(r, js) {
    current = r;
    if (js) jobs = js;
    fill(badge, statusBadge(r.status), r.cancel_requested && !TERMINAL.has(r.status) ? " cancelling\u2026" : "");
    if (r.status !== lastStatus) {
      announce("Run " + r.status);
      lastStatus = r.status;
    }
    const t = r.trigger || {};
    fill(meta, 
      item("Project", r.project),
      (t.ref || t.branch) ? item("Ref", t.ref || t.branch, r.ref_verified === false ? h("span", { class: "muted unverified",
        title: "Given by hand, not by a signed webhook, the repository or an admin: it satisfies no environment's branch rules, writes no branch cache and posts no commit status" },
        " (unverified)") : null) : null,
      t.sha ? item("Commit", h("span", { class: "mono" }, t.sha)) : null,
      t.message ? item("Message", h("span", { title: t.message }, t.message.split("\n")[0]),
        t.author_name ? h("span", { class: "muted" }, " \u2014 " + t.author_name) : null) : null,
      item("Event", t.event || ""),
      item("Created", when(r.created_at)),
      r.started_at ? item("Started", when(r.started_at)) : null,
      item("Duration", liveDuration(r.started_at, r.finished_at)),
      item("Jobs", `${r.jobs_finished} of ${r.jobs_total} finished`));
    cancelBtn.disabled = TERMINAL.has(r.status) || r.cancel_requested;
    retryBtn.disabled = !(r.status === "failed" || r.status === "cancelled");
    rerunAllBtn.disabled = !TERMINAL.has(r.status);
    graph.update(jobs);
    renderJobs();
    renderTimeline();
    loadAnnotations(r);
    loadSummaries(r);
    loadFailure(r);
    loadTests(r);
  }

  function renderJobs() {
    clear(jobsBody);
    for (const j of jobs) {
      jobsBody.append(h("tr", { dataset: { key: j.key, status: j.status } },
        h("td", {}, h("a", { href: "/jobs/" + j.id }, j.display_name || j.key)),
        h("td", {}, statusBadge(j.status), j.failure_kind && j.failure_kind !== j.status && j.status !== "success" ? h("span", { class: "muted" }, " (" + j.failure_kind + ")") : null,
          j.waiting ? h("div", { class: "waiting muted", dataset: { code: j.waiting.code } }, j.waiting.message) : null,
          j.status === "waiting_approval" ? decideButtons(j, ctx.signal, () => {}, (t) => { message.textContent = t; }) : null),
        // A re-run goes past max_attempts, which bounds automatic retries only.
        h("td", {}, !j.attempt ? "\u2014" : j.attempt <= j.max_attempts ? `${j.attempt} of ${j.max_attempts}` : String(j.attempt)),
        h("td", {}, liveDuration(j.started_at, j.finished_at)),
        h("td", {}, (j.needs || []).join(", "))));
    }
  }

  function renderTimeline() {
    const started = jobs.map((j) => parseTime(j.started_at)).filter((x) => !Number.isNaN(x));
    clear(timeline);
    if (started.length === 0) {
      timeline.append(h("li", { class: "muted" }, "No job has started yet."));
      return;
    }
    const t0 = Math.min(...started);
    const now = Date.now();
    const ends = jobs.map((j) => (j.started_at ? parseTime(j.finished_at) || now : NaN)).filter((x) => !Number.isNaN(x));
    const span = Math.max(1, Math.max(...ends) - t0);
    for (const j of jobs) {
      const a = parseTime(j.started_at);
      const bar = h("span", { class: "bar st-" + j.status });
      const d = h("span", { class: "tl-duration" });
      setDuration(d, j.started_at, j.finished_at);
      if (!Number.isNaN(a)) {
        const b = parseTime(j.finished_at) || now;
        // CSSOM rather than a style attribute: the CSP forbids inline styles.
        bar.style.left = ((a - t0) / span) * 100 + "%";
        bar.style.width = Math.max(0.5, ((b - a) / span) * 100) + "%";
      } else {
        bar.hidden = true;
      }
      timeline.append(h("li", { dataset: { key: j.key } },
        h("span", { class: "tl-label", title: j.display_name || j.key }, j.display_name || j.key),
        h("span", { class: "tl-track" }, bar),
        h("span", { class: "tl-text" }, j.status, " ", d)));
    }
  }

  update(run, run.jobs);
  const timer = setInterval(() => { if (!TERMINAL.has(current.status)) renderTimeline(); }, 1000);
  ctx.onCleanup(() => clearInterval(timer));

  const unsubscribe = live.subscribe(() => ({ topic: "run", run_id: id }), (msg) => {
    if (msg.type === "run") update(msg.run, msg.jobs);
    else if (msg.type === "error") showError(main, new Error(msg.message));
  });
  ctx.onCleanup(unsubscribe);
  ctx.onCleanup(live.onState((st) => {
    liveState.textContent = st === "open" ? "\u25cf live" : st === "connecting" ? "connecting\u2026" : "reconnecting\u2026";
  }));
}

/**
 * runTabs puts the run's overview and its tests in two tabs. The tab bar shows only once
 * the run has tests (setTests), or when the URL asks for them (?tab=tests), which the
 * chosen tab is kept in.
 */
function runTabs(overview, testsPanel) {
  const label = h("span", { class: "tab-count", id: "tests-tab-count" });
  const tabs = {
    overview: { btn: h("button", { type: "button", role: "tab", id: "tab-overview", "aria-controls": "panel-overview" }, "Overview"), panel: overview },
    tests: { btn: h("button", { type: "button", role: "tab", id: "tab-tests", "aria-controls": "panel-tests" }, "Tests", " ", label), panel: testsPanel },
  };
  const bar = h("div", { role: "tablist", class: "tabs", "aria-label": "Run views", hidden: true }, tabs.overview.btn, tabs.tests.btn);
  let selected = new URLSearchParams(location.search).get("tab") === "tests" ? "tests" : "overview";
  let hasTests = false;

  function select(name, { focus = false, keep = true } = {}) {
    selected = name;
    for (const [n, t] of Object.entries(tabs)) {
      const on = n === name;
      t.btn.setAttribute("aria-selected", String(on));
      t.btn.tabIndex = on ? 0 : -1;
      t.panel.hidden = !on;
    }
    if (focus) tabs[name].btn.focus();
    if (keep) {
      const q = new URLSearchParams(location.search);
      if (name === "tests") q.set("tab", "tests");
      else q.delete("tab");
      setQuery(q.toString() ? "?" + q : "", { replace: true });
    }
    showBar();
  }
  function showBar() {
    const on = hasTests || selected === "tests";
    bar.hidden = !on;
    // Without the bar the overview is the page itself, not a panel of a hidden tab.
    for (const [n, t] of Object.entries(tabs)) {
      if (on) {
        t.panel.setAttribute("role", "tabpanel");
        t.panel.setAttribute("aria-labelledby", "tab-" + n);
      } else {
        t.panel.removeAttribute("role");
        t.panel.removeAttribute("aria-labelledby");
      }
    }
  }
  for (const [n, t] of Object.entries(tabs)) t.btn.addEventListener("click", () => select(n));
  // The arrow keys, Home and End move between the tabs, as a tab bar's do.
  bar.addEventListener("keydown", (ev) => {
    const names = Object.keys(tabs);
    const i = names.indexOf(selected);
    const to = { ArrowRight: names[(i + 1) % names.length], ArrowLeft: names[(i + names.length - 1) % names.length],
      Home: names[0], End: names[names.length - 1] }[ev.key];
    if (!to) return;
    ev.preventDefault();
    select(to, { focus: true });
  });
  select(selected, { keep: false });
  return {
    el: h("div", { class: "run-views" }, bar, overview, testsPanel),
    setTests(has, text, failing) {
      hasTests = has;
      label.textContent = has ? text : "";
      label.classList.toggle("failing", failing);
      showBar();
    },
  };
}

/**
 * runByNumberPage finds a project's run by its number (/projects/NAME/runs/42, as a
 * test's verdict names the runs it cites) and shows it at its own address.
 */
export async function runByNumberPage(main, [name, number], ctx) {
  ctx.title(`${name} #${number}`);
  main.append(h("p", { class: "crumbs" }, h("a", { href: "/" }, "Runs"), " / ", `${name} #${number}`),
    h("h1", { tabindex: "-1" }, `${name} #${number}`));
  const run = await api(`/api/v1/projects/${encodeURIComponent(name)}/runs/${encodeURIComponent(number)}`, { signal: ctx.signal });
  navigate("/runs/" + encodeURIComponent(run.id) + location.hash, { replace: true });
}

// renderFailure fills box with why the run failed: the reason, the job (linked to its log
// at the error), the step, how it ended, and the first error lines, each linked to its
// line in the job's log.
function renderFailure(box, f) {
  const log = f.job_id ? "/jobs/" + f.job_id : "";
  const at = (seq) => (log && seq ? log + "#L" + seq : log);
  const how = f.kind === "exit" && f.exit_code != null ? "exit code " + f.exit_code
    : f.kind === "lost" ? "lost with its worker" : f.kind;
  box.hidden = false;
  fill(box,
    h("h2", { id: "failure-h" }, f.kind === "cancelled" ? "Why it was cancelled" : "Why it failed"),
    h("p", { class: "failure-reason" }, f.reason),
    h("dl", { class: "meta" },
      f.job ? item("Job", log ? h("a", { href: at(f.seq), class: "failure-job" }, f.job) : f.job) : null,
      f.step ? item("Step", h("span", { class: "failure-step" }, f.step)) : null,
      item("Reason", h("span", { class: "failure-kind" }, how)),
      f.cancelled_by ? item("Cancelled by", f.cancelled_by) : null,
      f.failed_jobs > 1 ? item("Failed jobs", String(f.failed_jobs)) : null),
    f.lines && f.lines.length ? h("pre", { class: "failure-lines", "aria-label": "First error lines" },
      f.lines.map((l) => [l.seq && log ? h("a", { href: at(l.seq) }, l.text) : l.text, "\n"])) : null,
    log && f.seq ? h("p", {}, h("a", { href: at(f.seq), class: "failure-log" }, "Open the log at line " + f.seq)) : null,
    f.others && f.others.length ? h("p", { class: "muted" }, "Also failed: " + f.others.join(", ")) : null);
}

// item is one term of a <dl>; a <div> may group a dt and its dd.
function item(term, ...value) {
  return h("div", {}, h("dt", {}, term), h("dd", {}, ...value));
}
