// Formatting of statuses, times, durations, sizes and names.
import { h } from "./dom.js";

const SYMBOLS = {
  success: "\u2713", failed: "\u2717", cancelled: "\u2298", skipped: "\u21b7",
  running: "\u25b6", assigned: "\u25b7", queued: "\u2026", pending: "\u2026", retrying: "\u21bb",
  waiting_approval: "\u2016",
  passed: "\u2713", errored: "\u26a0", // a test's statuses
  idle: "\u25cb", busy: "\u25cf", draining: "\u25d0", offline: "\u2715",
};

/** statusBadge shows a status as a symbol and a word, coloured: never by colour alone. */
export function statusBadge(status) {
  return h("span", { class: ["badge", "st-" + status], dataset: { status } },
    h("span", { "aria-hidden": "true" }, SYMBOLS[status] || "?"), " ", status);
}

export const TERMINAL = new Set(["success", "failed", "cancelled", "skipped"]);

export function parseTime(s) {
  return s ? Date.parse(s) : NaN;
}

/** duration formats milliseconds as "850ms", "12.4s", "3m 05s" or "2h 01m". */
export function duration(ms) {
  if (!Number.isFinite(ms) || ms < 0) return "";
  if (ms < 1000) return Math.round(ms) + "ms";
  const sec = ms / 1000;
  if (sec < 60) return sec.toFixed(1) + "s";
  const m = Math.floor(sec / 60), r = Math.floor(sec % 60);
  if (m < 60) return m + "m " + String(r).padStart(2, "0") + "s";
  return Math.floor(m / 60) + "h " + String(m % 60).padStart(2, "0") + "m";
}

/**
 * liveDuration is an element showing the time from start to end, or to now while end is
 * missing; the app's clock ticks it every second (see tick).
 */
export function liveDuration(start, end) {
  const el = h("span", { class: "duration" });
  setDuration(el, start, end);
  return el;
}

export function setDuration(el, start, end) {
  const a = parseTime(start), b = parseTime(end);
  if (Number.isNaN(a)) {
    el.textContent = "";
    delete el.dataset.since;
    return;
  }
  if (Number.isNaN(b)) {
    el.dataset.since = String(a);
    el.textContent = duration(Date.now() - a);
  } else {
    delete el.dataset.since;
    el.textContent = duration(b - a);
  }
}

/** tick advances every running duration on the page. */
export function tick() {
  for (const el of document.querySelectorAll(".duration[data-since]")) {
    el.textContent = duration(Date.now() - Number(el.dataset.since));
  }
}

/** when shows a timestamp as local time, with the exact UTC time in a <time> element. */
export function when(s) {
  if (!s) return "";
  const d = new Date(s);
  const today = new Date().toDateString() === d.toDateString();
  const text = today ? d.toLocaleTimeString() : d.toLocaleString();
  return h("time", { datetime: s, title: s }, text);
}

export function bytes(n) {
  if (!Number.isFinite(n)) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? n : n.toFixed(1)) + " " + units[i];
}

/** testID names a test as the CLI and the history route do: SUITE.NAME, or NAME alone. */
export function testID(t) {
  return t.suite ? t.suite + "." + t.name : t.name;
}

export function shortID(id) {
  return id ? id.slice(0, 8) : "";
}

/** runLabel names a run as its project numbers it, "#42"; its short id when unnumbered. */
export function runLabel(run) {
  return run && run.number ? "#" + run.number : shortID(run && run.id);
}

/**
 * everyProjectOnly is what a page of the whole server's (workers, the queue) shows a
 * token limited to some projects, which the API answers 403: why, and where its own
 * projects' work is, rather than an error.
 */
export function everyProjectOnly(what) {
  return h("p", { class: "note", role: "note", id: "every-project-only" },
    what, " show every project's load, so only a token of every project (an admin's, or one scoped to all projects) may see them; yours is limited to some projects. Your projects' runs and jobs are on the ",
    h("a", { href: "/" }, "Runs"), " page.");
}
