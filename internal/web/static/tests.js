// Test results, from the API's tests routes (docs/tests.md): a run's Tests tab and a
// job's tests (one view of either: the counts, the verdicts' headline, the failing tests
// first, each with why it failed and its latest results, then the others a page at a
// time) and a project's Tests page (a branch's failing tests with since when each fails
// and its slowest tests, its flaky tests with their evidence, its quarantined tests, and
// one test's history). A failing or flaky test can be quarantined, and a
// quarantined one released, where it shows (quarantine.js). Every read is bounded: a run
// of 50,000 tests costs a page of them, and each failing test shown one read of its last
// 20 results, 4 reads at a time.
import { clear, fill, h } from "./dom.js";
import { api } from "./api.js";
import { duration, statusBadge, testID, when } from "./format.js";
import { setQuery } from "./app.js";
import { quarantineButton, quarantinedUntil, releaseButton } from "./quarantine.js";

// FAILING_PAGE is the failing tests read at once; OTHERS_PAGE the skipped and passed ones.
const FAILING_PAGE = 50;
const OTHERS_PAGE = 100;
// SPARK is the results a failing test's sparkline shows; HISTORY_PAGE a history table's.
const SPARK = 20;
const HISTORY_PAGE = 100;
// HISTORY_READS is how many history reads a page makes at once.
const HISTORY_READS = 4;

/** VERDICTS are the verdicts' kinds in words, as gantry tests prints them. */
export const VERDICTS = { new: "new failure", still: "still failing", known: "known broken", flaky: "flaky" };

const numbers = new Intl.NumberFormat("en-US");

/** count writes n as the CLI does: 1,204. */
export function count(n) {
  return numbers.format(n || 0);
}

function plural(n, one, many) {
  return count(n) + " " + (n === 1 ? one : many);
}

const failing = (status) => status === "failed" || status === "errored";

/** countsLine says a run's counts: "1,204 tests: 2 failed, 1 errored, 10 skipped, 1,191 passed". */
export function countsLine(v) {
  const parts = ["failed", "errored", "skipped", "passed"].filter((s) => v.counts[s] > 0).map((s) => count(v.counts[s]) + " " + s);
  return plural(v.total, "test", "tests") + (parts.length ? ": " + parts.join(", ") : "");
}

/** historyLink is the project's Tests page showing one test's history. */
export function historyLink(project, t) {
  return "/projects/" + encodeURIComponent(project) + "/tests?" + new URLSearchParams({ suite: t.suite || "", name: t.name });
}

/**
 * logLink is the job's page with its log searched for the test's name and opened at the
 * last line that names it (logview's #find=), where test tools print a failure.
 */
export function logLink(t) {
  return "/jobs/" + t.job_id + "#find=" + encodeURIComponent(t.name);
}

/** runByNumber is the page of a project's run #number (a verdict's evidence names runs so). */
export function runByNumber(project, number) {
  return "/projects/" + encodeURIComponent(project) + "/runs/" + number;
}

function shortSHA(sha) {
  return sha ? h("span", { class: "mono", title: sha }, sha.slice(0, 12)) : null;
}

function reruns(n) {
  return n > 0 ? h("span", { class: "tag rerun-tag", title: "The test tool ran it again within its report before it passed: flaky by itself" },
    `passed after ${n} failed ${n === 1 ? "rerun" : "reruns"}`) : null;
}

/**
 * historyReader reads tests' latest results, each test once per page, at most
 * HISTORY_READS at a time: a page of 50 failing tests makes 50 small reads, not 50 at once.
 */
function historyReader(projectBase, signal) {
  const cache = new Map();
  const queue = [];
  let active = 0;
  const pump = () => {
    while (active < HISTORY_READS && queue.length) {
      const read = queue.shift();
      active++;
      read().finally(() => { active--; pump(); });
    }
  };
  return (t) => {
    const key = t.suite + "\u0000" + t.name;
    if (!cache.has(key)) {
      const p = new Promise((resolve, reject) => {
        const q = new URLSearchParams({ suite: t.suite || "", name: t.name, limit: String(SPARK) });
        queue.push(() => api(projectBase + "/tests/history?" + q, { signal }).then(resolve, reject));
        pump();
      });
      p.catch(() => cache.delete(key)); // read again next time
      cache.set(key, p);
    }
    return cache.get(key);
  };
}

/**
 * sparkline draws a test's results (newest first, as the API gives them) as coloured
 * cells, oldest left and newest right, the run at hand outlined. Each cell's title says
 * its run, branch, commit and status; the whole says the counts in words.
 */
export function sparkline(results, thisRun) {
  const rs = results.slice(0, SPARK).reverse();
  const by = {};
  for (const r of rs) by[r.status] = (by[r.status] || 0) + 1;
  const words = ["failed", "errored", "skipped", "passed"].filter((s) => by[s]).map((s) => by[s] + " " + s).join(", ");
  const label = rs.length
    ? `Last ${plural(rs.length, "result", "results")}, oldest first: ${words}; the latest ${rs[rs.length - 1].status}`
    : "No results";
  return h("span", { class: "spark", role: "img", "aria-label": label, title: label },
    rs.map((r) => h("span", {
      class: ["spark-cell", "sp-" + r.status, thisRun && r.run_id === thisRun ? "this-run" : null],
      dataset: { status: r.status },
      title: `${r.run ? "#" + r.run + " " : ""}${r.branch || ""}${r.sha ? " " + r.sha.slice(0, 8) : ""}: ${r.status}`,
    })));
}

/**
 * runTests is a run's Tests tab. load() reads its failing tests again (the run page calls
 * it when a job ends); onCounts(v) hears the run's counts, for the tab's label; jobName
 * names a job by its id and key; finished says whether the run has ended.
 */
export function runTests(run, ctx, { jobName, onCounts, finished }) {
  return testsView(run, ctx, { base: "/api/v1/runs/" + encodeURIComponent(run.id) + "/tests", query: {}, what: "run",
    jobName, onCounts, finished });
}

/**
 * jobTests is the tests of a job's attempt n, on the job's page, drawn as a run's Tests
 * tab draws them. load() reads them again (when the attempt ends); onCounts(v) hears
 * their counts; finished says whether the attempt has ended.
 */
export function jobTests(job, n, ctx, { onCounts, finished }) {
  const run = { id: job.run_id, project: job.project, number: job.run_number };
  return testsView(run, ctx, { base: "/api/v1/jobs/" + encodeURIComponent(job.id) + "/tests", query: { attempt: String(n) },
    what: "attempt", onCounts, finished });
}

/**
 * testsView shows the tests the API's route base lists (with query), a run's or a job
 * attempt's: what names the one or the other in words; jobName, when given, names each
 * test's job (a run's tests are of many), which links to its log.
 */
function testsView(run, ctx, { base, query, what, jobName, onCounts, finished }) {
  const signal = ctx.signal;
  const url = (params) => base + "?" + new URLSearchParams({ ...query, ...params });
  const history = historyReader("/api/v1/projects/" + encodeURIComponent(run.project), signal);
  // What the user opened (outputs, verdicts), by test, kept when the list is drawn again.
  const opened = new Set();
  let shown = []; // the failing tests drawn
  let next = null; // next_offset of the failing tests
  let drawn = ""; // the answer drawn, to skip a redraw that changes nothing
  let otherCounts = "";
  let serial = 0;
  let reads = 0; // loads started: an answer older than the latest started is not drawn

  const summary = h("div", { class: "tests-summary", id: "tests-summary" });
  const failingList = h("ol", { class: "plain test-list", id: "failing-tests", "aria-label": "Failing tests" });
  const failingMore = h("div", { class: "pager" });
  const others = h("section", { class: "other-tests", id: "other-tests", "aria-labelledby": "other-tests-h", hidden: true });
  const state = h("p", { class: "muted", role: "status" }, "Loading the tests\u2026");
  // What a quarantine or a release did, or why it could not; it takes the focus after one,
  // since the list it was started from is drawn again.
  const message = h("p", { class: "action-message", id: "tests-message", role: "status", tabindex: "-1" });
  const say = (text, failed = false) => {
    message.textContent = text;
    message.classList.toggle("error", failed);
  };
  const changed = async () => {
    try {
      await load();
    } catch { /* said in the state line */ }
    message.focus();
  };
  const el = h("div", { class: "run-tests" }, state, summary, message, failingList, failingMore, others);

  const testKey = (t) => t.job_id + "\u0000" + t.suite + "\u0000" + t.name;

  async function load() {
    // Read as many failing tests as are shown, so that a reload keeps "Show more".
    const limit = Math.min(1000, Math.max(FAILING_PAGE, Math.ceil(shown.length / FAILING_PAGE) * FAILING_PAGE));
    const read = ++reads;
    let v;
    try {
      v = await api(url({ status: "failed,errored", limit: String(limit) }), { signal });
    } catch (e) {
      if (e.name === "AbortError" || signal.aborted || e.status === 401) return;
      state.textContent = "Could not load the tests: " + e.message;
      state.classList.add("error");
      throw e;
    }
    if (read !== reads) return;
    onCounts(v);
    const key = JSON.stringify(v);
    if (key === drawn) return;
    drawn = key;
    state.textContent = "";
    state.classList.remove("error");
    shown = v.tests;
    next = v.next_offset ?? null;
    renderSummary(v);
    clear(failingList);
    appendFailing(v.tests);
    renderMore();
    renderOthers(v);
  }

  function renderSummary(v) {
    if (!v.total) {
      fill(summary, h("p", { class: "muted", id: "tests-none" }, "No test results in this " + what,
        finished() ? "" : " yet",
        ". A job names the reports its steps write with ", h("code", {}, "reports:"), "."));
      return;
    }
    const nFailing = (v.counts.failed || 0) + (v.counts.errored || 0);
    fill(summary,
      h("p", { class: "tests-headline", id: "tests-headline" }, v.headline || (nFailing ? "" : "No failing tests.")),
      h("p", { class: "tests-counts", id: "tests-counts" }, countsLine(v)),
      v.judged < nFailing ? h("p", { class: "muted small" }, `Verdicts of the first ${count(v.judged)} failing tests.`) : null,
      nFailing ? null : h("p", { class: "muted small" }, "Every test that ran passed or was skipped."));
  }

  function renderMore() {
    clear(failingMore);
    if (next === null) return;
    const btn = h("button", { type: "button", class: "secondary", id: "more-failing" }, "Show more failing tests");
    btn.addEventListener("click", async () => {
      btn.disabled = true;
      try {
        const v = await api(url({ status: "failed,errored", limit: String(FAILING_PAGE), offset: String(next) }), { signal });
        shown = shown.concat(v.tests);
        next = v.next_offset ?? null;
        appendFailing(v.tests);
        renderMore();
      } catch (e) {
        if (e.name === "AbortError") return;
        btn.disabled = false;
        failingMore.append(h("span", { class: "error" }, " Could not load them: " + e.message));
      }
    });
    failingMore.append(btn);
  }

  function appendFailing(tests) {
    for (const t of tests) failingList.append(failingItem(t));
  }

  // toggled keeps a details element's or a verdict's open state in opened.
  function remember(key, open) {
    if (open) opened.add(key);
    else opened.delete(key);
  }

  function failingItem(t) {
    const key = testKey(t);
    const id = "test-" + ++serial;
    const v = t.verdict;
    let verdictBtn = null, verdictBox = null;
    if (v) {
      const isOpen = opened.has("v" + key);
      verdictBox = h("div", { class: "verdict-detail", id: id + "-why", hidden: !isOpen },
        h("p", { class: "verdict-why" }, v.why),
        v.evidence && v.evidence.length ? h("ul", { class: "plain evidence" }, v.evidence.map((o) => observation(run, o))) : null);
      verdictBtn = h("button", {
        type: "button", class: ["verdict", "v-" + v.kind], "aria-expanded": String(isOpen), "aria-controls": id + "-why",
        title: v.why, dataset: { verdict: v.kind },
      }, VERDICTS[v.kind] || v.kind, h("span", { "aria-hidden": "true" }, isOpen ? " \u25be" : " \u25b8"));
      verdictBtn.addEventListener("click", () => {
        const open = verdictBox.hidden;
        verdictBox.hidden = !open;
        verdictBtn.setAttribute("aria-expanded", String(open));
        verdictBtn.lastChild.textContent = open ? " \u25be" : " \u25b8";
        remember("v" + key, open);
      });
    }
    const where = t.file ? t.file + (t.line ? ":" + t.line : "") : "";
    const spark = h("span", { class: "spark-slot" });
    const output = t.output ? h("details", { class: "test-output", open: opened.has("o" + key) },
      h("summary", {}, "Output", h("span", { class: "muted" }, ` (${plural(t.output.split("\n").filter(Boolean).length, "line", "lines")})`)),
      h("pre", {}, t.output)) : null;
    if (output) output.addEventListener("toggle", () => remember("o" + key, output.open));
    const item = h("li", { class: "test-item", id, dataset: { status: t.status, verdict: v ? v.kind : "", test: testID(t) } },
      h("div", { class: "test-head" }, statusBadge(t.status), " ", h("span", { class: "test-name mono" }, testID(t)), " ", verdictBtn,
        t.quarantined ? h("span", { class: "tag quarantine-tag", title: "Quarantined in this project: while the quarantine lasts, its failures alone do not fail its job" },
          "quarantined") : null,
        t.quarantined
          ? releaseButton(run.project, t, { signal, say, done: changed })
          : quarantineButton(run.project, t, { signal, done: (q) => { say(quarantinedUntil(q)); changed(); } })),
      h("div", { class: "test-meta muted" },
        jobName ? h("span", {}, jobName(t.job_id, t.job), t.attempt > 1 ? ", attempt " + t.attempt : "") : null,
        h("span", {}, duration(t.duration_ms)),
        where ? h("span", { class: "mono test-where" }, where) : null,
        spark,
        h("a", { href: historyLink(run.project, t), class: "test-history" }, "History"),
        jobName ? h("a", { href: logLink(t), class: "test-log", title: "The job's log at the last line that names this test" }, "Log") : null),
      t.message ? h("pre", { class: "test-message" }, t.message) : null,
      verdictBox,
      output);
    history(t).then((rs) => {
      if (rs.length) fill(spark, sparkline(rs, run.id));
    }).catch(() => {});
    return item;
  }

  // renderOthers offers the skipped and passed tests, a page at a time, read only when
  // asked for: most of a run's tests are those.
  function renderOthers(v) {
    const n = (v.counts.skipped || 0) + (v.counts.passed || 0);
    const key = `${v.counts.skipped || 0}/${v.counts.passed || 0}`;
    others.hidden = n === 0;
    if (key === otherCounts) return;
    otherCounts = key;
    const parts = ["skipped", "passed"].filter((s) => v.counts[s]).map((s) => count(v.counts[s]) + " " + s);
    const tbody = h("tbody");
    const table = h("div", { class: "table-wrap", hidden: true }, h("table", { class: "tests" },
      h("caption", { class: "visually-hidden" }, "Skipped and passed tests"),
      h("thead", {}, h("tr", {}, ["Status", "Test", jobName ? "Job" : null, "Duration"].filter(Boolean).map((c) => h("th", { scope: "col" }, c)))),
      tbody));
    const progress = h("p", { class: "muted small", id: "other-tests-shown", role: "status" });
    const more = h("button", { type: "button", class: "secondary", id: "show-other-tests" }, "Show them");
    let offset = 0, done = 0;
    more.addEventListener("click", async () => {
      more.disabled = true;
      let page;
      try {
        page = await api(url({ status: "skipped,passed", limit: String(OTHERS_PAGE), offset: String(offset) }), { signal });
      } catch (e) {
        if (e.name === "AbortError") return;
        more.disabled = false;
        progress.textContent = "Could not load them: " + e.message;
        return;
      }
      table.hidden = false;
      for (const t of page.tests) {
        tbody.append(h("tr", { dataset: { status: t.status, test: testID(t) } },
          h("td", {}, statusBadge(t.status)),
          h("td", {}, h("span", { class: "mono test-name" }, testID(t)), " ", reruns(t.failed_attempts),
            t.message ? h("div", { class: "muted small test-skip-message" }, t.message) : null),
          jobName ? h("td", {}, h("a", { href: "/jobs/" + t.job_id }, jobName(t.job_id, t.job))) : null,
          h("td", {}, duration(t.duration_ms))));
      }
      done += page.tests.length;
      offset = page.next_offset ?? offset + page.tests.length;
      progress.textContent = `${count(done)} of ${count(n)} shown.`;
      more.textContent = "Show more";
      more.disabled = false;
      more.hidden = page.next_offset == null;
    });
    fill(others, h("h3", { id: "other-tests-h" }, "Other tests"),
      h("p", {}, parts.join(", "), ". ", more), table, progress);
  }

  return { el, load };
}

/** observation is one result a verdict of run cites: its status, run, job, branch and commit. */
function observation(run, o) {
  return h("li", { dataset: { status: o.status, run: String(o.run || "") } },
    statusBadge(o.status), " in ",
    o.run ? h("a", { href: runByNumber(run.project, o.run), class: "evidence-run" }, "run #" + o.run) : "a run",
    ` (${o.run && o.run === run.number ? "this run, " : ""}${o.job}${o.attempt ? ", attempt " + o.attempt : ""})`,
    o.branch ? [" on ", h("span", { class: "mono" }, o.branch)] : null,
    o.sha ? [" at ", shortSHA(o.sha)] : null,
    " ", when(o.at));
}

const relative = new Intl.RelativeTimeFormat("en-US", { numeric: "auto" });
const AGO = [["year", 365 * 86400], ["month", 30 * 86400], ["week", 7 * 86400], ["day", 86400], ["hour", 3600], ["minute", 60]];

/** ago says how long ago the time s was, "3 days ago", with the exact time as its title. */
function ago(s) {
  const t = Date.parse(s);
  if (!Number.isFinite(t)) return "";
  const sec = (t - Date.now()) / 1000;
  const unit = AGO.find(([, n]) => Math.abs(sec) >= n);
  return h("time", { datetime: s, title: new Date(t).toLocaleString() },
    unit ? relative.format(Math.round(sec / unit[1]), unit[0]) : "just now");
}

/**
 * projectTestsPage is a project's tests: on a branch (its default one unless
 * ?summary_branch=), the failing tests of its latest finished run with since when each
 * fails, and that run's slowest tests; the ones that were flaky lately, with the results
 * that show it and Quarantine; the ones quarantined, with Release; and a box that reads
 * one test's history (?test=SUITE.NAME, or ?suite= and ?name= from a link, with
 * ?branch=).
 */
export async function projectTestsPage(main, [name], ctx) {
  ctx.title("Tests \u00b7 " + name);
  const signal = ctx.signal;
  const base = "/api/v1/projects/" + encodeURIComponent(name);
  main.append(
    h("p", { class: "crumbs" }, h("a", { href: "/projects" }, "Projects"), " / ",
      h("a", { href: "/projects/" + encodeURIComponent(name) }, name), " / Tests"),
    h("h1", { tabindex: "-1" }, "Tests of ", name));
  const project = await api(base, { signal }); // a project that does not exist is Not found, not an empty page
  const params = new URLSearchParams(location.search);

  // What a quarantine or a release did, or why it could not; it takes the focus after one,
  // since the list it was started from is drawn again.
  const message = h("p", { class: "action-message", id: "quarantine-message", role: "status", tabindex: "-1" });
  const say = (text, failed = false) => {
    message.textContent = text;
    message.classList.toggle("error", failed);
  };
  const changed = async () => {
    await Promise.all([loadLists({ quiet: true }), loadSummary({ quiet: true })]);
    message.focus();
  };
  const actions = { signal, say, changed };

  // A branch's failing and slowest tests, of its latest finished run with test results.
  const summaryInput = h("input", { type: "text", id: "summary-branch", name: "summary_branch", value: params.get("summary_branch") || "",
    autocomplete: "off", spellcheck: "false", placeholder: project.default_branch || "a branch", "aria-describedby": "summary-help" });
  const summaryForm = h("form", { class: "filters", "aria-label": "The branch whose tests are shown" },
    h("div", { class: "field" }, h("label", { for: "summary-branch" }, "Branch"), summaryInput),
    h("div", { class: "field actions" }, h("button", { type: "submit", id: "show-summary", class: "secondary" }, "Show")));
  const summaryRun = h("p", { id: "summary-run", "aria-live": "polite" });
  const failingH = h("h2", { id: "failing-on-h" }, "Failing");
  const failingBody = h("div", { id: "failing-on-body" }, h("p", { class: "muted" }, "Loading\u2026"));
  const slowestH = h("h2", { id: "slowest-on-h" }, "Slowest");
  const slowestBody = h("div", { id: "slowest-on-body" }, h("p", { class: "muted" }, "Loading\u2026"));
  summaryForm.addEventListener("submit", (ev) => {
    ev.preventDefault();
    setQuery(withParam("summary_branch", summaryInput.value.trim()), { replace: true });
    loadSummary();
  });
  let summaryReads = 0; // an answer older than the latest read asked is not drawn
  async function loadSummary({ quiet = false } = {}) {
    const read = ++summaryReads;
    const asked = summaryInput.value.trim();
    if (!quiet) {
      for (const body of [failingBody, slowestBody]) fill(body, h("p", { class: "muted" }, "Loading\u2026"));
    }
    let v;
    try {
      v = await api(`${base}/tests/summary` + (asked ? "?" + new URLSearchParams({ branch: asked }) : ""), { signal });
    } catch (e) {
      if (e.name === "AbortError" || signal.aborted || e.status === 401 || read !== summaryReads) return;
      fill(summaryRun);
      fill(failingBody, h("p", { class: "error", role: "alert" }, "Could not load the branch's tests: " + e.message));
      fill(slowestBody);
      return;
    }
    if (read !== summaryReads) return;
    const on = () => v.branch ? [" on ", h("span", { class: "mono" }, v.branch)] : null;
    fill(failingH, "Failing", on());
    fill(slowestH, "Slowest", on());
    if (!v.branch) {
      fill(summaryRun);
      const none = h("p", { class: "muted", id: "summary-none" }, "This project has no default branch: name a branch above to see its failing and slowest tests.");
      fill(failingBody, none);
      fill(slowestBody);
      return;
    }
    if (!v.run) {
      fill(summaryRun);
      fill(failingBody, h("p", { class: "muted", id: "summary-none" }, "No finished run of ", h("span", { class: "mono" }, v.branch),
        " kept test results among its latest 20 runs. A job names the test reports its steps write with ", h("code", {}, "reports:"),
        "; a run is shown here once it has ended."));
      fill(slowestBody, h("p", { class: "muted", id: "slowest-none" }, "The slowest tests are those of the same run."));
      return;
    }
    const run = v.run;
    fill(summaryRun, "From ", h("a", { href: "/runs/" + run.id, id: "summary-run-link" }, "run #" + run.number),
      run.sha ? [" at ", shortSHA(run.sha)] : null, ", ", ago(run.created_at), ": ",
      plural(v.total, "test", "tests"), ", ", count(v.failing_total), " failing.");
    if (!v.failing.length) {
      fill(failingBody, h("p", { class: "muted", id: "no-failing-on" }, "No test failed in run #" + run.number + ". Failures of the next run of ",
        h("span", { class: "mono" }, v.branch), " show here, newest first."));
    } else {
      fill(failingBody, h("ol", { class: "plain test-list", id: "branch-failing", "aria-label": "Failing tests, newest failures first" },
        v.failing.map((t) => branchFailingItem(name, v.branch, t))),
      v.failing.length < v.failing_total ? h("p", { class: "muted small" }, `The first ${count(v.failing.length)} of ${count(v.failing_total)} failing tests.`) : null);
    }
    fill(slowestBody, h("div", { class: "table-wrap" }, h("table", { class: "tests", id: "slowest-table" },
      h("caption", { class: "visually-hidden" }, `The slowest tests of run #${run.number} of ${v.branch}, slowest first`),
      h("thead", {}, h("tr", {}, ["Duration", "Test", "Job", "Status"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, v.slowest.map((t) => h("tr", { dataset: { test: testID(t) } },
        h("td", { class: "test-duration" }, duration(t.duration_ms)),
        h("td", {}, h("a", { href: historyLink(name, t), class: "mono test-name" }, testID(t))),
        h("td", {}, h("a", { href: "/jobs/" + t.job_id }, t.job), t.attempt > 1 ? h("span", { class: "muted" }, " attempt " + t.attempt) : null),
        h("td", {}, statusBadge(t.status))))))));
  }

  // The quarantines in force, by test, as last read: the flaky tests say which are.
  let inForce = Promise.resolve(new Map());
  // loadLists reads the quarantines and the flaky tests again; quiet keeps them shown meanwhile.
  function loadLists({ quiet = false } = {}) {
    inForce = loadQuarantine();
    return Promise.all([inForce, loadFlaky({ quiet })]);
  }

  // Flaky tests.
  const days = h("select", { id: "flaky-days" }, [7, 14, 30, 90].map((d) =>
    h("option", { value: String(d), selected: String(d) === (params.get("days") || "14") }, `the last ${d} days`)));
  const flakyBody = h("div", { id: "flaky-body" });
  let flakyReads = 0; // an answer older than the latest read asked is not drawn
  async function loadFlaky({ quiet = false } = {}) {
    const read = ++flakyReads;
    if (!quiet) fill(flakyBody, h("p", { class: "muted" }, "Loading\u2026"));
    let list;
    try {
      list = await api(`${base}/tests/flaky?days=${days.value}&limit=100`, { signal });
    } catch (e) {
      if (e.name === "AbortError" || signal.aborted || e.status === 401 || read !== flakyReads) return;
      fill(flakyBody, h("p", { class: "error", role: "alert" }, "Could not load the flaky tests: " + e.message));
      return;
    }
    const quarantines = await inForce;
    if (read !== flakyReads) return;
    if (!list.length) {
      fill(flakyBody, h("p", { class: "muted", id: "no-flaky" }, `No test failed and passed on one commit in the last ${days.value} days.`));
      return;
    }
    fill(flakyBody, h("ol", { class: "plain test-list", id: "flaky-tests" },
      list.map((f) => flakyItem(name, f, quarantines.get(suiteAndName(f)), actions))));
  }
  days.addEventListener("change", () => {
    setQuery(withParam("days", days.value === "14" ? "" : days.value), { replace: true });
    loadFlaky();
  });

  // The project's quarantine rule, if it has one: said in words, with who set it.
  const ruleLine = h("p", { id: "quarantine-rule", class: "small" });
  async function loadRule() {
    let rule;
    try {
      rule = await api(`${base}/tests/quarantine-rule`, { signal });
    } catch (e) {
      if (e.name === "AbortError" || signal.aborted || e.status === 401) return;
      fill(ruleLine, h("span", { class: "error" }, "Could not load the quarantine rule: " + e.message));
      return;
    }
    if (!rule.enabled) {
      fill(ruleLine, h("span", { class: "muted" }, "No quarantine rule: a maintainer may have flaky tests quarantined by themselves (",
        h("code", {}, "gantry tests quarantine-rule --flaky 3 --within 7d"), ")."));
      return;
    }
    fill(ruleLine, "Quarantine rule: ", h("strong", {}, rule.rule), ", owned by ", rule.owner,
      rule.updated_by ? h("span", { class: "muted" }, " (set by " + rule.updated_by + " ", when(rule.updated_at), ")") : null, ".");
  }

  // Quarantined tests: those in force, by name. loadQuarantine resolves with them by test
  // (none when they could not be read).
  const quarantineBody = h("div", { id: "quarantine-body" }, h("p", { class: "muted" }, "Loading\u2026"));
  async function loadQuarantine() {
    let list;
    try {
      list = await api(`${base}/tests/quarantine`, { signal });
    } catch (e) {
      if (e.name === "AbortError" || signal.aborted || e.status === 401) return new Map();
      fill(quarantineBody, h("p", { class: "error", role: "alert" }, "Could not load the quarantined tests: " + e.message));
      return new Map();
    }
    if (!list.length) {
      fill(quarantineBody, h("p", { class: "muted", id: "no-quarantine" },
        "No test is quarantined. A maintainer quarantines one, with an owner and an expiry, from the flaky tests above, a failing test on a run's Tests tab, or with ",
        h("code", {}, "gantry tests quarantine"), "."));
      return new Map();
    }
    fill(quarantineBody, h("div", { class: "table-wrap" }, h("table", { class: "tests", id: "quarantine-table" },
      h("caption", { class: "visually-hidden" }, "Quarantined tests of " + name),
      h("thead", {}, h("tr", {}, ["Test", "Owner", "Reason", "Since", "Until"].map((c) => h("th", { scope: "col" }, c)))),
      h("tbody", {}, list.map((q) => h("tr", { dataset: { test: testID(q) } },
        // Release is beside the name, so that a phone shows it without scrolling the table.
        h("td", {}, h("a", { href: historyLink(name, q), class: "mono test-name" }, testID(q)), " ",
          releaseButton(name, q, { signal, say, done: changed })),
        h("td", {}, q.owner),
        h("td", {}, q.reason || h("span", { class: "muted" }, "\u2014")),
        h("td", {}, when(q.created_at), q.created_by ? h("span", { class: "muted" }, " by " + q.created_by) : null),
        h("td", {}, when(q.expires_at))))))));
    return new Map(list.map((q) => [suiteAndName(q), q]));
  }

  // One test's history.
  const initial = params.get("name") ? testID({ suite: params.get("suite") || "", name: params.get("name") }) : params.get("test") || "";
  const testInput = h("input", { type: "text", id: "test-query", name: "test", value: initial, autocomplete: "off",
    spellcheck: "false", placeholder: "SUITE.NAME", "aria-describedby": "test-query-help" });
  const branchInput = h("input", { type: "text", id: "test-branch", name: "branch", value: params.get("branch") || "", autocomplete: "off",
    placeholder: "any branch" });
  const historyBody = h("div", { id: "history-body", "aria-live": "polite" });
  const form = h("form", { class: "filters", role: "search", "aria-label": "A test's history" },
    h("div", { class: "field grow" }, h("label", { for: "test-query" }, "Test"), testInput),
    h("div", { class: "field" }, h("label", { for: "test-branch" }, "Branch"), branchInput),
    h("div", { class: "field actions" }, h("button", { type: "submit", id: "show-history" }, "Show history")));
  // An exact suite and name, from a link: the box's SUITE.NAME is split by the server at
  // the dot that names a test, which a name holding dots could make ambiguous.
  let exact = params.get("name") ? { suite: params.get("suite") || "", name: params.get("name") } : null;
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    const test = testInput.value.trim();
    if (exact && test !== testID(exact)) exact = null;
    const q = new URLSearchParams();
    if (exact) {
      q.set("suite", exact.suite);
      q.set("name", exact.name);
    } else if (test) {
      q.set("test", test);
    }
    if (branchInput.value.trim()) q.set("branch", branchInput.value.trim());
    if (days.value !== "14") q.set("days", days.value);
    setQuery(q.toString() ? "?" + q : "");
    loadHistory();
  });

  async function loadHistory() {
    const test = testInput.value.trim();
    if (!test) {
      fill(historyBody);
      return;
    }
    const q = new URLSearchParams(exact ? { suite: exact.suite, name: exact.name } : { test });
    const branch = branchInput.value.trim();
    if (branch) q.set("branch", branch);
    q.set("limit", String(HISTORY_PAGE));
    fill(historyBody, h("p", { class: "muted" }, "Loading\u2026"));
    let rs;
    try {
      rs = await api(`${base}/tests/history?${q}`, { signal });
    } catch (e) {
      if (e.name === "AbortError" || signal.aborted || e.status === 401) return;
      fill(historyBody, h("p", { class: "error", role: "alert" }, "Could not load the history: " + e.message));
      return;
    }
    if (!rs.length) {
      fill(historyBody, h("p", { class: "muted", id: "history-none" }, "No results of ", h("span", { class: "mono" }, test),
        branch ? [" on ", h("span", { class: "mono" }, branch)] : null, " in ", name,
        ". A test is named SUITE.NAME, as a run's Tests tab shows it."));
      return;
    }
    const tbody = h("tbody");
    const table = h("div", { class: "table-wrap" }, h("table", { class: "tests", id: "history-table" },
      h("caption", { class: "visually-hidden" }, "Results of " + test + ", newest first"),
      h("thead", {}, h("tr", {}, ["Run", "Status", "Branch", "Commit", "Job", "Duration", "When"].map((c) => h("th", { scope: "col" }, c)))),
      tbody));
    const fails = (list) => list.filter((r) => failing(r.status)).length;
    let all = rs;
    const said = h("p", { id: "history-count" });
    const more = h("button", { type: "button", class: "secondary", id: "older-history" }, "Show older results");
    const add = (list) => {
      for (const r of list) tbody.append(historyRow(r));
      said.textContent = `${plural(all.length, "result", "results")}, ${count(fails(all))} failing, newest first.`;
      more.hidden = list.length < HISTORY_PAGE;
    };
    more.addEventListener("click", async () => {
      more.disabled = true;
      q.set("before", all[all.length - 1].created_at);
      try {
        const older = await api(`${base}/tests/history?${q}`, { signal });
        all = all.concat(older);
        add(older);
      } catch (e) {
        if (e.name === "AbortError") return;
        said.textContent = "Could not load older results: " + e.message;
      }
      more.disabled = false;
    });
    const first = rs[0];
    fill(historyBody,
      h("h3", { id: "history-test", class: "mono break" }, testID(first)),
      h("p", {}, sparkline(rs), " ", h("span", { class: "muted small" }, "latest ", plural(Math.min(rs.length, SPARK), "result", "results"), ", newest right")),
      said, table, h("div", { class: "pager" }, more));
    add(rs);
  }

  main.append(
    h("div", { id: "branch-tests" },
      h("p", { class: "muted small", id: "summary-help" },
        "The latest finished run of a branch with test results: its failing tests, newest failures first, and its slowest tests."),
      summaryForm, summaryRun,
      h("section", { id: "failing-on", "aria-labelledby": "failing-on-h" }, failingH, failingBody),
      h("section", { id: "slowest-on", "aria-labelledby": "slowest-on-h" }, slowestH, slowestBody)),
    h("section", { id: "flaky", "aria-labelledby": "flaky-h" },
      h("h2", { id: "flaky-h" }, "Flaky tests"),
      h("div", { class: "filters" }, h("div", { class: "field" }, h("label", { for: "flaky-days" }, "Failed and passed on one commit in"), days)),
      flakyBody),
    h("section", { id: "quarantine", "aria-labelledby": "quarantine-h" },
      h("h2", { id: "quarantine-h" }, "Quarantined tests"),
      h("p", { class: "muted small" }, "While its quarantine lasts, a test's failures are kept and shown, but a job whose only failures are quarantined tests succeeds."),
      ruleLine,
      message,
      quarantineBody),
    h("section", { id: "history", "aria-labelledby": "history-h" },
      h("h2", { id: "history-h" }, "A test's history"),
      h("p", { class: "muted small", id: "test-query-help" }, "A test's results in this project's runs, newest first. Name it ",
        h("code", {}, "SUITE.NAME"), " as a run's Tests tab shows it: ", h("code", {}, "example.com/web/auth.TestLogin"), ", ",
        h("code", {}, "tests.test_auth.test_login"), "."),
      form, historyBody));
  loadSummary();
  loadLists();
  loadRule();
  loadHistory();
}

// failingSerial numbers the failing tests drawn, for their elements' ids.
let failingSerial = 0;

/**
 * branchFailingItem is one failing test of a branch's latest run: since which run and
 * commit it fails on the branch and when that was, the run it last passed in, its
 * verdict (a button that opens why), and its job.
 */
function branchFailingItem(project, branch, t) {
  const id = "failing-on-" + ++failingSerial;
  const v = t.verdict;
  let verdictBtn = null, why = null;
  if (v) {
    why = h("p", { class: "verdict-why verdict-detail", id: id + "-why", hidden: true }, v.why);
    verdictBtn = h("button", { type: "button", class: ["verdict", "v-" + v.kind], "aria-expanded": "false", "aria-controls": id + "-why",
      title: v.why, dataset: { verdict: v.kind } }, VERDICTS[v.kind] || v.kind, h("span", { "aria-hidden": "true" }, " \u25b8"));
    verdictBtn.addEventListener("click", () => {
      const open = why.hidden;
      why.hidden = !open;
      verdictBtn.setAttribute("aria-expanded", String(open));
      verdictBtn.lastChild.textContent = open ? " \u25be" : " \u25b8";
    });
  }
  const point = (p, cls) => [h("a", { href: "/runs/" + p.run_id, class: cls }, "run #" + p.run), p.sha ? [" at ", shortSHA(p.sha)] : null, ", ", ago(p.at)];
  return h("li", { class: "test-item", id, dataset: { test: testID(t), status: t.status, verdict: v ? v.kind : "", since: String(t.since.run) } },
    h("div", { class: "test-head" }, statusBadge(t.status), " ",
      h("a", { href: historyLink(project, t), class: "test-name mono" }, testID(t)), " ", verdictBtn,
      t.quarantined ? h("span", { class: "tag quarantine-tag", title: "Quarantined in this project: while the quarantine lasts, its failures alone do not fail its job" },
        "quarantined") : null),
    h("div", { class: "test-meta muted" },
      h("span", { class: "failing-since" }, t.streak_cut ? "failing since at least " : "failing since ", point(t.since, "since-run")),
      t.last_pass ? h("span", { class: "last-pass" }, "last passed in ", point(t.last_pass, "last-pass-run"))
        : t.streak_cut ? null : h("span", { class: "last-pass" }, "never passed on ", h("span", { class: "mono" }, branch)),
      h("span", {}, "job ", h("a", { href: "/jobs/" + t.job_id, class: "test-log" }, t.job))),
    t.message ? h("div", { class: "muted small test-skip-message" }, t.message.split("\n")[0]) : null,
    why);
}

/** suiteAndName keys a test of a project by its suite and name. */
function suiteAndName(t) {
  return (t.suite || "") + "\u0000" + t.name;
}

function withParam(key, value) {
  const q = new URLSearchParams(location.search);
  if (value) q.set(key, value);
  else q.delete(key);
  return q.toString() ? "?" + q : "";
}

function historyRow(r) {
  return h("tr", { dataset: { status: r.status, run: String(r.run || "") } },
    h("td", {}, r.run_id ? h("a", { href: "/runs/" + r.run_id }, r.run ? "#" + r.run : "run") : (r.run ? "#" + r.run : "")),
    h("td", {}, statusBadge(r.status), " ", reruns(r.failed_attempts),
      r.message ? h("div", { class: "muted small test-skip-message" }, r.message.split("\n")[0]) : null),
    h("td", {}, r.branch ? h("span", { class: "mono" }, r.branch) : h("span", { class: "muted" }, "\u2014")),
    h("td", {}, shortSHA(r.sha) || h("span", { class: "muted", title: "The run's commit was not verified" }, "\u2014")),
    h("td", {}, h("a", { href: "/jobs/" + r.job_id }, r.job), r.attempt > 1 ? h("span", { class: "muted" }, " attempt " + r.attempt) : null),
    h("td", {}, duration(r.duration_ms)),
    h("td", {}, when(r.created_at)));
}

/**
 * flakyItem is one flaky test: how often it flipped, and its results on those commits;
 * Quarantine, or a mark that q quarantines it already.
 */
function flakyItem(project, f, q, { signal, say, changed }) {
  const byCommit = new Map();
  for (const e of f.evidence) {
    if (!byCommit.has(e.sha)) byCommit.set(e.sha, []);
    byCommit.get(e.sha).push(e);
  }
  return h("li", { class: "test-item flaky-item", dataset: { test: testID(f) } },
    h("div", { class: "test-head" }, h("a", { href: historyLink(project, f), class: "test-name mono" }, testID(f)),
      q ? h("span", { class: "tag quarantine-tag", title: quarantinedUntil(q) }, "quarantined")
        : quarantineButton(project, f, { signal, done: (made) => { say(quarantinedUntil(made)); changed(); } })),
    h("div", { class: "test-meta muted" },
      h("span", {}, "flipped on ", plural(f.commits, "commit", "commits")),
      h("span", {}, "last seen ", when(f.last_seen))),
    h("ul", { class: "plain evidence" }, [...byCommit].map(([sha, rs]) => h("li", { dataset: { sha } },
      "On ", shortSHA(sha), rs[0].branch ? [" (", h("span", { class: "mono" }, rs[0].branch), ")"] : null, ": ",
      rs.map((r, i) => [i ? "; " : "", statusBadge(r.status), " ", reruns(r.failed_attempts), " in ",
        r.run_id ? h("a", { href: "/runs/" + r.run_id, class: "evidence-run" }, r.run ? "run #" + r.run : "a run") : "a run",
        ` (${r.job}${r.attempt > 1 ? ", attempt " + r.attempt : ""})`])))));
}
