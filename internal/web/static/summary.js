// A job's summary: the HTML the API rendered from its steps' $GITHUB_STEP_SUMMARY, put
// into the page element by element. The API's HTML holds nothing that runs already
// (internal/markdown); this is the second lock. The HTML is parsed in a document of its
// own, where nothing runs or loads, and only known elements and attributes are made
// anew in the page: anything else keeps its text and nothing more. Headings step down
// two levels, so the page keeps its one h1 and its own h2s.
import { h } from "./dom.js";

// The elements a summary may have, with the attributes each keeps.
const KEEP = {
  a: ["href"], b: [], blockquote: [], br: [], code: [], dd: [], del: [], details: ["open"], div: [], dl: [], dt: [],
  em: [], hr: [], i: [], img: ["src", "alt"], input: ["type", "checked"], ins: [], kbd: [], li: [], mark: [], ol: ["start"],
  p: [], pre: [], q: [], s: [], samp: [], small: [], span: [], strike: [], strong: [], sub: [], summary: [], sup: [],
  table: [], tbody: [], td: ["align"], tfoot: [], th: ["align"], thead: [], tr: [], tt: [], ul: [], var: [],
};
const HEADINGS = { h1: "h3", h2: "h4", h3: "h5", h4: "h6", h5: "h6", h6: "h6" };
const ALIGN = new Set(["left", "center", "right"]);

/** summaryContent makes the nodes of a summary from the API's HTML of it. */
export function summaryContent(html) {
  const doc = new DOMParser().parseFromString(html, "text/html");
  const out = h("div", { class: "markdown" });
  for (const n of doc.body.childNodes) copy(n, out);
  return out;
}

function copy(node, parent) {
  if (node.nodeType === Node.TEXT_NODE) {
    parent.append(document.createTextNode(node.data));
    return;
  }
  if (node.nodeType !== Node.ELEMENT_NODE) return;
  const tag = node.localName;
  let el;
  if (HEADINGS[tag]) {
    el = document.createElement(HEADINGS[tag]);
  } else if (tag === "img") {
    el = image(node);
    if (el) parent.append(el);
    return;
  } else if (Object.hasOwn(KEEP, tag)) {
    el = document.createElement(tag);
    for (const name of KEEP[tag]) {
      const v = node.getAttribute(name);
      if (v !== null) keep(el, tag, name, v);
    }
    if (tag === "input") {
      if (node.getAttribute("type") !== "checkbox") return;
      el.disabled = true;
    }
    if (tag === "a" && el.hasAttribute("href")) el.setAttribute("rel", "nofollow noopener noreferrer");
  } else {
    // Unknown here: its text, not itself.
    for (const c of node.childNodes) copy(c, parent);
    return;
  }
  for (const c of node.childNodes) copy(c, el);
  parent.append(el);
}

// keep sets one attribute the element may have, when its value is one it may have.
function keep(el, tag, name, v) {
  switch (name) {
    case "href":
      if (v.trim() !== "" && safeURL(v)) el.setAttribute("href", v);
      return;
    case "align":
      if (ALIGN.has(v)) el.setAttribute("align", v);
      return;
    case "start":
      if (/^\d{1,9}$/.test(v)) el.setAttribute("start", v);
      return;
    case "type":
      el.setAttribute("type", "checkbox");
      return;
    case "checked":
      el.checked = true;
      return;
    case "open":
      el.open = true;
      return;
  }
}

// safeURL is a link a summary may hold: http(s), mailto, or one of this page's.
function safeURL(v) {
  try {
    const u = new URL(v, location.href);
    return u.protocol === "https:" || u.protocol === "http:" || u.protocol === "mailto:";
  } catch {
    return false;
  }
}

// image is an image of the summary as the page shows it: one of data: in place (the
// page's CSP allows no other), any other as a link to it, so that opening a run never
// fetches from a host a step chose.
function image(node) {
  const src = node.getAttribute("src") || "", alt = node.getAttribute("alt") || "";
  if (/^data:image\/(png|gif|jpeg|webp);/i.test(src)) return h("img", { src, alt });
  if (src.trim() === "" || !safeURL(src)) return alt ? document.createTextNode(alt) : null;
  return h("a", { href: src, rel: "nofollow noopener noreferrer", class: "summary-image" }, "image: " + (alt || src));
}
