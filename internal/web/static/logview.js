// The log viewer of a job's page. It holds every line of the attempt shown, but draws only
// the rows in and near the view: a log of 100,000 lines costs the page what one screen of
// it does. Rows wrap (at a phone's width too): a row's height is reckoned from its length
// in the monospace font's columns until it is drawn, then measured, and the line at the
// top of the view stays where it is as estimates become measurements.
//
// Lines fold twice over: a step's lines under its "step NAME" line, and a ::group:: under
// its title. A search shows only the matching lines (or them with the lines around them,
// or every line with the matches marked) and steps through them; a line number links to
// #L<n>, which scrolls to the line, opening what folds it, and marks it.
import { h } from "./dom.js";
import { getToken, raw } from "./api.js";
import { advance, newState, render, strip } from "./ansi.js";

// LEVELS names a workflow command's level as a log line shows it.
export const LEVELS = { error: "Error", warning: "Warning", notice: "Notice", debug: "Debug" };

// CONTEXT is how many lines around a match the "with context" search shows.
const CONTEXT = 3;
// QUANTUM rows: the drawn window starts and ends on multiples of it, so that a small
// scroll redraws nothing.
const QUANTUM = 16;
// A system line "step NAME" starts a step; the worker's other lines about a step say more.
const STEP_END = / failed with exit code | could not run: | timed out after |: /;
// The symbol shown with a step's status.
const STEP_MARK = { success: "\u2713", failed: "\u2717", cancelled: "\u2298", skipped: "\u21b7", running: "\u25b6" };

/**
 * logView makes the log's tools, state line and scrolling box; the job page puts them in
 * place and feeds lines to add. rawPath(attempt) is the API path of an attempt's raw log.
 */
export function logView({ rawPath }) {
  const search = h("input", { type: "search", id: "log-search", placeholder: "Filter lines", autocomplete: "off", "aria-controls": "log" });
  const mode = h("select", { id: "log-search-mode", "aria-label": "Lines shown by a search" },
    h("option", { value: "only" }, "Only matching lines"),
    h("option", { value: "context" }, `Matches and ${CONTEXT} lines around`),
    h("option", { value: "all" }, "All lines, matches marked"));
  const prevBtn = h("button", { type: "button", class: "secondary", id: "log-prev", title: "Previous match (Shift+Enter)", "aria-label": "Previous match" }, "\u2191");
  const nextBtn = h("button", { type: "button", class: "secondary", id: "log-next", title: "Next match (Enter)", "aria-label": "Next match" }, "\u2193");
  const matches = h("span", { class: "muted", role: "status", id: "log-matches" });
  const matchAt = h("span", { class: "muted", id: "log-match-at" });
  const follow = h("input", { type: "checkbox", id: "log-follow", checked: true });
  const followField = h("div", { class: "field checkbox" }, follow, h("label", { for: "log-follow" }, "Follow"));
  // Wrapping is on by default: a phone cannot show a long line otherwise.
  const wrap = h("input", { type: "checkbox", id: "log-wrap", checked: true });
  const stamps = h("input", { type: "checkbox", id: "log-timestamps" });
  const rawLink = h("a", { id: "log-raw", class: "button secondary" }, "Raw log");
  const jump = h("button", { type: "button", class: "secondary", id: "log-end" }, "Jump to end");
  const state = h("p", { class: "muted", id: "log-state", role: "status" });
  const box = h("div", { class: "log", id: "log", tabindex: "0", role: "region", "aria-label": "Log" });
  const sizer = h("div", { class: "log-lines" });
  const win = h("div", { class: "log-window" });
  const probeText = h("span", { class: "probe-chars" }, "0".repeat(64));
  const probeTS = h("span", { class: "ts" }, "00:00:00.000");
  const probe = h("div", { class: "log-probe", "aria-hidden": "true" },
    h("span", { class: "ln" }, "0"), probeTS, h("span", { class: "text" }, probeText));
  sizer.append(win, probe);
  box.append(sizer);

  const tools = h("div", { class: "log-tools" },
    h("div", { class: "field log-search" }, h("label", { for: "log-search" }, "Search"),
      h("div", { class: "search-row" }, search, prevBtn, nextBtn)),
    h("div", { class: "field" }, h("label", { for: "log-search-mode" }, "Show"), mode),
    h("span", { class: "log-counts" }, matches, " ", matchAt),
    h("div", { class: "log-switches" },
      followField,
      h("div", { class: "field checkbox" }, wrap, h("label", { for: "log-wrap" }, "Wrap lines")),
      h("div", { class: "field checkbox" }, stamps, h("label", { for: "log-timestamps" }, "Timestamps (UTC)")),
      jump, rawLink));

  // The attempt's lines, in seq order (a fold's end line is not kept: it shows nothing).
  // An entry: {seq, ts, stream, level, text, plain, len, ansi, kind: line|fold|step,
  // sec: its step's section or -1, fold: its ::group::'s entry or -1, open, h, hk}.
  let all = [], sections = [], steps = [], failedStep = -1, failedView = false, live = false;
  let lastSeq = 0, ansi = newState(), curFold = -1, curSec = -1, nextStep = 0;
  // What is drawn: view holds the indexes in all of the rows shown, in order; tops[r] is
  // row r's top in px (valid up to row topsOK).
  let view = [], tops = new Float64Array(1024), topsOK = 0;
  let q = "", hits = [], cur = -1, target = -1;
  let lh = 20, cols = 80, layout = 1, width = -1;
  let wFirst = -1, wLast = -1, redraw = true, drawn = new Map(), scheduled = false;
  let focus = null, moved = false, pendingSeq = 0, ended = false, attempt = 1;
  // pendingFind is the text a #find= link asks for, found once every line is here.
  let pendingFind = "";

  // -- entries --

  function stepSection(text) {
    if (!text.startsWith("step ")) return null;
    const name = text.slice(5);
    for (let k = nextStep; k < steps.length; k++) {
      if (steps[k].name === name) { nextStep = k + 1; return k; }
    }
    return STEP_END.test(name) ? null : -1;
  }

  function add(lines) {
    const from = all.length;
    for (const l of lines) {
      if (l.seq <= lastSeq) continue;
      lastSeq = l.seq;
      // A fold ends at its end line, at the next fold, or at a line of Gantry's own (the
      // step's end), so a step that does not close one folds nothing of the next.
      if (l.group || l.stream === "system") curFold = -1;
      if (l.group === "end") continue;
      const text = l.text || "";
      const plain = strip(text);
      let len = plain.length + (plain.split("\t").length - 1) * 7;
      if (l.level) len += (LEVELS[l.level] || l.level).length + 2;
      const e = { seq: l.seq, ts: l.ts, stream: l.stream, level: l.level || "", text, plain: plain.toLowerCase(),
        len, ansi, kind: "line", sec: curSec, fold: curFold, open: true, h: 0, hk: 0 };
      if (text.includes("\x1b")) { ansi = { ...ansi }; advance(text, ansi); }
      const step = l.stream === "system" && !l.group ? stepSection(text) : null;
      if (step !== null) {
        curSec = sections.length;
        e.kind = "step";
        e.sec = curSec;
        sections.push({ at: all.length, step, open: !failedView || (step >= 0 && step === failedStep) });
        e.len += 16;
      } else if (l.group === "start") {
        e.kind = "fold";
        e.open = false;
        e.len += 2;
      } else if (curFold >= 0) {
        e.len += 2;
      }
      all.push(e);
      if (l.group === "start") curFold = all.length - 1;
    }
    if (all.length === from) return;
    // The rows to show of what came.
    if (q) {
      for (let i = from; i < all.length; i++) if (all[i].plain.includes(q)) hits.push(i);
      if (cur < 0 && hits.length) cur = 0;
      if (mode.value === "context") buildView();
      else for (let i = from; i < all.length; i++) if (mode.value === "only" ? all[i].plain.includes(q) : shown(i)) view.push(i);
      counts();
    } else {
      for (let i = from; i < all.length; i++) if (shown(i)) view.push(i);
    }
    schedule();
    if (pendingSeq && indexOf(pendingSeq) >= 0) {
      const seq = pendingSeq;
      pendingSeq = 0;
      goTo(seq, { mark: true, page: true });
    }
    tryFocus();
  }

  // shown says whether entry i shows with no search: a step's first line always, the
  // rest when their step and their group are open.
  function shown(i) {
    const e = all[i];
    if (e.kind === "step") return true;
    if (e.sec >= 0 && !sections[e.sec].open) return false;
    return e.fold < 0 || all[e.fold].open;
  }

  function buildView() {
    view = [];
    if (q && mode.value === "only") view = hits.slice();
    else if (q && mode.value === "context") {
      let next = 0;
      for (const i of hits) {
        for (let j = Math.max(i - CONTEXT, next); j <= Math.min(i + CONTEXT, all.length - 1); j++) view.push(j);
        next = Math.max(next, i + CONTEXT + 1);
      }
    } else {
      for (let i = 0; i < all.length; i++) if (shown(i)) view.push(i);
    }
    topsOK = 0;
    redraw = true;
  }

  // indexOf finds the entry of seq (or -1): entries are in seq order.
  function indexOf(seq) {
    let lo = 0, hi = all.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (all[mid].seq === seq) return mid;
      if (all[mid].seq < seq) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
  }
  // rowOf finds the row that shows entry i (or -1): view is in order too.
  function rowOf(i) {
    const r = rowBefore(i);
    return r >= 0 && view[r] === i ? r : -1;
  }
  // rowBefore finds the last row that shows entry i or one before it (or -1).
  function rowBefore(i) {
    let lo = 0, hi = view.length - 1, found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (view[mid] <= i) { found = mid; lo = mid + 1; } else hi = mid - 1;
    }
    return found;
  }

  // -- geometry --

  function rowHeight(i) {
    const e = all[i];
    if (e.hk === layout) return e.h;
    return wrap.checked ? lh * Math.max(1, Math.ceil(e.len / cols)) : lh;
  }
  function ensureTops() {
    if (tops.length < view.length + 1) {
      const t = new Float64Array(Math.max(view.length + 1, tops.length * 2));
      t.set(tops.subarray(0, topsOK + 1));
      tops = t;
    }
    for (let r = topsOK; r < view.length; r++) tops[r + 1] = tops[r] + rowHeight(view[r]);
    topsOK = view.length;
  }
  // rowAt is the row at y px from the top.
  function rowAt(y) {
    let lo = 0, hi = view.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (tops[mid] <= y) lo = mid; else hi = mid - 1;
    }
    return lo;
  }
  // measure reads the line height and how many characters a row holds; a change of
  // either (a new width, timestamps, wrapping) makes every height an estimate again.
  function measure() {
    const w = box.clientWidth;
    if (w === width) return;
    width = w;
    const cs = getComputedStyle(probe);
    lh = parseFloat(cs.lineHeight) || 20;
    const charW = probeText.getBoundingClientRect().width / 64 || 8;
    const textW = probeText.parentElement.getBoundingClientRect().width;
    cols = Math.max(8, Math.floor(textW / charW));
    layout++;
    topsOK = 0;
    redraw = true;
  }

  function schedule() {
    if (scheduled) return;
    scheduled = true;
    requestAnimationFrame(() => { scheduled = false; draw(); });
  }
  const following = () => live && follow.checked;

  // draw shows the rows in and near the view, measures them, and keeps the row at the
  // top of the view in place (or the end in view while following).
  function draw() {
    if (!box.isConnected) return;
    measure();
    ensureTops();
    const n = view.length, vh = box.clientHeight;
    sizer.style.height = tops[n] + "px";
    if (following()) box.scrollTop = tops[n];
    const top = box.scrollTop;
    const anchor = n ? rowAt(top) : 0, off = top - tops[anchor];
    let first = n ? anchor : 0, last = n ? rowAt(top + vh) : -1;
    // A jump draws just the view, and the rows around it come next frame; a scroll
    // draws a third of a view more on each side, in whole quanta.
    const jump = redraw || wFirst < 0 || first > wLast || last < wFirst;
    if (jump) {
      if (n) schedule();
    } else {
      first = rowAt(Math.max(0, top - vh / 3));
      last = rowAt(top + vh * 4 / 3);
      first -= first % QUANTUM;
      last = Math.min(n - 1, last - (last % QUANTUM) + QUANTUM - 1);
    }
    if (!redraw && first === wFirst && last === wLast) return;
    const made = [];
    const make = (r) => {
      const el = rowEl(view[r]);
      mark(el, view[r]);
      drawn.set(view[r], el);
      made.push(r);
      return el;
    };
    if (!redraw && wFirst >= 0 && first <= wLast && last >= wFirst) {
      // An overlapping window: rows that stay are left in place (and their layout kept).
      for (let r = wFirst; r <= wLast; r++) {
        if (r >= first && r <= last) continue;
        const el = drawn.get(view[r]);
        el.remove();
        release(el);
        drawn.delete(view[r]);
      }
      const before = [], after = [];
      for (let r = first; r < wFirst; r++) before.push(make(r));
      for (let r = wLast + 1; r <= last; r++) after.push(make(r));
      win.prepend(...before);
      win.append(...after);
    } else {
      const old = drawn, rows = [];
      drawn = new Map();
      for (let r = first; r <= last; r++) {
        const i = view[r], el = old.get(i);
        if (el && el.layout === layout) {
          mark(el, i);
          drawn.set(i, el);
          old.delete(i);
          rows.push(el);
        } else rows.push(make(r));
      }
      win.replaceChildren(...rows);
      for (const el of old.values()) release(el);
    }
    redraw = false;
    wFirst = first;
    wLast = last;
    win.style.transform = `translateY(${tops[first] || 0}px)`;
    // Heights drawn replace estimates; rows below move, the anchor does not.
    let changed = -1;
    for (const r of made) {
      const e = all[view[r]], got = drawn.get(view[r]).offsetHeight;
      if (got !== rowHeight(view[r]) && (changed < 0 || r < changed)) changed = r;
      e.h = got;
      e.hk = layout;
    }
    if (changed >= 0) {
      topsOK = Math.min(topsOK, changed);
      ensureTops();
      sizer.style.height = tops[n] + "px";
      win.style.transform = `translateY(${tops[first] || 0}px)`;
      if (following()) box.scrollTop = tops[n];
      else if (n && Math.abs(box.scrollTop - (tops[anchor] + off)) >= 1) box.scrollTop = tops[anchor] + off;
      // The window may no longer cover the view: look again next frame.
      schedule();
    }
  }

  function mark(el, i) {
    el.classList.toggle("target", i === target);
    el.classList.toggle("hit", q !== "" && all[i].plain.includes(q));
    el.classList.toggle("current", cur >= 0 && hits[cur] === i);
    const r = rowOf(i);
    el.classList.toggle("gap", r > 0 && view[r - 1] !== i - 1 && q !== "" && mode.value !== "all");
  }

  function stamp(ts) {
    const d = new Date(ts);
    return Number.isNaN(d.getTime()) ? "" : d.toISOString().slice(11, 23);
  }

  // Rows of plain lines, put back when they leave the window and filled again: scrolling
  // through a long log then makes little for the garbage collector.
  const pool = [];
  function release(el) {
    if (el.plain && pool.length < 256) pool.push(el);
  }
  function plainRow(i) {
    const e = all[i];
    let row = pool.pop();
    if (!row) {
      row = h("div", {}, h("a", { class: "ln" }), h("span", { class: "text" }));
      row.plain = true;
    }
    const [ln, text] = [row.firstChild, row.lastChild];
    row.className = "line" + (e.stream === "stderr" ? " stderr" : e.stream === "system" ? " system" : "") + (e.fold >= 0 ? " in-fold" : "");
    ln.textContent = String(e.seq);
    ln.href = "#L" + e.seq;
    ln.setAttribute("aria-label", "Line " + e.seq);
    if (row.children.length === 3) row.children[1].remove();
    if (stamps.checked) ln.after(h("span", { class: "ts", title: new Date(e.ts).toISOString() }, stamp(e.ts)));
    if (e.text.includes("\x1b")) text.replaceChildren(...render(e.text, { ...e.ansi }));
    else text.textContent = e.text;
    row.id = "L" + e.seq;
    row.dataset.i = String(i);
    row.layout = layout;
    return row;
  }

  function rowEl(i) {
    const e = all[i];
    if (e.kind === "line" && !e.level) return plainRow(i);
    const ln = h("a", { class: "ln", href: "#L" + e.seq, "aria-label": "Line " + e.seq }, String(e.seq));
    const ts = stamps.checked ? h("span", { class: "ts", title: new Date(e.ts).toISOString() }, stamp(e.ts)) : null;
    const body = render(e.text, { ...e.ansi });
    let row;
    if (e.kind === "step") {
      const sec = sections[e.sec], st = sec.step >= 0 ? steps[sec.step] : null;
      const status = st && st.status ? [STEP_MARK[st.status] || "", st.status, st.exit_code !== undefined && st.exit_code !== 0 ? "exit " + st.exit_code : ""].filter(Boolean).join(" ") : "";
      row = h("div", { class: ["line", "step-start", "system"], dataset: { status: st ? st.status : "" } }, ln, ts,
        h("button", { type: "button", class: "text step-toggle", "aria-expanded": String(sec.open) },
          h("span", { class: "fold-mark", "aria-hidden": "true" }, sec.open ? "\u25be " : "\u25b8 "), body,
          status ? h("span", { class: "step-status" }, " \u00b7 " + status) : null));
    } else if (e.kind === "fold") {
      row = h("div", { class: ["line", "fold-start", e.stream === "stderr" ? "stderr" : null], "aria-expanded": String(e.open) }, ln, ts,
        h("button", { type: "button", class: "text fold-toggle", "aria-expanded": String(e.open) },
          h("span", { class: "fold-mark", "aria-hidden": "true" }, e.open ? "\u25be " : "\u25b8 "), body));
    } else {
      row = h("div", { class: ["line", e.stream === "stderr" ? "stderr" : null, e.stream === "system" ? "system" : null,
        e.level ? "level-" + e.level : null, e.fold >= 0 ? "in-fold" : null], dataset: e.level ? { level: e.level } : {} }, ln, ts,
      h("span", { class: "text" }, e.level ? h("span", { class: "level" }, LEVELS[e.level] || e.level, ": ") : null, body));
    }
    row.id = "L" + e.seq;
    row.dataset.i = String(i);
    row.layout = layout;
    return row;
  }

  // -- moving about --

  // keepRow runs change (which rebuilds the view) and keeps entry i where it was on
  // screen, or, when it is folded away, the row that folds it.
  function keepRow(i, change) {
    ensureTops();
    const r0 = rowOf(i);
    const y = r0 >= 0 ? tops[r0] - box.scrollTop : 0;
    change();
    ensureTops();
    const r = rowBefore(i);
    sizer.style.height = tops[view.length] + "px";
    if (r >= 0) box.scrollTop = tops[r] - y;
    draw();
  }

  // show scrolls entry i into the view: centred, or with it at the bottom.
  function show(i, at = "center") {
    for (let pass = 0; pass < 2; pass++) {
      ensureTops();
      const r = rowOf(i);
      if (r < 0) return null;
      const vh = box.clientHeight, hgt = tops[r + 1] - tops[r];
      sizer.style.height = tops[view.length] + "px";
      box.scrollTop = at === "bottom" ? tops[r + 1] - vh + lh : tops[r] - Math.max(0, (vh - hgt) / 2);
      redraw = true;
      draw();
    }
    return drawn.get(i) || null;
  }

  // open opens what folds entry i; it returns whether anything changed.
  function open(i) {
    const e = all[i];
    let changed = false;
    if (e.kind !== "step" && e.sec >= 0 && !sections[e.sec].open) {
      sections[e.sec].open = true;
      drawn.delete(sections[e.sec].at); // its line shows it open
      changed = true;
    }
    if (e.fold >= 0 && !all[e.fold].open) {
      all[e.fold].open = true;
      drawn.delete(e.fold);
      changed = true;
    }
    if (changed) redraw = true;
    return changed;
  }

  /** goTo scrolls to line seq, opening its folds; mark marks it, page brings the log into the window. */
  function goTo(seq, { mark: doMark = true, page = false, at = "center" } = {}) {
    const i = indexOf(seq);
    if (i < 0) return false;
    follow.checked = false;
    if (open(i) && (!q || mode.value === "all")) buildView();
    if (q && rowOf(i) < 0) { search.value = ""; setSearch(); }
    if (doMark) target = i;
    redraw = true;
    const el = show(i, at);
    if (el && page) {
      const r = box.getBoundingClientRect();
      if (r.top < 0 || r.bottom > innerHeight) box.scrollIntoView({ block: "nearest" });
    }
    return true;
  }

  function fromHash() {
    const f = /^#find=(.+)$/.exec(location.hash);
    if (f) {
      try { pendingFind = decodeURIComponent(f[1]); } catch { pendingFind = f[1]; }
      moved = true; // the link wins over the opening at the error
      tryFind();
      return;
    }
    const m = /^#L(\d+)$/.exec(location.hash);
    if (!m) return;
    const seq = Number(m[1]);
    moved = true; // a link wins over the opening at the error
    if (!goTo(seq, { mark: true, page: true })) pendingSeq = seq;
  }

  // tryFind answers a #find=TEXT link (a test's "Log" on the Tests pages) once the whole
  // log is here: every line shown, the ones holding TEXT marked, at the last that the
  // job's steps printed (where test tools print a test's failure, after its start), not
  // at Gantry's own lines about the reports after them; at the last line when only
  // Gantry's hold it.
  function tryFind() {
    if (!pendingFind || !ended) return;
    search.value = pendingFind;
    pendingFind = "";
    mode.value = "all";
    setSearch();
    let k = hits.length - 1;
    while (k > 0 && all[hits[k]].stream === "system") k--;
    if (k >= 0 && all[hits[k]].stream === "system") k = hits.length - 1;
    if (k > 0) step(k);
  }

  // tryFocus opens a failed attempt at its error: the first error annotation's line, else
  // the last lines of the failed step, once they are here, with the log brought into the
  // window. A line link or the reader's own scrolling comes first.
  function tryFocus() {
    if (!focus || focus.done) return;
    if (moved || /^#(L\d+|find=.+)$/.test(location.hash)) { focus.done = true; return; }
    if (focus.seq && indexOf(focus.seq) >= 0) {
      focus.done = true;
      goTo(focus.seq, { mark: true, page: true });
      return;
    }
    if (!ended) return;
    focus.done = true;
    let last = all.length - 1;
    const s = sections.findIndex((x) => x.step === failedStep && failedStep >= 0);
    if (s >= 0 && s + 1 < sections.length) last = sections[s + 1].at - 1;
    if (last >= 0) goTo(all[last].seq, { mark: false, at: "bottom", page: true });
  }

  // -- search --

  function counts() {
    if (!q) { matches.textContent = ""; matchAt.textContent = ""; }
    else {
      matches.textContent = `${hits.length} matching line${hits.length === 1 ? "" : "s"}`;
      matchAt.textContent = hits.length ? `(${cur + 1} of ${hits.length})` : "";
    }
    prevBtn.disabled = nextBtn.disabled = hits.length === 0;
  }

  function setSearch() {
    const anchorEntry = cur >= 0 ? hits[cur] : -1;
    q = search.value.toLowerCase();
    hits = [];
    if (q) for (let i = 0; i < all.length; i++) if (all[i].plain.includes(q)) hits.push(i);
    cur = hits.length ? 0 : -1;
    counts();
    if (!q && anchorEntry >= 0) {
      keepRow(anchorEntry, buildView);
      return;
    }
    buildView();
    box.scrollTop = 0;
    if (cur >= 0) step(0);
    else schedule();
  }

  // step moves the current match by d and scrolls to it.
  function step(d) {
    if (!hits.length) return;
    cur = (cur + d + hits.length) % hits.length;
    const i = hits[cur];
    // Only matching lines show wherever they are; all lines show a match's folds opened.
    if ((mode.value === "all" || !q) && open(i)) buildView();
    follow.checked = false;
    counts();
    redraw = true;
    show(i);
  }

  search.addEventListener("input", setSearch);
  search.addEventListener("keydown", (ev) => {
    if (ev.key !== "Enter") return;
    ev.preventDefault();
    step(ev.shiftKey ? -1 : 1);
  });
  mode.addEventListener("change", () => {
    const i = cur >= 0 ? hits[cur] : -1;
    if (i >= 0 && mode.value === "all") open(i);
    if (i >= 0) keepRow(i, buildView); else { buildView(); schedule(); }
  });
  prevBtn.addEventListener("click", () => step(-1));
  nextBtn.addEventListener("click", () => step(1));

  // -- folds, switches, scrolling --

  box.addEventListener("click", (ev) => {
    const btn = ev.target.closest(".step-toggle, .fold-toggle");
    if (!btn) return;
    const row = btn.closest(".line"), i = Number(row.dataset.i), e = all[i];
    keepRow(i, () => {
      if (e.kind === "step") sections[e.sec].open = !sections[e.sec].open;
      else e.open = !e.open;
      if (!q || mode.value === "all") buildView();
      redraw = true;
      drawn.delete(i);
    });
  });
  const relayout = () => { width = -1; box.classList.toggle("nowrap", !wrap.checked); box.classList.toggle("stamps", stamps.checked); };
  for (const c of [wrap, stamps]) {
    c.addEventListener("change", () => {
      ensureTops();
      const i = view.length ? view[rowAt(box.scrollTop)] : -1;
      relayout();
      if (i >= 0) keepRow(i, () => { measure(); drawn.clear(); });
      else schedule();
    });
  }
  const atBottom = () => box.scrollHeight - box.scrollTop - box.clientHeight < 4;
  // Scrolling up stops following; scrolling back to the end starts it again.
  box.addEventListener("scroll", () => {
    if (live) follow.checked = atBottom();
    schedule();
  });
  for (const t of ["wheel", "touchmove", "keydown", "mousedown"]) box.addEventListener(t, () => { moved = true; }, { passive: true });
  follow.addEventListener("change", () => { if (follow.checked) schedule(); });
  jump.addEventListener("click", () => {
    if (live) follow.checked = true;
    moved = true;
    ensureTops();
    box.scrollTop = tops[view.length];
    schedule();
  });
  const resizes = new ResizeObserver(() => { width = -1; schedule(); });
  resizes.observe(box);
  window.addEventListener("hashchange", fromHash);

  // The raw log: a plain link, or with a token (which a link cannot carry) a fetch saved
  // as a file.
  rawLink.addEventListener("click", async (ev) => {
    if (!getToken()) return;
    ev.preventDefault();
    let res;
    try {
      res = await raw(rawPath(attempt));
    } catch (e) {
      state.textContent = "The raw log could not be fetched: " + e.message;
      return;
    }
    const url = URL.createObjectURL(await res.blob());
    const a = h("a", { href: url, download: rawLink.getAttribute("download") });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  });

  /** setLive says whether the attempt is still running: only then does the log follow. */
  function setLive(v) {
    live = v;
    followField.hidden = !v;
    follow.checked = v && !/^#(L\d+|find=.+)$/.test(location.hash);
  }

  /** reset empties the view for attempt n; isLive says whether it may still grow. */
  function reset(n, { isLive, jobSteps, failed, name }) {
    attempt = n;
    all = []; sections = []; view = []; hits = []; cur = -1; target = -1; topsOK = 0;
    lastSeq = 0; ansi = newState(); curFold = -1; curSec = -1; nextStep = 0;
    steps = jobSteps || [];
    // A failed attempt opens with its failed step open and the others shut.
    failedStep = -1;
    if (failed) steps.forEach((st, k) => { if (st.status === "failed") failedStep = k; });
    failedView = failedStep >= 0;
    focus = null; moved = false; ended = false; pendingSeq = 0; pendingFind = "";
    drawn.clear(); redraw = true;
    win.replaceChildren();
    box.scrollTop = 0;
    setLive(isLive);
    rawLink.href = rawPath(n);
    rawLink.setAttribute("download", `${name}-attempt-${n}.log`);
    counts();
    fromHash();
    schedule();
  }

  return {
    tools, state, box, add, reset, setLive,
    /** setSteps gives the steps' statuses, shown on their lines. */
    setSteps(s) {
      steps = s || [];
      redraw = true;
      drawn.clear();
      schedule();
    },
    /** end says every line of the attempt is here. */
    end() {
      ended = true;
      tryFind();
      tryFocus();
    },
    /** focusError arms the opening at the error: seq is the first error annotation's line, or 0. */
    focusError(seq) {
      if (focus) return;
      focus = { seq, done: false };
      tryFocus();
    },
    lineCount: () => lastSeq,
    cleanup() {
      window.removeEventListener("hashchange", fromHash);
      resizes.disconnect();
    },
  };
}
