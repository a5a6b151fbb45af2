/*
 * The page's state and its two sources: the URL hash (the single source of
 * truth for what is shown: `go` changes it, a hashchange renders) and the
 * REST API of the server (`api`, answers cached for 5 s; the token is added by
 * auth.js's window.fllFetch). Only this module assigns the state; the others
 * read its live bindings.
 */
import { $, fmtTime } from "./util.js";

const RANGES = {
  hour: { start: "now-1h", text: "the last hour", before: ["now-2h", "now-1h"] },
  day: { start: "now-1d", text: "the last day", before: ["now-2d", "now-1d"] },
  week: { start: "now-7d", text: "the last week", before: ["now-14d", "now-7d"] },
  all: { start: "0", text: "all time", before: null },
};
const DEFAULTS = { view: "overview", dir: "both", depth: "1", range: "week", collapse: "0",
  ind: "show", cmp: "none" };
const HASH_KEYS = ["ns", "ds", "view", "field", "dir", "depth", "range", "start", "end",
  "filter", "collapse", "ind", "sel", "cmp"];

// ---------------------------------------------------------------- the page's state
/** What the URL asks for (`readHash`), read again by every render. */
export let state = {};
/** Every dataset of the store, [{namespace, name, aliases?}], read once. */
export let datasets = [];
/** Bumped by every render: the answers of a view left behind are dropped. */
export let renderToken = 0;
/** What the current view drew, for its panels: {kind, graph, raw?} or null. */
export let current = null;
let renderer = () => {};

/** The page's render (explorer.js registers it); a view calls `render()` to redraw. */
export function onRender(fn) { renderer = fn; }
export function render() { return renderer(); }
/** A render begins: the state is read from the URL; returns the render's token. */
export function beginRender() {
  state = readHash();
  current = null;
  return ++renderToken;
}
export function setDatasets(list) { datasets = list; }
export function setCurrent(drawn) { current = drawn; }

// ---------------------------------------------------------------- URL state
function readHash() {
  const p = new URLSearchParams(location.hash.replace(/^#/, ""));
  const s = { ...DEFAULTS };
  for (const k of HASH_KEYS) if (p.has(k)) s[k] = p.get(k);
  if (!["overview", "fields", "field"].includes(s.view)) s.view = "overview";
  if (s.view === "field" && !s.field) s.view = "fields";
  if (!["both", "backward", "forward"].includes(s.dir)) s.dir = "both";
  if (!["show", "hide"].includes(s.ind)) s.ind = "show";
  if (!["none", "prev"].includes(s.cmp)) s.cmp = "none";
  const depth = parseInt(s.depth, 10);
  s.depth = String(Number.isFinite(depth) ? Math.min(5, Math.max(1, depth)) : 1);
  if (!(s.range in RANGES) && s.range !== "custom") s.range = "week";
  if (s.range === "custom" && !(/^\d+$/.test(s.start || "") && /^\d+$/.test(s.end || ""))) {
    s.range = "week";
  }
  return s;
}

export function hashOf(s) {
  const p = new URLSearchParams();
  for (const k of HASH_KEYS) {
    const v = s[k];
    if (v === undefined || v === null || v === "") continue;
    if (DEFAULTS[k] === v && k !== "view") continue;
    if ((k === "start" || k === "end") && s.range !== "custom") continue;
    p.set(k, v);
  }
  return "#" + p.toString().replace(/\+/g, "%20");
}

/** Change the view: the hash is the single source of truth; hashchange renders. */
export function go(patch) {
  const next = { ...state, ...patch };
  for (const [k, v] of Object.entries(patch)) if (v === null) delete next[k];
  const h = hashOf(next);
  if (h === location.hash || (h === "#" && !location.hash)) render();
  else location.hash = h;
}

export function timeParams() {
  if (state.range === "custom") return { start: state.start, end: state.end };
  return { start: RANGES[state.range].start, end: "now" };
}

/** The period of the same length just before the current range, or null (all time). */
export function previousRange() {
  if (state.range === "custom") {
    const s = +state.start, e = +state.end;
    return { start: String(Math.max(0, s - (e - s))), end: String(s),
      text: `${fmtTime(Math.max(0, s - (e - s)))} – ${fmtTime(s)}` };
  }
  const before = RANGES[state.range].before;
  return before ? { start: before[0], end: before[1], text: `the ${RANGES[state.range].text.slice(9)} before` } : null;
}

export function rangeText() {
  if (state.range === "custom") {
    return `${fmtTime(+state.start)} – ${fmtTime(+state.end)}`;
  }
  return RANGES[state.range].text;
}

// ---------------------------------------------------------------- REST
class ApiError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

const cache = new Map();
export async function api(path, params) {
  const q = new URLSearchParams(params || {}).toString();
  const url = path + (q ? "?" + q : "");
  const hit = cache.get(url);
  if (hit && Date.now() - hit.at < 5000) return hit.promise;
  const promise = (async () => {
    let resp;
    try {
      resp = await window.fllFetch(url, { headers: { Accept: "application/json" } });
    } catch (e) {
      throw new ApiError(0, `could not reach the fll server (${e.message})`);
    }
    let body = null;
    try { body = await resp.json(); } catch (e) { body = null; }
    if (!resp.ok) {
      throw new ApiError(resp.status, (body && body.error) || `HTTP ${resp.status} for ${path}`);
    }
    return body;
  })();
  cache.set(url, { at: Date.now(), promise });
  promise.catch(() => cache.delete(url));
  return promise;
}

export const seg = encodeURIComponent;
export const v3 = (ns, ds) => `v3/namespaces/${seg(ns)}/datasets/${seg(ds)}`;
