// DOM helpers. Everything the app shows is built with these: text goes in as text nodes,
// never as markup, so nothing from the API or a log can inject HTML.

const SVG_NS = "http://www.w3.org/2000/svg";

function build(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") {
      el.addEventListener(k.slice(2), v);
    } else if (k === "class") {
      el.setAttribute("class", Array.isArray(v) ? v.filter(Boolean).join(" ") : v);
    } else if (k === "dataset") {
      Object.assign(el.dataset, v);
    } else if (k === "value" || k === "checked" || k === "selected") {
      el[k] = v;
    } else {
      el.setAttribute(k, v === true ? "" : String(v));
    }
  }
  append(el, children);
  return el;
}

/** append adds children (nodes, strings, numbers, arrays of them; null is skipped). */
export function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

/** h makes an HTML element: h("a", {href: "/"}, "text", child). */
export function h(tag, attrs, ...children) {
  return build(document.createElement(tag), attrs, children);
}

/** s makes an SVG element. */
export function s(tag, attrs, ...children) {
  return build(document.createElementNS(SVG_NS, tag), attrs, children);
}

/** clear removes every child of el. */
export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

/** fill replaces el's children with children (as append takes them). */
export function fill(el, ...children) {
  return append(clear(el), children);
}
