// The run's DAG as an SVG: jobs in columns by depth (a job sits one column right of the
// deepest job it needs), edges from each need to the job that waits on it. The instances
// of a matrix are one node, with their states counted, until it is opened; hovering or
// focusing a node lights up its needs and the jobs that need it and dims the rest.
import { h, s } from "./dom.js";

const PAD = 12, ROW_GAP = 10, LANE_GAP = 6, LINE = 16, FONT = 13, INDENT = 8, TX = 8;
const MIN_W = 150, NARROW_MIN_W = 132, FIT_MIN_W = 120, MAX_W = 240, GAP = 52, MIN_GAP = 36, NARROW = 640;

// WAIT_WORDS name, on a node, the reasons to wait that are worth a look: the others
// (needs, a turn in the queue) are how every run goes, and "retrying" says its own.
const WAIT_WORDS = { no_worker: "no worker", concurrency: "group held" };

// A matrix node counts its instances in this order, and is coloured by the first state of
// WORST that one of them is in.
const COUNT_ORDER = ["success", "failed", "running", "assigned", "retrying", "waiting_approval", "queued", "pending", "cancelled", "skipped"];
const COUNT_WORDS = { success: "passed", assigned: "starting", waiting_approval: "awaiting approval", pending: "waiting" };
const WORST = ["failed", "running", "assigned", "retrying", "waiting_approval", "queued", "pending", "cancelled", "success", "skipped"];

const name = (j) => j.display_name || j.key;

/**
 * units groups jobs into what the graph draws: a job on its own, or the instances of one
 * matrix job (two or more jobs of one name, each with matrix values) as one unit.
 */
export function units(jobs) {
  const count = new Map();
  for (const j of jobs) if (j.matrix && j.matrix.length) count.set(j.name, (count.get(j.name) || 0) + 1);
  const list = [], groups = new Map(), unitOf = new Map();
  for (const j of jobs) {
    let u;
    if (j.matrix && j.matrix.length && count.get(j.name) > 1) {
      u = groups.get(j.name);
      if (!u) {
        u = { id: "matrix:" + j.name, group: true, name: j.name, jobs: [] };
        groups.set(j.name, u);
        list.push(u);
      }
      u.jobs.push(j);
    } else {
      u = { id: "job:" + j.key, group: false, name: name(j), jobs: [j] };
      list.push(u);
    }
    unitOf.set(j.key, u);
  }
  for (const u of list) {
    const needs = new Set();
    for (const j of u.jobs) {
      for (const n of j.needs || []) {
        const nu = unitOf.get(n);
        if (nu && nu !== u) needs.add(nu);
      }
    }
    u.needs = [...needs];
  }
  for (const u of list) {
    if (!u.group) continue;
    labelInstances(u);
    u.title = groupTitle(u);
  }
  return { list, unitOf };
}

// groupTitle is what a matrix's instances' names have in common, cut at a word ("Unit
// tests" of "Unit tests (go=1.26)" or of "Unit tests 1.26"), else the job's key.
function groupTitle(u) {
  const names = u.jobs.map(name);
  let p = names[0];
  for (const n of names) while (!n.startsWith(p)) p = p.slice(0, -1);
  const paren = p.indexOf(" (");
  if (paren > 0) p = p.slice(0, paren);
  else if (p !== names[0] && /[\w.]$/.test(p) && /^[\w.]/.test(names[0].slice(p.length))) p = p.replace(/[\w.]+$/, "");
  p = p.replace(/[\s([{:,=_-]+$/, "");
  return p.length >= 2 ? p : u.name;
}

// labelInstances gives each instance of a matrix the part of its name that tells it from
// its siblings: the matrix values that are not the same for all of them.
function labelInstances(u) {
  const keys = [];
  for (const j of u.jobs) for (const m of j.matrix) if (!keys.includes(m.name)) keys.push(m.name);
  const value = (j, k) => { const m = j.matrix.find((x) => x.name === k); return m ? m.value : undefined; };
  const varies = keys.filter((k) => new Set(u.jobs.map((j) => String(value(j, k)))).size > 1);
  const labels = new Map();
  for (const j of u.jobs) {
    const parts = varies.filter((k) => value(j, k) !== undefined).map((k) => `${k}=${value(j, k)}`);
    labels.set(j.key, parts.length ? parts.join(", ") : name(j));
  }
  u.labels = labels;
}

/**
 * columns puts each unit one column right of the deepest unit it needs. An edge that
 * skips columns gets a lane in each column it passes, placed among the nodes like one,
 * so that it runs between them and beside no other edge. Each column is ordered by the
 * mean row of what leads into its items (plan order on ties), so that edges cross less.
 * It returns the columns, of items { unit } or { lane }, and the edges { from, to, lanes }.
 */
export function columns(list) {
  const depth = new Map(), visiting = new Set();
  const depthOf = (u) => {
    if (depth.has(u)) return depth.get(u);
    if (visiting.has(u)) return 0; // the planner rejects cycles; stay safe anyway
    visiting.add(u);
    let d = 0;
    for (const n of u.needs) d = Math.max(d, depthOf(n) + 1);
    visiting.delete(u);
    depth.set(u, d);
    return d;
  };
  const cols = [], items = new Map(), edges = [], prev = new Map(), next = new Map();
  const link = (a, b) => {
    (prev.get(b) || prev.set(b, []).get(b)).push(a);
    (next.get(a) || next.set(a, []).get(a)).push(b);
  };
  for (const u of list) {
    const item = { unit: u };
    items.set(u, item);
    (cols[depthOf(u)] ||= []).push(item);
  }
  for (let c = 0; c < cols.length; c++) cols[c] ||= [];
  for (const u of list) {
    for (const n of u.needs) {
      const e = { from: n, to: u, lanes: [] };
      let last = items.get(n);
      for (let c = depthOf(n) + 1; c < depthOf(u); c++) {
        const lane = { lane: e };
        cols[c].push(lane);
        e.lanes.push(lane);
        link(last, lane);
        last = lane;
      }
      link(last, items.get(u));
      edges.push(e);
    }
  }
  // Sweep right, left and right again, each time ordering a column by the mean row of
  // its items' neighbours in the column just done; an item with none keeps its row.
  const row = new Map();
  cols.forEach((col) => col.forEach((it, r) => row.set(it, r)));
  const sweep = (c, nb) => {
    const col = cols[c];
    const key = new Map(col.map((it, i) => {
      const rows = (nb.get(it) || []).map((f) => row.get(f));
      return [it, rows.length ? rows.reduce((a, b) => a + b, 0) / rows.length : i];
    }));
    const at = new Map(col.map((it, i) => [it, i]));
    col.sort((a, b) => key.get(a) - key.get(b) || at.get(a) - at.get(b));
    col.forEach((it, r) => row.set(it, r));
  };
  for (let c = 1; c < cols.length; c++) sweep(c, prev);
  for (let c = cols.length - 2; c >= 0; c--) sweep(c, next);
  for (let c = 1; c < cols.length; c++) sweep(c, prev);
  return { cols, edges };
}

// Text is measured with the page's own font, so that a name wraps where it would run out
// of its node rather than being cut.
let ctx2d = null, family = "";
function measure(text, bold) {
  if (!ctx2d) {
    ctx2d = document.createElement("canvas").getContext("2d");
    family = getComputedStyle(document.documentElement).fontFamily || "system-ui, sans-serif";
  }
  if (!ctx2d) return text.length * 7.6;
  ctx2d.font = `${bold ? 700 : 400} ${FONT}px ${family}`;
  return ctx2d.measureText(text).width;
}

/** wrap breaks text into lines no wider than max: after spaces, commas and separators, else anywhere. */
function wrap(text, max, bold) {
  const lines = [];
  let line = "";
  for (const token of text.split(/(?<=[\s,/_-])/)) {
    if (measure(line + token, bold) <= max) { line += token; continue; }
    if (line.trim()) lines.push(line.trimEnd());
    line = token.trimStart();
    while (measure(line, bold) > max && line.length > 1) {
      let n = line.length - 1;
      while (n > 1 && measure(line.slice(0, n), bold) > max) n--;
      lines.push(line.slice(0, n));
      line = line.slice(n);
    }
  }
  if (line.trim() || lines.length === 0) lines.push(line.trimEnd());
  return lines;
}

// fit cuts a line that only repeats what the tooltip says (a status) to its node's width.
function fit(text, max, bold) {
  if (measure(text, bold) <= max) return text;
  let n = text.length;
  while (n > 1 && measure(text.slice(0, n) + "\u2026", bold) > max) n--;
  return text.slice(0, n) + "\u2026";
}

function statusText(j) {
  const short = j.waiting && WAIT_WORDS[j.waiting.code];
  return j.status + (j.attempt > 1 ? ` (attempt ${j.attempt})` : "") + (short ? ` \u00b7 ${short}` : "");
}

function tooltip(j) {
  return `${name(j)}: ${j.status}${j.waiting ? `; ${j.waiting.message}` : ""}`;
}

/** aggregate counts a matrix's instances by state: its words, its colour and the bar's parts. */
export function aggregate(jobs) {
  const counts = new Map();
  for (const j of jobs) counts.set(j.status, (counts.get(j.status) || 0) + 1);
  const order = [...COUNT_ORDER, ...[...counts.keys()].filter((k) => !COUNT_ORDER.includes(k))];
  const parts = order.filter((st) => counts.has(st)).map((st) => ({ status: st, n: counts.get(st) }));
  const status = WORST.find((st) => counts.has(st)) || (parts[0] ? parts[0].status : "pending");
  const text = parts.map((p) => `${p.n} ${COUNT_WORDS[p.status] || p.status}`).join(", ");
  return { status, parts, text, failed: jobs.filter((j) => j.status === "failed") };
}

/**
 * draw returns the graph of jobs: el, to put in the page (the SVG in a box that scrolls
 * sideways when it must, with a hint that says so), and update(jobs), which recolours it.
 * A job's node is a link to its job page; a matrix's node is a button that opens it in
 * place (aria-expanded), and links to its first failed instance when one failed.
 */
export function draw(initialJobs) {
  let jobs = initialJobs, byKey = new Map(jobs.map((j) => [j.key, j]));
  let model = units(jobs);
  const expanded = new Set();
  const svg = s("svg", { class: "dag", role: "group", "aria-label": "Job graph: jobs in columns by their needs" });
  const wrapEl = h("div", { class: "dag-wrap" }, svg);
  const frame = h("div", { class: "dag-frame" }, wrapEl);
  const hint = h("p", { class: "dag-hint", hidden: true }, "The graph is wider than the window: scroll it sideways \u2192");
  const legend = h("p", { class: "dag-legend muted" },
    "Point at or focus a job to see what it needs (dashed) and what needs it. The arrow keys move between jobs; a click or Enter opens a matrix.");
  const el = h("div", { class: "dag-box" }, hint, frame, legend);

  let nodes = [];  // what render drew: { vid, unit, jobs, el, apply }
  let size = "";   // the node width and gap the drawing was made for
  let hovered = null;

  // available is the width the graph has. Before the box is in the page it is worked out
  // from the page's main column, so that the first drawing is already the right one.
  const available = () => {
    let w = wrapEl.clientWidth;
    const main = document.querySelector("main");
    if (!w && main && main.clientWidth) {
      const cs = getComputedStyle(main);
      w = main.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) - 2; // the wrap's border
    }
    if (w > 0) return w - 8; // the wrap's padding
    return Math.max(320, Math.min(window.innerWidth, 1400) - 60);
  };

  // dims is the node width and the gap between columns for a box width wide: the widest
  // nodes that let every column show, down to FIT_MIN_W before the graph scrolls instead.
  function dims(width, cols) {
    const narrow = width < NARROW;
    const minW = narrow ? NARROW_MIN_W : MIN_W;
    const n = Math.max(1, cols);
    const fit = (gap) => Math.floor((width - PAD * 2 - (n - 1) * gap) / n);
    for (const gap of narrow ? [40, 32] : [GAP, MIN_GAP]) {
      if (fit(gap) >= minW) return { w: Math.min(MAX_W, fit(gap)), gap };
    }
    const gap = narrow ? 32 : MIN_GAP;
    if (fit(gap) >= FIT_MIN_W) return { w: fit(gap), gap };
    return { w: minW, gap };
  }

  function render() {
    const active = document.activeElement;
    const focusVid = active && svg.contains(active) && active.dataset ? active.dataset.vid : null;
    const { cols, edges } = columns(model.list);
    const { w, gap } = dims(available(), cols.length);
    size = `${w}/${gap}`;
    while (svg.firstChild) svg.firstChild.remove();
    nodes = [];
    const edgesG = s("g", { class: "edges", "aria-hidden": "true" });
    const nodesG = s("g", { class: "nodes" });
    svg.append(edgesG, nodesG);
    const colX = (c) => PAD + c * (w + gap);
    const anchor = new Map(); // unit -> box its edges meet
    let bottom = PAD;
    let col = 0;
    // laneFrom is the height at which a lane's edge comes in from the column before.
    const laneFrom = (lane) => {
      const k = lane.lane.lanes.indexOf(lane);
      if (k > 0) return lane.lane.lanes[k - 1].y;
      const b = anchor.get(lane.lane.from);
      return b.y + Math.min(b.h, 60) / 2;
    };
    cols.forEach((items, c) => {
      col = c;
      items = [...items];
      let y = PAD, lastLane = false;
      for (let i = 0; i < items.length; i++) {
        const it = items[i];
        const x = colX(c);
        // Lanes that come from above an open matrix, and would run below all of its
        // instances, pass above it instead: their edges would dive down its length and
        // climb back.
        if (it.unit && it.unit.group && expanded.has(it.unit.id) && !it.lifted) {
          it.lifted = true;
          const lift = items.slice(i + 1).filter((l) => l.lane && laneFrom(l) <= y + 60);
          if (lift.length) {
            items = [...items.slice(0, i), ...lift, ...items.slice(i).filter((l) => !lift.includes(l))];
            i--;
            continue;
          }
        }
        if (it.lane) {
          // Lanes side by side are closer than nodes are.
          if (lastLane) y -= ROW_GAP - LANE_GAP;
          it.y = y + 1;
          y += 2 + ROW_GAP;
          lastLane = true;
          continue;
        }
        lastLane = false;
        const u = it.unit;
        if (!u.group) {
          const n = jobNode(u.jobs[0], u, x, y, w, u.name);
          anchor.set(u, n.box);
          y += n.box.h + ROW_GAP;
          continue;
        }
        const open = expanded.has(u.id);
        const head = groupNode(u, x, y, w, open);
        anchor.set(u, head.box);
        const top = y;
        y += head.box.h + (open ? 6 : ROW_GAP);
        if (open) {
          for (const j of u.jobs) {
            const n = jobNode(j, u, x + INDENT, y, w - INDENT, u.labels.get(j.key), true);
            y += n.box.h + 6;
          }
          const fr = s("rect", { class: "group-frame", x: x - 4, y: top - 4, width: w + 8, height: y - top + 2, rx: 8 });
          nodesG.insertBefore(fr, head.el);
          y += ROW_GAP - 2;
        }
      }
      bottom = Math.max(bottom, y - ROW_GAP);
    });

    // jobNode draws a job; an instance of an open matrix is named by its matrix values,
    // in regular weight, under its matrix's name in bold.
    function jobNode(j, u, x, y, width, label, values) {
      const lines = wrap(label, width - 2 * TX, !values);
      const hgt = 6 + LINE * (lines.length + 1) + 8;
      const title = s("title");
      const rect = s("rect", { x, y, width, height: hgt, rx: 6 });
      const nameText = s("text", { x: x + TX, y: y + 6 + LINE - 3, class: values ? "node-name values" : "node-name" },
        lines.map((l, i) => s("tspan", { x: x + TX, dy: i ? LINE : 0 }, l)));
      const status = s("text", { x: x + TX, y: y + 6 + LINE * (lines.length + 1) - 3, class: "node-status" });
      const a = s("a", { href: "/jobs/" + j.id, class: "node", dataset: { key: j.key, vid: "job:" + j.key } }, title, rect, nameText, status);
      nodesG.append(a);
      const apply = () => {
        const cur = byKey.get(j.key) || j;
        a.dataset.status = cur.status;
        a.setAttribute("class", "node st-" + cur.status);
        a.dataset.waiting = cur.waiting ? cur.waiting.code : "";
        // Why a job waits fits the node only as a word or two; the sentence is its
        // tooltip and what a screen reader says.
        a.setAttribute("aria-label", tooltip(cur));
        title.textContent = tooltip(cur);
        status.textContent = fit(statusText(cur), width - 2 * TX, false);
        return true;
      };
      apply();
      const n = { vid: "job:" + j.key, unit: u, jobs: [j], el: a, apply, col, box: { x, y, w: width, h: hgt } };
      nodes.push(n);
      return n;
    }

    function groupNode(u, x, y, width, open) {
      const agg = aggregate(u.jobs.map((j) => byKey.get(j.key) || j));
      const head = wrap(`${open ? "\u25be" : "\u25b8"} ${u.title} \u00d7${u.jobs.length}`, width - 2 * TX, true);
      const sumLines = Math.max(2, wrap(agg.text, width - 2 * TX, false).length);
      const failLines = open || !agg.failed.length ? 0 : wrap(failedLabel(u, agg.failed), width - 2 * TX, true).length;
      const barY = y + 6 + LINE * (head.length + sumLines) + 2;
      const hgt = barY - y + 6 + (failLines ? 4 + LINE * failLines : 0) + 8;
      const title = s("title");
      const rect = s("rect", { x, y, width, height: hgt, rx: 6 });
      const headText = s("text", { x: x + TX, y: y + 6 + LINE - 3, class: "node-name" },
        head.map((l, i) => s("tspan", { x: x + TX, dy: i ? LINE : 0 }, l)));
      const sum = s("text", { x: x + TX, y: y + 6 + LINE * (head.length + 1) - 3, class: "group-summary" });
      const bar = s("g", { class: "group-bar" });
      const g = s("g", {
        class: "node group", role: "button", tabindex: "0", "aria-expanded": open ? "true" : "false",
        dataset: { group: u.name, vid: u.id },
      }, title, rect, headText, sum, bar);
      g.addEventListener("click", () => toggle(u));
      g.addEventListener("keydown", (e) => {
        if (e.key === "Enter" || e.key === " ") {
          e.preventDefault();
          toggle(u);
        }
      });
      nodesG.append(g);
      let link = null, linkText = null;
      if (failLines) {
        linkText = s("text", { x: x + TX, y: barY + 6 + 4 + LINE - 3 });
        link = s("a", { class: "failed-link" }, linkText);
        nodesG.append(link);
      }
      const apply = () => {
        const cur = u.jobs.map((j) => byKey.get(j.key) || j);
        const a = aggregate(cur);
        const lines = wrap(a.text, width - 2 * TX, false);
        const wantFail = !open && a.failed.length > 0;
        if (lines.length > sumLines || wantFail !== !!link) return false;
        if (link && wrap(failedLabel(u, a.failed), width - 2 * TX, true).length !== failLines) return false;
        g.dataset.status = a.status;
        g.setAttribute("class", "node group st-" + a.status);
        const what = `${u.title}, a matrix of ${u.jobs.length} jobs: ${a.text}`;
        g.setAttribute("aria-label", `${what}. ${open ? "Hide" : "Show"} its jobs`);
        title.textContent = what;
        sum.replaceChildren(...lines.map((l, i) => s("tspan", { x: x + TX, dy: i ? LINE : 0 }, l)));
        bar.replaceChildren();
        let bx = x + TX;
        const bw = width - 2 * TX;
        for (const p of a.parts) {
          const pw = (bw * p.n) / cur.length;
          bar.append(s("rect", { class: "seg st-" + p.status, x: bx, y: barY, width: Math.max(pw, 0), height: 6 }));
          bx += pw;
        }
        if (link) {
          const first = a.failed[0];
          link.setAttribute("href", "/jobs/" + first.id);
          link.setAttribute("aria-label", `Failed: ${name(first)}` + (a.failed.length > 1 ? `, and ${a.failed.length - 1} more failed` : ""));
          link.dataset.key = first.key;
          linkText.replaceChildren(...wrap(failedLabel(u, a.failed), width - 2 * TX, true)
            .map((l, i) => s("tspan", { x: x + TX, dy: i ? LINE : 0 }, l)));
        }
        return true;
      };
      apply();
      const n = { vid: u.id, unit: u, jobs: u.jobs, el: g, link, apply, col, box: { x, y, w: width, h: hgt } };
      nodes.push(n);
      return n;
    }

    // Edges go between units. Each meets its node at a port of its own, ordered by where
    // the edge comes from or goes, so that edges into one node never merge; an edge that
    // skips columns runs along its lanes.
    const colOf = new Map();
    cols.forEach((col, c) => col.forEach((it) => { if (it.unit) colOf.set(it.unit, c); }));
    const mid = (b) => b.y + Math.min(b.h, 60) / 2;
    const ports = (side) => {
      const by = new Map();
      for (const e of edges) (by.get(e[side]) || by.set(e[side], []).get(e[side])).push(e);
      for (const [u, es] of by) {
        // where the edge goes next from this end: its nearest lane, else its other node
        const toward = (e) => side === "from"
          ? (e.lanes.length ? e.lanes[0].y : mid(anchor.get(e.to)))
          : (e.lanes.length ? e.lanes[e.lanes.length - 1].y : mid(anchor.get(e.from)));
        es.sort((p, q) => toward(p) - toward(q) || colOf.get(p[side === "from" ? "to" : "from"]) - colOf.get(q[side === "from" ? "to" : "from"]));
        const b = anchor.get(u);
        const lo = b.y + 8, hi = b.y + Math.min(b.h, 60) - 8;
        es.forEach((e, i) => { e[side === "from" ? "y1" : "y2"] = es.length === 1 ? (lo + hi) / 2 : lo + (i * (hi - lo)) / (es.length - 1); });
      }
    };
    ports("from");
    ports("to");
    const curve = (xa, ya, xb, yb) => {
      const mx = (xa + xb) / 2;
      return ` C${mx},${ya} ${mx},${yb} ${xb},${yb}`;
    };
    for (const e of edges) {
      const c1 = colOf.get(e.from), c2 = colOf.get(e.to);
      let x = colX(c1) + w, y = e.y1;
      let d = `M${x},${y}`;
      e.lanes.forEach((lane, i) => {
        const c = c1 + 1 + i;
        d += curve(x, y, colX(c), lane.y) + ` L${colX(c) + w},${lane.y}`;
        x = colX(c) + w;
        y = lane.y;
      });
      d += curve(x, y, colX(c2), e.y2);
      edgesG.append(s("path", { d, dataset: { from: e.from.id, to: e.to.id } }));
    }

    const width = PAD * 2 + cols.length * w + Math.max(0, cols.length - 1) * gap;
    const height = bottom + PAD;
    svg.setAttribute("width", width);
    svg.setAttribute("height", height);
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    overflow();
    if (focusVid) {
      const back = svg.querySelector(`[data-vid="${CSS.escape(focusVid)}"]`);
      if (back) back.focus({ preventScroll: true });
    }
    if (hovered) highlight(nodes.find((n) => n.vid === hovered) || null);
  }

  function failedLabel(u, failed) {
    return `\u2717 ${u.labels.get(failed[0].key)}` + (failed.length > 1 ? ` (+${failed.length - 1} failed)` : "");
  }

  function toggle(u) {
    if (expanded.has(u.id)) expanded.delete(u.id);
    else expanded.add(u.id);
    render();
  }

  // related is what the jobs of node n need and what needs them, as sets of job keys.
  function related(n) {
    const keys = new Set(n.jobs.map((j) => j.key));
    const needs = new Set(), deps = new Set();
    for (const j of n.jobs) for (const k of (byKey.get(j.key) || j).needs || []) if (!keys.has(k)) needs.add(k);
    for (const j of jobs) if (!keys.has(j.key) && (j.needs || []).some((k) => keys.has(k))) deps.add(j.key);
    return { needs, deps };
  }

  // The arrow keys move the focus between nodes: up and down in a column, left to a job
  // the node needs and right to one that needs it (else to the nearest node there).
  wrapEl.addEventListener("keydown", (e) => {
    const step = { ArrowUp: [0, -1], ArrowDown: [0, 1], ArrowLeft: [-1, 0], ArrowRight: [1, 0] }[e.key];
    const n = step && !e.altKey && !e.ctrlKey && !e.metaKey ? nodeOf(e.target) : null;
    if (!n) return;
    const [dc, dr] = step;
    let to = null;
    if (dr) {
      const col = nodes.filter((m) => m.col === n.col).sort((a, b) => a.box.y - b.box.y);
      to = col[col.indexOf(n) + dr] || null;
    } else {
      const there = nodes.filter((m) => m.col === n.col + dc);
      const { needs, deps } = related(n);
      const want = dc < 0 ? needs : deps;
      const linked = there.filter((m) => m.jobs.some((j) => want.has(j.key)));
      const cy = n.box.y + n.box.h / 2;
      const near = (list) => list.sort((a, b) => Math.abs(a.box.y + a.box.h / 2 - cy) - Math.abs(b.box.y + b.box.h / 2 - cy))[0];
      to = near(linked.length ? linked : there) || null;
    }
    if (to) {
      e.preventDefault();
      to.el.focus();
    }
  });

  // highlight lights up node n, the nodes it needs and the nodes that need it, with the
  // edges between them, and dims the rest; null puts everything back.
  function highlight(n) {
    hovered = n ? n.vid : null;
    svg.classList.toggle("hl", !!n);
    for (const m of nodes) {
      m.el.classList.remove("hl-self", "hl-need", "hl-dep", "dim");
      if (m.link) m.link.classList.remove("dim");
    }
    for (const p of svg.querySelectorAll(".edges path.hl")) p.classList.remove("hl");
    if (!n) return;
    const { needs, deps } = related(n);
    const self = n.unit;
    for (const m of nodes) {
      if (m === n) { m.el.classList.add("hl-self"); continue; }
      const has = (set) => m.jobs.some((j) => set.has(j.key));
      if (has(needs)) m.el.classList.add("hl-need");
      else if (has(deps)) m.el.classList.add("hl-dep");
      // An open matrix stays in view with its head, and its head with each instance.
      else if (m.vid !== self.id && !(n.unit.group && n.vid === self.id && m.unit === self)) {
        m.el.classList.add("dim");
        if (m.link) m.link.classList.add("dim");
      }
    }
    const needUnits = new Set([...needs].map((k) => model.unitOf.get(k)));
    const depUnits = new Set([...deps].map((k) => model.unitOf.get(k)));
    for (const p of svg.querySelectorAll(".edges path")) {
      const from = p.dataset.from, to = p.dataset.to;
      const lit = (to === self.id && [...needUnits].some((u) => u.id === from)) ||
        (from === self.id && [...depUnits].some((u) => u.id === to));
      if (lit) {
        p.classList.add("hl");
        p.parentNode.append(p); // drawn over the dimmed ones
      }
    }
  }

  const nodeOf = (target) => {
    const t = target && target.closest ? target.closest("[data-vid]") : null;
    return t ? nodes.find((n) => n.el === t) || null : null;
  };
  svg.addEventListener("pointerover", (e) => highlight(nodeOf(e.target)));
  svg.addEventListener("pointerleave", () => highlight(null));
  // On the wrap, not the SVG: Chromium lets Tab stop on an SVG element that listens for focus.
  wrapEl.addEventListener("focusin", (e) => highlight(nodeOf(e.target)));
  wrapEl.addEventListener("focusout", (e) => { if (!svg.contains(e.relatedTarget)) highlight(null); });

  // overflow shows the hint and the shade on the right while part of the graph is out of
  // the box, as it is in a narrow window.
  function overflow() {
    const more = wrapEl.scrollWidth > wrapEl.clientWidth + 1;
    hint.hidden = !more || wrapEl.clientWidth === 0;
    frame.classList.toggle("more-right", more && wrapEl.scrollLeft + wrapEl.clientWidth < wrapEl.scrollWidth - 1);
    frame.classList.toggle("more-left", more && wrapEl.scrollLeft > 1);
  }
  wrapEl.addEventListener("scroll", overflow, { passive: true });
  if (typeof ResizeObserver === "function") {
    new ResizeObserver(() => {
      if (!wrapEl.isConnected) return; // not in the page (yet, or any more)
      const { w, gap } = dims(available(), columns(model.list).cols.length);
      if (`${w}/${gap}` !== size) render();
      else overflow();
    }).observe(wrapEl);
  }

  const update = (list) => {
    const same = list.length === jobs.length && list.every((j) => byKey.has(j.key));
    jobs = list;
    byKey = new Map(list.map((j) => [j.key, j]));
    if (!same) {
      model = units(jobs);
      render();
      return;
    }
    for (const n of nodes) {
      if (!n.apply()) {
        render();
        return;
      }
    }
    if (hovered) highlight(nodes.find((n) => n.vid === hovered) || null);
  };
  render();
  return { el, svg, update };
}
