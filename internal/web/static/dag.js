// The run's DAG as an SVG: jobs in columns by depth (a job sits one column right of the
// deepest job it needs), edges from each need to the job that waits on it.
import { s } from "./dom.js";

const NODE_W = 180, NODE_H = 48, COL_GAP = 70, ROW_GAP = 16, PAD = 12;

// WAIT_WORDS name, on a node, the reasons to wait that are worth a look: the others
// (needs, a turn in the queue) are how every run goes, and "retrying" says its own.
const WAIT_WORDS = { no_worker: "no worker", concurrency: "group held" };

/** layout gives each job a column and a row; jobs are given in plan order. */
export function layout(jobs) {
  const byKey = new Map(jobs.map((j) => [j.key, j]));
  const depth = new Map();
  const visiting = new Set();
  const depthOf = (j) => {
    if (depth.has(j.key)) return depth.get(j.key);
    if (visiting.has(j.key)) return 0; // the planner rejects cycles; stay safe anyway
    visiting.add(j.key);
    let d = 0;
    for (const n of j.needs || []) {
      const dep = byKey.get(n);
      if (dep) d = Math.max(d, depthOf(dep) + 1);
    }
    visiting.delete(j.key);
    depth.set(j.key, d);
    return d;
  };
  const columns = [];
  for (const j of jobs) {
    const d = depthOf(j);
    (columns[d] ||= []).push(j);
  }
  // Order each column by the mean row of the jobs it needs (plan order on ties), so
  // edges cross less.
  const pos = new Map();
  columns.forEach((col, c) => {
    if (c > 0) {
      const mean = (j) => {
        const rows = (j.needs || []).filter((n) => pos.has(n)).map((n) => pos.get(n).row);
        return rows.length ? rows.reduce((a, b) => a + b, 0) / rows.length : 0;
      };
      const order = new Map(col.map((j, i) => [j.key, [mean(j), i]]));
      col.sort((a, b) => order.get(a.key)[0] - order.get(b.key)[0] || order.get(a.key)[1] - order.get(b.key)[1]);
    }
    col.forEach((j, r) => pos.set(j.key, { col: c, row: r }));
  });
  const rows = Math.max(1, ...columns.map((c) => c.length));
  return { pos, cols: columns.length, rows, sizes: columns.map((c) => c.length) };
}

function xy(p) {
  return { x: PAD + p.col * (NODE_W + COL_GAP), y: PAD + p.row * (NODE_H + ROW_GAP) };
}

// edge is the path from a need's node to the node of the job waiting on it. An edge
// that skips columns runs along a row that is free in the columns between, or below
// them, rather than under a node it has nothing to do with.
function edge(fromPos, toPos, sizes) {
  const from = xy(fromPos), to = xy(toPos);
  const x1 = from.x + NODE_W, y1 = from.y + NODE_H / 2, x2 = to.x, y2 = to.y + NODE_H / 2;
  if (toPos.col - fromPos.col <= 1) {
    const mx = (x1 + x2) / 2;
    return `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`;
  }
  const between = sizes.slice(fromPos.col + 1, toPos.col);
  const free = (row) => between.every((n) => n <= row);
  let y;
  if (free(fromPos.row)) y = y1;
  else if (free(toPos.row)) y = y2;
  else y = PAD + Math.max(...between) * (NODE_H + ROW_GAP) - ROW_GAP / 2;
  const a = x1 + COL_GAP, b = x2 - COL_GAP;
  return `M${x1},${y1} C${x1 + COL_GAP / 2},${y1} ${x1 + COL_GAP / 2},${y} ${a},${y} L${b},${y} ` +
    `C${x2 - COL_GAP / 2},${y} ${x2 - COL_GAP / 2},${y2} ${x2},${y2}`;
}

function label(text, max) {
  return text.length > max ? text.slice(0, max - 1) + "\u2026" : text;
}

/**
 * draw returns the SVG for jobs. Each node is a link to its job page (reachable with Tab)
 * whose status is written in it, not only coloured. update(jobs) recolours the nodes.
 */
export function draw(jobs) {
  const { pos, cols, rows, sizes } = layout(jobs);
  const width = PAD * 2 + cols * NODE_W + (cols - 1) * COL_GAP;
  const height = PAD * 2 + rows * NODE_H + (rows - 1) * ROW_GAP + ROW_GAP / 2;
  const svg = s("svg", {
    class: "dag", width, height, viewBox: `0 0 ${width} ${height}`, role: "group",
    "aria-label": "Job graph: jobs in columns by their needs",
  });
  const edges = s("g", { class: "edges", "aria-hidden": "true" });
  svg.append(edges);
  for (const j of jobs) {
    const to = xy(pos.get(j.key));
    for (const n of j.needs || []) {
      if (!pos.has(n)) continue;
      edges.append(s("path", { d: edge(pos.get(n), pos.get(j.key), sizes), dataset: { from: n, to: j.key } }));
    }
  }
  const nodes = new Map();
  for (const j of jobs) {
    const p = xy(pos.get(j.key));
    const status = s("text", { x: p.x + 10, y: p.y + 38, class: "node-status" });
    const rect = s("rect", { x: p.x, y: p.y, width: NODE_W, height: NODE_H, rx: 6 });
    const title = s("title");
    const a = s("a", { href: "/jobs/" + j.id, class: "node", dataset: { key: j.key } },
      title, rect,
      s("text", { x: p.x + 10, y: p.y + 19, class: "node-name" }, label(j.display_name || j.key, 22)),
      status);
    nodes.set(j.key, { a, status, title });
    svg.append(a);
  }
  const update = (list) => {
    for (const j of list) {
      const n = nodes.get(j.key);
      if (!n) continue;
      n.a.dataset.status = j.status;
      n.a.setAttribute("class", "node st-" + j.status);
      // Why a job waits fits the node only as a word or two; the sentence is its tooltip
      // and what a screen reader says.
      const why = j.waiting ? `; ${j.waiting.message}` : "";
      n.a.dataset.waiting = j.waiting ? j.waiting.code : "";
      n.a.setAttribute("aria-label", `${j.display_name || j.key}: ${j.status}${why}`);
      n.title.textContent = `${j.display_name || j.key}: ${j.status}${why}`;
      const short = j.waiting && WAIT_WORDS[j.waiting.code];
      n.status.textContent = j.status + (j.attempt > 1 ? ` (attempt ${j.attempt})` : "") + (short ? ` \u00b7 ${short}` : "");
    }
  };
  update(jobs);
  return { svg, update };
}
