// ANSI escape sequences in log lines: SGR (colours, bold, dim, italic, underline,
// inverse) becomes spans with classes; every other escape sequence is dropped. Text is
// only ever put in text nodes.

const NAMES = ["black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"];

// ESC [ params final | ESC ] ... BEL/ST | ESC + one char | lone C0 controls but tab.
// eslint-disable-next-line no-control-regex
const ESCAPES = /\x1b\[([0-9;:?]*)([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-Z\\-_]?|[\x00-\x08\x0b-\x1a\x1c-\x1f\x7f]/g;

/** newState is the style at the start of a log: plain. */
export function newState() {
  return { fg: null, bg: null, bold: false, dim: false, italic: false, underline: false, inverse: false };
}

/** strip returns the text without escape sequences, for searching and copying. */
export function strip(text) {
  return text.replace(ESCAPES, "");
}

// 256-colour palette entries 16..255 as CSS colours.
function xterm(n) {
  if (n < 16) return null;
  if (n >= 232) {
    const v = 8 + (n - 232) * 10;
    return `rgb(${v},${v},${v})`;
  }
  n -= 16;
  const c = [Math.floor(n / 36), Math.floor(n / 6) % 6, n % 6].map((x) => (x ? 55 + x * 40 : 0));
  return `rgb(${c[0]},${c[1]},${c[2]})`;
}

// colour reads an extended colour (38;5;n or 38;2;r;g;b) from params at i; it returns
// the colour and how many params it used.
function extended(params, i) {
  if (params[i + 1] === 5 && params.length > i + 2) {
    const n = params[i + 2];
    if (n < 8) return [{ cls: NAMES[n] }, 2];
    if (n < 16) return [{ cls: "bright-" + NAMES[n - 8] }, 2];
    return [{ css: xterm(Math.min(n, 255)) }, 2];
  }
  if (params[i + 1] === 2 && params.length > i + 4) {
    const [r, g, b] = params.slice(i + 2, i + 5).map((x) => Math.max(0, Math.min(255, x)));
    return [{ css: `rgb(${r},${g},${b})` }, 4];
  }
  return [null, params.length - i]; // malformed: ignore the rest
}

function sgr(state, raw) {
  const params = raw === "" ? [0] : raw.split(/[;:]/).map((x) => (x === "" ? 0 : Number(x)));
  for (let i = 0; i < params.length; i++) {
    const p = params[i];
    if (p === 0) Object.assign(state, newState());
    else if (p === 1) state.bold = true;
    else if (p === 2) state.dim = true;
    else if (p === 3) state.italic = true;
    else if (p === 4) state.underline = true;
    else if (p === 7) state.inverse = true;
    else if (p === 22) state.bold = state.dim = false;
    else if (p === 23) state.italic = false;
    else if (p === 24) state.underline = false;
    else if (p === 27) state.inverse = false;
    else if (p >= 30 && p <= 37) state.fg = { cls: NAMES[p - 30] };
    else if (p === 39) state.fg = null;
    else if (p >= 40 && p <= 47) state.bg = { cls: NAMES[p - 40] };
    else if (p === 49) state.bg = null;
    else if (p >= 90 && p <= 97) state.fg = { cls: "bright-" + NAMES[p - 90] };
    else if (p >= 100 && p <= 107) state.bg = { cls: "bright-" + NAMES[p - 100] };
    else if (p === 38 || p === 48) {
      const [c, used] = extended(params, i);
      if (p === 38) state.fg = c; else state.bg = c;
      i += used;
    }
  }
}

function styled(state, text) {
  const plain = !state.fg && !state.bg && !state.bold && !state.dim && !state.italic && !state.underline && !state.inverse;
  if (plain) return document.createTextNode(text);
  const span = document.createElement("span");
  let fg = state.fg, bg = state.bg;
  if (state.inverse) [fg, bg] = [bg || { cls: "default-bg" }, fg || { cls: "default-fg" }];
  const cls = [];
  if (fg && fg.cls) cls.push("ansi-fg-" + fg.cls);
  if (bg && bg.cls) cls.push("ansi-bg-" + bg.cls);
  if (state.bold) cls.push("ansi-bold");
  if (state.dim) cls.push("ansi-dim");
  if (state.italic) cls.push("ansi-italic");
  if (state.underline) cls.push("ansi-underline");
  if (cls.length) span.className = cls.join(" ");
  // CSSOM, not a style attribute: allowed by the page's Content-Security-Policy.
  if (fg && fg.css) span.style.color = fg.css;
  if (bg && bg.css) span.style.backgroundColor = bg.css;
  span.textContent = text;
  return span;
}

/**
 * advance applies a line's SGR sequences to state without making nodes: the log viewer
 * keeps the style at the start of each line so that it can draw any line alone.
 */
export function advance(text, state) {
  ESCAPES.lastIndex = 0;
  for (let m; (m = ESCAPES.exec(text)); ) {
    if (m[2] === "m") sgr(state, m[1]);
    if (m[0] === "") ESCAPES.lastIndex++;
  }
}

/**
 * render turns one line into nodes, reading and updating state, which carries the style
 * from one line to the next as a terminal would.
 */
export function render(text, state) {
  const out = [];
  let last = 0;
  ESCAPES.lastIndex = 0;
  for (let m; (m = ESCAPES.exec(text)); ) {
    if (m.index > last) out.push(styled(state, text.slice(last, m.index)));
    if (m[2] === "m") sgr(state, m[1]);
    last = ESCAPES.lastIndex;
    if (m[0] === "") ESCAPES.lastIndex++; // never loop on an empty match
  }
  if (last < text.length) out.push(styled(state, text.slice(last)));
  return out;
}
