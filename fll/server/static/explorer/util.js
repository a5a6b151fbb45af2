/*
 * The explorer's small helpers: DOM and SVG builders (text always through
 * text nodes), text measuring and fitting, the keys nodes get on the page, and
 * number and time formatting. No state, no requests.
 */

const SVG_NS = "http://www.w3.org/2000/svg";
export const MAX_QUERIES = 120;          // field-graph fetches per view, so depth cannot explode
export const FIELDS_SHOWN = 24;          // fields shown per dataset box before "N more"
export const CENTER_FIELDS_SHOWN = 40;

export const FIT_ALL_ABOVE = 0.42;       // fit the whole field graph unless text would get this small

export const $ = (id) => document.getElementById(id);

export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  setAttrs(node, attrs);
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

export function svg(tag, attrs, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  setAttrs(node, attrs);
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

function setAttrs(node, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.setAttribute("class", v);
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v === true ? "" : String(v));
  }
}

export const dsKey = (ns, name) => JSON.stringify([ns, name]);
export const fieldKey = (ns, name, field) => JSON.stringify(["field", ns, name, field]);
export const nodeKey = (restId) => JSON.stringify(["node", restId]);

export const measure = (() => {
  const ctx = document.createElement("canvas").getContext("2d");
  const cache = new Map();
  return (text, font) => {
    const k = font + "\u0000" + text;
    if (!cache.has(k)) {
      ctx.font = font;
      cache.set(k, ctx.measureText(text).width);
    }
    return cache.get(k);
  };
})();
export const FONT = '13px "DejaVu Sans", system-ui, sans-serif';
export const FONT_BOLD = 'bold 13px "DejaVu Sans", system-ui, sans-serif';
export const FONT_SMALL = '11px "DejaVu Sans", system-ui, sans-serif';

export function fit(text, max, font) {
  if (measure(text, font) <= max) return text;
  let lo = 0, hi = text.length;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (measure(text.slice(0, mid) + "…", font) <= max) lo = mid; else hi = mid - 1;
  }
  return text.slice(0, lo) + "…";
}

/** Dataset names that are paths (file:/data/lake/x.csv, s3 keys) differ at their
 *  end, so keep the tail: "…/lake/customers.csv", cut at a "/" when one fits. */
export function fitName(text, max, font) {
  if (measure(text, font) <= max) return text;
  if (!text.includes("/")) return fit(text, max, font);
  let lo = 0, hi = text.length;          // the longest tail that fits after "…"
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (measure("…" + text.slice(text.length - mid), font) <= max) lo = mid; else hi = mid - 1;
  }
  let tail = text.slice(text.length - lo);
  const cut = tail.indexOf("/");
  if (cut > 0 && cut < tail.length - 1) tail = tail.slice(cut);
  return "…" + tail;
}

/** The last segment of a path-like dataset name ("customers.csv"), else the name. */
export function shortName(name) {
  const parts = String(name || "").split("/").filter(Boolean);
  return parts.length > 1 ? parts[parts.length - 1] : name;
}

export function isIndirect(tags) {
  return !!(tags && tags.length && tags.every((t) => t.type === "INDIRECT"));
}

export function plural(n, one, many) { return `${n} ${n === 1 ? one : (many || one + "s")}`; }

export function fmtTime(seconds) {
  if (seconds === null || seconds === undefined) return "";
  const d = new Date(seconds * 1000);
  const pad = (x) => String(x).padStart(2, "0");
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}`;
}

export function ago(seconds) {
  const s = Date.now() / 1000 - seconds;
  if (s < 90) return "just now";
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  if (s < 129600) return `${Math.round(s / 3600)} h ago`;
  return `${Math.round(s / 86400)} days ago`;
}
