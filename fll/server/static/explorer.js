/*
 * The fll lineage explorer: browse datasets, their field mappings, and one
 * field's lineage graph, from the REST API of the server that serves this file.
 *
 * Three views (the seed design's "Access Pattern"):
 *   overview  the dataset in the middle, its sources left, destinations right
 *             (GET /v3/.../fields/lineage), one edge per dataset pair;
 *   fields    the same, each dataset a box of clickable field boxes, one line
 *             per field mapping;
 *   field     one field's graph: fields as nodes, operations as edges whose
 *             name sits in a bubble (GET /v3/.../fields/{f}/lineage), backward
 *             and/or forward, followed across datasets up to `depth` hops;
 *             classification tags marked on its fields (put there, or reaching
 *             them through lineage: GET /api/v1/tags/{tag}/fields), and, when
 *             compared with the period before, the edges a lineage diff adds,
 *             removes and changes (GET /api/v1/column-lineage/diff).
 *
 * Everything the page shows is in the URL hash (namespace, dataset, view,
 * field, direction, depth, time range, filter, selection), so a link can be
 * shared and reloaded. Every query carries the time range's start and end.
 *
 * What this file must never do: load anything from another origin, build HTML
 * from strings holding data (every name goes through textContent), or write
 * to the server.
 */
"use strict";

(() => {
  const SVG_NS = "http://www.w3.org/2000/svg";
  const MAX_QUERIES = 120;          // field-graph fetches per view, so depth cannot explode
  const FIELDS_SHOWN = 24;          // fields shown per dataset box before "N more"
  const CENTER_FIELDS_SHOWN = 40;
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
  const FIT_ALL_ABOVE = 0.42;       // fit the whole field graph unless text would get this small

  const $ = (id) => document.getElementById(id);
  let state = {};
  let datasets = [];                // [{namespace, name}]
  let renderToken = 0;              // drops answers of views left behind
  const boxModes = new Map();       // dataset key -> "collapsed" | "partial" | "full" (fields view)
  let current = null;               // what the current view drew (for the panel)

  // ---------------------------------------------------------------- small helpers
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    setAttrs(node, attrs);
    for (const c of children.flat(Infinity)) {
      if (c === null || c === undefined || c === false) continue;
      node.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return node;
  }

  function svg(tag, attrs, ...children) {
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

  const dsKey = (ns, name) => JSON.stringify([ns, name]);
  const fieldKey = (ns, name, field) => JSON.stringify(["field", ns, name, field]);
  const nodeKey = (restId) => JSON.stringify(["node", restId]);

  const measure = (() => {
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
  const FONT = '13px "DejaVu Sans", system-ui, sans-serif';
  const FONT_BOLD = 'bold 13px "DejaVu Sans", system-ui, sans-serif';
  const FONT_SMALL = '11px "DejaVu Sans", system-ui, sans-serif';

  function fit(text, max, font) {
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
  function fitName(text, max, font) {
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
  function shortName(name) {
    const parts = String(name || "").split("/").filter(Boolean);
    return parts.length > 1 ? parts[parts.length - 1] : name;
  }

  function isIndirect(tags) {
    return !!(tags && tags.length && tags.every((t) => t.type === "INDIRECT"));
  }

  function plural(n, one, many) { return `${n} ${n === 1 ? one : (many || one + "s")}`; }

  function fmtTime(seconds) {
    if (seconds === null || seconds === undefined) return "";
    const d = new Date(seconds * 1000);
    const pad = (x) => String(x).padStart(2, "0");
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
      `${pad(d.getHours())}:${pad(d.getMinutes())}`;
  }

  function ago(seconds) {
    const s = Date.now() / 1000 - seconds;
    if (s < 90) return "just now";
    if (s < 5400) return `${Math.round(s / 60)} min ago`;
    if (s < 129600) return `${Math.round(s / 3600)} h ago`;
    return `${Math.round(s / 86400)} days ago`;
  }

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

  function hashOf(s) {
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
  function go(patch) {
    const next = { ...state, ...patch };
    for (const [k, v] of Object.entries(patch)) if (v === null) delete next[k];
    const h = hashOf(next);
    if (h === location.hash || (h === "#" && !location.hash)) render();
    else location.hash = h;
  }

  function timeParams() {
    if (state.range === "custom") return { start: state.start, end: state.end };
    return { start: RANGES[state.range].start, end: "now" };
  }

  /** The period of the same length just before the current range, or null (all time). */
  function previousRange() {
    if (state.range === "custom") {
      const s = +state.start, e = +state.end;
      return { start: String(Math.max(0, s - (e - s))), end: String(s),
        text: `${fmtTime(Math.max(0, s - (e - s)))} – ${fmtTime(s)}` };
    }
    const before = RANGES[state.range].before;
    return before ? { start: before[0], end: before[1], text: `the ${RANGES[state.range].text.slice(9)} before` } : null;
  }

  function rangeText() {
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
  async function api(path, params) {
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

  const seg = encodeURIComponent;
  const v3 = (ns, ds) => `v3/namespaces/${seg(ns)}/datasets/${seg(ds)}`;

  // ---------------------------------------------------------------- pan and zoom
  const zoom = { k: 1, tx: 0, ty: 0 };
  let dragged = false;

  function applyZoom() {
    $("viewport").setAttribute("transform", `translate(${zoom.tx},${zoom.ty}) scale(${zoom.k})`);
    $("view").dataset.zoom = zoom.k.toFixed(3);
  }

  function zoomAt(factor, cx, cy) {
    const k = Math.min(4, Math.max(0.04, zoom.k * factor));
    const f = k / zoom.k;
    zoom.tx = cx - (cx - zoom.tx) * f;
    zoom.ty = cy - (cy - zoom.ty) * f;
    zoom.k = k;
    applyZoom();
  }

  /** Fit the drawing into the canvas, at most ``maxK``. Below ``minK`` text gets
   *  unreadable: then zoom to ``floorK`` (default ``minK``) and centre on ``focus``
   *  (an element) instead. */
  function fitView(maxK = 1.1, minK = 0, focus = null, floorK = minK) {
    const vp = $("viewport"), canvas = $("canvas");
    if (!vp.firstChild) return;
    const box = vp.getBBox();
    const w = canvas.clientWidth, h = canvas.clientHeight;
    if (!box.width || !box.height || !w || !h) return;
    const pad = 36;
    const k = Math.max(0.04, Math.min(maxK, (w - 2 * pad) / box.width, (h - 2 * pad) / box.height));
    if (k < minK && focus) {
      const f = focus.getBBox();
      const m = focus.transform.baseVal.consolidate();
      const fx = (m ? m.matrix.e : 0) + f.x + f.width / 2, fy = (m ? m.matrix.f : 0) + f.y + f.height / 2;
      zoom.k = floorK;
      zoom.tx = w / 2 - fx * floorK;
      zoom.ty = h / 2 - fy * floorK;
      applyZoom();
      return;
    }
    zoom.k = k;
    zoom.tx = (w - box.width * k) / 2 - box.x * k;
    // tall graphs start at the top rather than the middle, so the first rows are readable
    zoom.ty = box.height * k > h - 2 * pad ? pad - box.y * k : (h - box.height * k) / 2 - box.y * k;
    applyZoom();
  }

  function initPanZoom() {
    const canvas = $("canvas");
    canvas.addEventListener("wheel", (e) => {
      e.preventDefault();
      const r = canvas.getBoundingClientRect();
      zoomAt(Math.exp(-e.deltaY * (e.deltaMode === 1 ? 0.05 : 0.0015)), e.clientX - r.left,
        e.clientY - r.top);
    }, { passive: false });
    let start = null;
    canvas.addEventListener("pointerdown", (e) => {
      if (e.button !== 0) return;
      start = { x: e.clientX, y: e.clientY, tx: zoom.tx, ty: zoom.ty, id: e.pointerId };
      dragged = false;
    });
    canvas.addEventListener("pointermove", (e) => {
      if (!start) return;
      const dx = e.clientX - start.x, dy = e.clientY - start.y;
      if (!dragged && Math.hypot(dx, dy) < 4) return;
      if (!dragged) { dragged = true; canvas.setPointerCapture(start.id); canvas.classList.add("panning"); }
      zoom.tx = start.tx + dx;
      zoom.ty = start.ty + dy;
      applyZoom();
    });
    const end = () => { start = null; canvas.classList.remove("panning"); };
    canvas.addEventListener("pointerup", end);
    canvas.addEventListener("pointercancel", end);
    // a drag must not also click what it started on
    canvas.addEventListener("click", (e) => {
      if (dragged) { e.stopPropagation(); e.preventDefault(); dragged = false; }
    }, true);
    const mid = () => [canvas.clientWidth / 2, canvas.clientHeight / 2];
    $("zoom-in").addEventListener("click", () => zoomAt(1.25, ...mid()));
    $("zoom-out").addEventListener("click", () => zoomAt(0.8, ...mid()));
    $("zoom-fit").addEventListener("click", () => fitView(1.5));
    document.addEventListener("keydown", (e) => {
      if (e.target.closest("input, select, textarea")) return;
      if (e.key === "+" || e.key === "=") zoomAt(1.25, ...mid());
      else if (e.key === "-") zoomAt(0.8, ...mid());
      else if (e.key === "0") fitView(1.5);
    });
  }

  // ---------------------------------------------------------------- tooltip
  function tip(target, build) {
    target.addEventListener("mouseenter", (e) => {
      const t = $("tooltip");
      t.replaceChildren(...[].concat(build()));
      t.hidden = false;
      placeTip(e);
    });
    target.addEventListener("mousemove", placeTip);
    target.addEventListener("mouseleave", () => { $("tooltip").hidden = true; });
  }

  function placeTip(e) {
    const t = $("tooltip");
    const x = Math.min(e.clientX + 14, window.innerWidth - t.offsetWidth - 8);
    const y = Math.min(e.clientY + 14, window.innerHeight - t.offsetHeight - 8);
    t.style.left = x + "px";
    t.style.top = y + "px";
  }

  // ---------------------------------------------------------------- view state display
  function setState(kind, message, actions) {
    const view = $("view");
    view.dataset.state = kind;
    const box = $("message");
    if (!message) { box.hidden = true; box.replaceChildren(); return; }
    box.hidden = false;
    box.className = "message " + kind;
    box.replaceChildren(...[].concat(message), actions ? el("div", { class: "actions" }, actions) : "");
  }

  function emptyState(title, why) {
    const actions = [];
    if (state.range !== "all") {
      actions.push(el("button", { type: "button", id: "widen-range", onclick: () => go({ range: "all" }) },
        "Show all time"));
    }
    setState("empty", [el("h2", { "data-testid": "empty-title" }, title), el("p", {}, why)], actions);
  }

  function errorState(err) {
    const title = err.status === 404 ? "Not in the store" : err.status === 400 ? "Bad request" :
      "Something went wrong";
    setState("error", [el("h2", {}, title), el("p", {}, err.message)]);
  }

  function clearCanvas() {
    $("viewport").replaceChildren();
    $("tooltip").hidden = true;
  }

  // ---------------------------------------------------------------- header controls
  function fillNamespaces() {
    const sel = $("namespace");
    const names = [...new Set(datasets.map((d) => d.namespace))].sort();
    sel.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
    if (!names.length) sel.append(el("option", { value: "" }, "(no namespaces)"));
    sel.value = state.ns || names[0] || "";
  }

  function searchMatches(q) {
    const low = q.trim().toLowerCase();
    const ns = $("namespace").value;
    // a dataset is found by its name or by an alias (a pipeline file's referenceName)
    const hit = (d) => !low || d.name.toLowerCase().includes(low)
      || (d.aliases || []).some((a) => a.name.toLowerCase().includes(low));
    const mine = datasets.filter((d) => d.namespace === ns && hit(d));
    const others = low ? datasets.filter((d) => d.namespace !== ns && hit(d)) : [];
    const starts = (d) => (d.name.toLowerCase().startsWith(low) ? 0 : 1);
    const order = (a, b) => starts(a) - starts(b) || a.name.localeCompare(b.name);
    return [...mine.sort(order), ...others.sort(order)].slice(0, 60);
  }

  function showSearch(open) {
    const list = $("dataset-list"), input = $("dataset-search");
    if (!open) { list.hidden = true; input.setAttribute("aria-expanded", "false"); return; }
    const matches = searchMatches(input.value === state.ds ? "" : input.value);
    list.replaceChildren(...matches.map((d, i) => el("li", {
      role: "option", "data-namespace": d.namespace, "data-dataset": d.name,
      class: i === 0 ? "active" : "",
      onmousedown: (e) => { e.preventDefault(); pick(d); },
    }, el("span", { class: "name" }, d.name),
    (d.aliases || []).length ? el("span", { class: "ns" }, d.aliases.map((a) => a.name).join(", ")) : "",
    d.namespace !== $("namespace").value ? el("span", { class: "ns" }, d.namespace) : "")));
    if (!matches.length) list.append(el("li", { class: "none" }, "No dataset matches"));
    list.hidden = false;
    input.setAttribute("aria-expanded", "true");
  }

  function pick(d) {
    $("dataset-search").blur();
    showSearch(false);
    go({ ns: d.namespace, ds: d.name, view: "overview", field: null, sel: null, filter: null });
  }

  function initHeader() {
    const input = $("dataset-search");
    input.addEventListener("input", () => showSearch(true));
    input.addEventListener("focus", () => { input.select(); showSearch(true); });
    input.addEventListener("blur", () => setTimeout(() => showSearch(false), 100));
    input.addEventListener("keydown", (e) => {
      const items = [...$("dataset-list").querySelectorAll("li[data-dataset]")];
      let i = items.findIndex((li) => li.classList.contains("active"));
      if (e.key === "ArrowDown" || e.key === "ArrowUp") {
        e.preventDefault();
        if (!items.length) return;
        if (i >= 0) items[i].classList.remove("active");
        i = (i + (e.key === "ArrowDown" ? 1 : items.length - 1)) % items.length;
        items[i].classList.add("active");
        items[i].scrollIntoView({ block: "nearest" });
      } else if (e.key === "Enter") {
        e.preventDefault();
        const li = items[Math.max(0, i)];
        if (li) pick({ namespace: li.dataset.namespace, name: li.dataset.dataset });
      } else if (e.key === "Escape") {
        input.value = state.ds || "";
        input.blur();
      }
    });
    $("namespace").addEventListener("change", () => {
      go({ ns: $("namespace").value, ds: null, field: null, view: "overview", sel: null, filter: null });
    });
    $("range").addEventListener("change", () => {
      const v = $("range").value;
      if (v === "custom") {
        const now = Math.floor(Date.now() / 1000);
        const s = state.range === "custom" ? +state.start : now - 7 * 86400;
        const e = state.range === "custom" ? +state.end : now + 60;
        $("range-start").value = toLocalInput(s);
        $("range-end").value = toLocalInput(e);
        $("custom-range").hidden = false;
        $("range-start").focus();
      } else {
        go({ range: v, start: null, end: null });
      }
    });
    $("range-apply").addEventListener("click", () => {
      const s = fromLocalInput($("range-start").value), e = fromLocalInput($("range-end").value);
      if (s === null || e === null || s > e) {
        $("range-start").setCustomValidity(s !== null && e !== null ? "start must not be after end" : "");
        $("range-start").reportValidity();
        return;
      }
      $("range-start").setCustomValidity("");
      go({ range: "custom", start: String(s), end: String(e) });
    });
    for (const tab of document.querySelectorAll(".tabs [data-view]")) {
      tab.addEventListener("click", () => go({ view: tab.dataset.view, sel: null }));
    }
    $("direction").addEventListener("change", () => go({ dir: $("direction").value, sel: null }));
    $("depth").addEventListener("change", () => go({ depth: $("depth").value, sel: null }));
    $("compare").addEventListener("change", () => go({ cmp: $("compare").value, sel: null }));
    $("collapse").addEventListener("change", () => go({ collapse: $("collapse").checked ? "1" : "0", sel: null }));
    for (const box of document.querySelectorAll(".hide-indirect")) {
      box.addEventListener("change", () => go({ ind: box.checked ? "hide" : "show", sel: null }));
    }
    let filterTimer = null;
    $("field-filter").addEventListener("input", () => {
      clearTimeout(filterTimer);
      filterTimer = setTimeout(() => go({ filter: $("field-filter").value || null }), 200);
    });
    $("expand-all").addEventListener("click", () => { setAllBoxes("full"); render(); });
    $("collapse-all").addEventListener("click", () => { setAllBoxes("collapsed"); render(); });
    $("copy-link").addEventListener("click", async () => {
      const b = $("copy-link");
      try {
        await navigator.clipboard.writeText(location.href);
        b.textContent = "Link copied";
      } catch (e) {
        window.prompt("Copy this link:", location.href);
      }
      setTimeout(() => { b.textContent = "Copy link"; }, 1500);
    });
  }

  function toLocalInput(seconds) {
    const d = new Date(seconds * 1000);
    const pad = (x) => String(x).padStart(2, "0");
    return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T` +
      `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  }

  function fromLocalInput(value) {
    if (!value) return null;
    const t = new Date(value).getTime();
    return Number.isFinite(t) ? Math.floor(t / 1000) : null;
  }

  function syncControls() {
    fillNamespaces();
    const input = $("dataset-search");
    if (document.activeElement !== input) input.value = state.ds || "";
    $("range").value = state.range;
    $("custom-range").hidden = state.range !== "custom";
    if (state.range === "custom") {
      $("range-start").value = toLocalInput(+state.start);
      $("range-end").value = toLocalInput(+state.end);
    }
    for (const tab of document.querySelectorAll(".tabs [data-view]")) {
      tab.setAttribute("aria-selected", String(tab.dataset.view === state.view));
      tab.disabled = !state.ds || (tab.dataset.view === "field" && !state.field);
    }
    $("tab-field").textContent = state.field ? `Field: ${state.field}` : "Field graph";
    $("tools-fields").hidden = state.view !== "fields" || !state.ds;
    $("tools-field").hidden = state.view !== "field";
    if (document.activeElement !== $("field-filter")) $("field-filter").value = state.filter || "";
    $("direction").value = state.dir;
    $("compare").value = state.cmp;
    $("compare").disabled = !previousRange();
    $("depth").value = state.depth;
    $("collapse").checked = state.collapse === "1";
    for (const box of document.querySelectorAll(".hide-indirect")) box.checked = state.ind === "hide";
    const crumbs = $("crumbs");
    crumbs.replaceChildren();
    if (state.ds) {
      crumbs.append(el("span", { class: "ns" }, state.ns), el("span", { class: "sep" }, "›"),
        el("a", { href: hashOf({ ...state, view: "overview", field: null, sel: null }) }, state.ds));
      if (state.view === "field") crumbs.append(el("span", { class: "sep" }, "›"), el("b", {}, state.field));
      crumbs.append(el("span", { class: "when" }, `runs in ${rangeText()}`));
    }
  }

  // ---------------------------------------------------------------- render dispatch
  async function render() {
    state = readHash();
    const token = ++renderToken;
    const view = $("view");
    view.dataset.view = state.view;
    view.dataset.range = state.range;
    view.dataset.state = "loading";
    syncControls();
    $("details").replaceChildren();
    $("govern").replaceChildren();
    current = null;
    try {
      if (!datasets.length) {
        const answer = await api("api/v1/datasets");
        if (token !== renderToken) return;
        datasets = answer.datasets || [];
        syncControls();
      }
      if (!state.ds) landing();
      else if (state.view === "field") await renderFieldGraph(token);
      else await renderDatasets(token, state.view === "fields");
    } catch (err) {
      if (token !== renderToken) return;
      clearCanvas();
      errorState(err);
      legend([]);
    }
    if (token === renderToken) {
      // for tests and tools: which URL the page finished drawing, and how many times
      view.dataset.rendered = location.hash || "#";
      view.dataset.renders = String(token);
    }
  }

  function landing() {
    clearCanvas();
    legend([]);
    if (!datasets.length) {
      setState("empty", [el("h2", {}, "The store has no lineage yet"),
        el("p", {}, "Record some runs first, for example with ",
          el("code", {}, "python -m fll.demo_data"), ", or post OpenLineage events to ",
          el("code", {}, "/api/v1/lineage"), ".")]);
      return;
    }
    const ns = $("namespace").value;
    const mine = datasets.filter((d) => d.namespace === ns);
    setState("idle", [el("h2", {}, "Pick a dataset"),
      el("p", {}, `Search above, or choose one of the ${plural(mine.length, "dataset")} in ${ns}:`),
      el("div", { class: "chips" }, mine.map((d) => el("button", {
        type: "button", class: "chip", "data-dataset": d.name, onclick: () => pick(d),
      }, d.name)))]);
  }

  // ---------------------------------------------------------------- overview + fields
  async function loadDatasetGraph() {
    const t = timeParams();
    const base = v3(state.ns, state.ds);
    const [mappings, fields, props] = await Promise.all([
      api(base + "/fields/lineage", t),
      api(base + "/lineage/fields", { ...t, includeCurrent: "true" }),
      api(base + "/properties", t).catch(() => []),
    ]);
    const nodes = new Map();
    const center = dsKey(state.ns, state.ds);
    const get = (ep) => {
      const k = dsKey(ep.namespace, ep.name);
      if (!nodes.has(k)) {
        nodes.set(k, { key: k, ns: ep.namespace, name: ep.name, fields: new Map(), col: null,
          sources: new Set(), destinations: new Set() });
      }
      return nodes.get(k);
    };
    const me = get({ namespace: state.ns, name: state.ds });
    for (const f of fields) me.fields.set(f.name, { name: f.name, lineage: !!f.lineage });
    const edges = [];
    for (const m of mappings) {
      const s = get(m.source), d = get(m.destination);
      s.destinations.add(d.key);
      d.sources.add(s.key);
      for (const fm of m.fieldmap) {
        if (!s.fields.has(fm.from)) s.fields.set(fm.from, { name: fm.from, lineage: true });
        if (!d.fields.has(fm.to)) d.fields.set(fm.to, { name: fm.to, lineage: true });
      }
      edges.push({ from: s.key, to: d.key, fieldmap: m.fieldmap });
    }
    // columns: the dataset in the middle, its sources (and theirs) left, destinations right
    me.col = 0;
    for (const [dir, step] of [["sources", -1], ["destinations", 1]]) {
      let frontier = [me];
      while (frontier.length) {
        const next = [];
        for (const n of frontier) {
          for (const k of n[dir]) {
            const o = nodes.get(k);
            if (o.col === null) { o.col = n.col + step; next.push(o); }
          }
        }
        frontier = next;
      }
    }
    for (let pass = 0; pass < 3; pass++) {
      for (const n of nodes.values()) {
        if (n.col !== null) continue;
        const near = [...n.destinations].map((k) => nodes.get(k).col).filter((c) => c !== null);
        const far = [...n.sources].map((k) => nodes.get(k).col).filter((c) => c !== null);
        if (near.length) n.col = Math.min(...near) - 1;
        else if (far.length) n.col = Math.max(...far) + 1;
      }
    }
    for (const n of nodes.values()) if (n.col === null) n.col = 0;
    return { nodes, edges, center, props, mappings };
  }

  function columns(nodes) {
    const cols = new Map();
    for (const n of nodes.values()) {
      if (!cols.has(n.col)) cols.set(n.col, []);
      cols.get(n.col).push(n);
    }
    for (const list of cols.values()) {
      list.sort((a, b) => (a.col === 0 ? -1 : 0) - (b.col === 0 ? -1 : 0) ||
        a.ns.localeCompare(b.ns) || a.name.localeCompare(b.name));
    }
    return [...cols.entries()].sort((a, b) => a[0] - b[0]);
  }

  function role(n, centerKey) {
    if (n.key === centerKey) return "selected";
    return n.col < 0 ? "source" : "destination";
  }

  async function renderDatasets(token, withFields) {
    const g = await loadDatasetGraph();
    if (token !== renderToken) return;
    clearCanvas();
    current = { kind: "datasets", graph: g };
    if (withFields) drawFields(g); else drawOverview(g);
    const me = g.nodes.get(g.center);
    if (!g.edges.length) {
      const nf = me.fields.size;
      emptyState(`No field lineage for “${state.ds}” in ${rangeText()}`,
        nf ? `No run in this time range built any of its ${plural(nf, "field")} from another ` +
          "dataset, or built another dataset's fields from them. Its fields are shown without lineage." :
          "No run in this time range read or wrote any of its fields.");
    } else {
      setState("ready");
    }
    datasetPanel(g);
    legend(withFields ? [["src", "source dataset"], ["sel", "selected dataset"],
      ["dst", "destination dataset"], ["nolin", "field without lineage in range"],
      ["line", "field mapping (hover a field)"], ["indirect", "indirect: filter, join, group-by, sort…"]] :
      [["src", "source dataset"], ["sel", "selected dataset"], ["dst", "destination dataset"],
        ["bubble", "number of field mappings"]]);
    fitView(withFields ? 1 : 1.2, 0.6, document.querySelector("#viewport .selected"));
    $("hint").textContent = withFields ?
      "Click a field for its lineage graph · drag to pan · wheel to zoom" :
      "Click a dataset to center it · Fields tab for field mappings · drag to pan · wheel to zoom";
  }

  function drawOverview(g) {
    const W = 230, H = 66, GAP_X = 150, GAP_Y = 26;
    const pos = new Map();
    for (const [col, list] of columns(g.nodes)) {
      const total = list.length * H + (list.length - 1) * GAP_Y;
      list.forEach((n, i) => pos.set(n.key, { x: col * (W + GAP_X), y: -total / 2 + i * (H + GAP_Y) }));
    }
    const layerEdges = svg("g", { class: "edges" });
    const layerNodes = svg("g", { class: "nodes" });
    for (const e of g.edges) {
      const a = pos.get(e.from), b = pos.get(e.to);
      const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2;
      const dx = Math.max(60, Math.abs(x2 - x1) / 2);
      const path = svg("path", {
        class: "ds-edge", d: `M${x1},${y1} C${x1 + dx},${y1} ${x2 - dx},${y2} ${x2},${y2}`,
        "marker-end": "url(#arrow)", "data-from-dataset": e.from, "data-to-dataset": e.to,
      });
      const label = plural(e.fieldmap.length, "field mapping");
      const lw = measure(label, FONT_SMALL) + 18;
      const mx = (x1 + x2) / 2, my = (y1 + y2) / 2;
      const bubble = svg("g", { class: "bubble ds-bubble", transform: `translate(${mx - lw / 2},${my - 11})` },
        svg("rect", { width: lw, height: 22, rx: 11 }),
        svg("text", { x: lw / 2, y: 15, "text-anchor": "middle" }, label));
      const from = g.nodes.get(e.from), to = g.nodes.get(e.to);
      const list = () => [el("b", {}, `${from.name} → ${to.name}`),
        el("ul", {}, e.fieldmap.slice(0, 30).map((m) => el("li", {}, `${m.from} → ${m.to}`))),
        e.fieldmap.length > 30 ? el("div", { class: "muted" }, `…and ${e.fieldmap.length - 30} more`) : ""];
      tip(path, list);
      tip(bubble, list);
      layerEdges.append(path, bubble);
    }
    for (const n of g.nodes.values()) {
      const p = pos.get(n.key);
      const r = role(n, g.center);
      const nf = n.fields.size;
      const group = svg("g", {
        class: `dataset ${r}`, transform: `translate(${p.x},${p.y})`, tabindex: 0,
        "data-namespace": n.ns, "data-dataset": n.name, "data-role": r,
      },
      svg("rect", { width: W, height: H, rx: 10 }),
      svg("rect", { class: "stripe", width: 6, height: H, rx: 3 }),
      svg("text", { class: "title", x: 18, y: 26 }, fitName(n.name, W - 30, FONT_BOLD)),
      svg("text", { class: "sub", x: 18, y: 46 },
        fit([r, n.ns !== state.ns ? n.ns : "", plural(nf, "field")].filter(Boolean).join(" · "), W - 30, FONT_SMALL)));
      if (n.key !== g.center) {
        group.addEventListener("click", () => go({ ns: n.ns, ds: n.name, view: "overview", sel: null }));
      } else {
        group.addEventListener("click", () => go({ view: "fields" }));
      }
      tip(group, () => [el("b", {}, n.name), el("div", { class: "muted" }, n.ns),
        el("div", {}, n.key === g.center ? "Click to see its fields" : "Click to center this dataset")]);
      layerNodes.append(group);
    }
    $("viewport").append(layerEdges, layerNodes);
  }

  function boxMode(n) {
    return boxModes.get(n.key) || "partial";
  }

  function setAllBoxes(mode) {
    if (!current || current.kind !== "datasets") return;
    for (const k of current.graph.nodes.keys()) boxModes.set(k, mode);
  }

  function drawFields(g) {
    const W = 250, HEAD = 48, ROW = 28, GAP_X = 190, GAP_Y = 30;
    const filter = (state.filter || "").trim().toLowerCase();
    const layout = new Map();      // dataset key -> {x, y, h, rows: Map field -> y, more: y|null}
    for (const [col, list] of columns(g.nodes)) {
      let y = 0;
      const placed = [];
      for (const n of list) {
        const mode = boxMode(n);
        const names = [...n.fields.keys()].sort((a, b) => a.localeCompare(b));
        const matching = filter ? names.filter((f) => f.toLowerCase().includes(filter)) : names;
        const limit = n.key === g.center ? CENTER_FIELDS_SHOWN : FIELDS_SHOWN;
        const shown = mode === "collapsed" ? [] : mode === "full" ? matching : matching.slice(0, limit);
        const hidden = names.length - shown.length;
        const rows = new Map();
        shown.forEach((f, i) => rows.set(f, HEAD + i * ROW));
        const moreY = hidden > 0 && mode !== "collapsed" ? HEAD + shown.length * ROW : null;
        const h = HEAD + shown.length * ROW + (moreY !== null ? ROW : 0) + (mode === "collapsed" ? 0 : 8);
        placed.push({ n, x: col * (W + GAP_X), y, h, rows, moreY, hidden, mode, shown });
        y += h + GAP_Y;
      }
      const total = y - GAP_Y;
      for (const p of placed) { p.y -= total / 2; layout.set(p.n.key, p); }
    }
    const layerLines = svg("g", { class: "edges" });
    const layerBoxes = svg("g", { class: "nodes" });
    // one line per visible pair of anchors: a hidden field anchors at its box's "more" row or header
    const anchor = (p, f, side) => {
      const x = side === "out" ? p.x + W : p.x;
      if (p.rows.has(f)) return { x, y: p.y + p.rows.get(f) + ROW / 2 - 2, field: f };
      if (p.moreY !== null) return { x, y: p.y + p.moreY + ROW / 2 - 2, field: null };
      return { x, y: p.y + HEAD / 2, field: null };
    };
    const drawn = new Set();
    for (const e of g.edges) {
      const a = layout.get(e.from), b = layout.get(e.to);
      const maps = e.fieldmap.filter((m) => state.ind !== "hide" || m.kind !== "INDIRECT")
        .sort((x, y) => (x.kind === "INDIRECT") - (y.kind === "INDIRECT"));
      for (const m of maps) {
        const s = anchor(a, m.from, "out"), t = anchor(b, m.to, "in");
        const k = `${e.from}|${s.y}|${e.to}|${t.y}`;
        if (drawn.has(k)) continue;
        drawn.add(k);
        const dx = Math.max(50, Math.abs(t.x - s.x) / 2);
        layerLines.append(svg("path", {
          class: "map-line" + (s.field && t.field ? "" : " partial") +
            (m.kind === "INDIRECT" ? " indirect" : ""),
          "data-kind": m.kind || "",
          "data-transformations": (m.transformations || []).map((x) => [x.type, x.subtype].filter(Boolean).join("/")).join(","),
          d: `M${s.x},${s.y} C${s.x + dx},${s.y} ${t.x - dx},${t.y} ${t.x},${t.y}`,
          "data-from": s.field ? fieldKey(a.n.ns, a.n.name, s.field) : "",
          "data-to": t.field ? fieldKey(b.n.ns, b.n.name, t.field) : "",
        }));
      }
    }
    for (const p of layout.values()) {
      const n = p.n;
      const r = role(n, g.center);
      const box = svg("g", {
        class: `dsbox ${r}`, transform: `translate(${p.x},${p.y})`,
        "data-namespace": n.ns, "data-dataset": n.name, "data-role": r,
      });
      box.append(svg("rect", { class: "frame", width: W, height: p.h, rx: 10 }));
      const head = svg("g", { class: "head", tabindex: 0 },
        svg("rect", { width: W, height: HEAD - 6, rx: 10 }),
        svg("text", { class: "chev", x: 14, y: 27 }, p.mode === "collapsed" ? "▸" : "▾"),
        svg("text", { class: "title", x: 30, y: 21 }, fitName(n.name, W - 44, FONT_BOLD)),
        svg("text", { class: "sub", x: 30, y: 36 },
          fit([r, n.ns !== state.ns ? n.ns : "", plural(n.fields.size, "field")].filter(Boolean).join(" · "), W - 44, FONT_SMALL)));
      head.addEventListener("click", () => {
        boxModes.set(n.key, p.mode === "collapsed" ? "partial" : "collapsed");
        render();
      });
      tip(head, () => [el("b", {}, n.name), el("div", {}, p.mode === "collapsed" ? "Click to expand" : "Click to collapse")]);
      box.append(head);
      for (const [f, y] of p.rows) {
        const info = n.fields.get(f);
        const key = fieldKey(n.ns, n.name, f);
        const row = svg("g", {
          class: "field" + (info.lineage ? "" : " nolineage") + (state.field === f && n.key === g.center ? " current" : ""),
          transform: `translate(10,${y})`, tabindex: 0,
          "data-field": f, "data-key": key, "data-dataset": n.name, "data-namespace": n.ns,
        },
        svg("rect", { width: W - 20, height: ROW - 5, rx: 5 }),
        svg("text", { x: 10, y: 16 }, fit(f, W - 40, FONT)));
        if (!info.lineage) row.append(svg("text", { class: "tag", x: W - 30, y: 16, "text-anchor": "end" }, "no lineage"));
        row.addEventListener("click", () => go({ ns: n.ns, ds: n.name, view: "field", field: f, sel: null }));
        row.addEventListener("mouseenter", () => highlight(key, true));
        row.addEventListener("mouseleave", () => highlight(key, false));
        box.append(row);
      }
      if (p.moreY !== null) {
        const more = svg("g", { class: "more", transform: `translate(10,${p.moreY})`, tabindex: 0 },
          svg("rect", { width: W - 20, height: ROW - 5, rx: 5 }),
          svg("text", { x: (W - 20) / 2, y: 16, "text-anchor": "middle" },
            filter && p.shown.length < p.hidden + p.shown.length && p.mode === "full" ?
              `${p.hidden} hidden by the filter` : `+ ${p.hidden} more fields`));
        more.addEventListener("click", () => { boxModes.set(n.key, "full"); render(); });
        box.append(more);
      }
      layerBoxes.append(box);
    }
    $("viewport").append(layerLines, layerBoxes);
  }

  function highlight(key, on) {
    const vp = $("viewport");
    vp.classList.toggle("dim", on);
    for (const line of vp.querySelectorAll(".map-line")) {
      if (line.dataset.from === key || line.dataset.to === key) {
        line.classList.toggle("hl", on);
        for (const other of [line.dataset.from, line.dataset.to]) {
          for (const r of vp.querySelectorAll(`.field[data-key="${CSS.escape(other)}"]`)) r.classList.toggle("hl", on);
        }
      }
    }
  }

  function datasetPanel(g) {
    const me = g.nodes.get(g.center);
    const d = $("details");
    const srcs = [...g.nodes.values()].filter((n) => n.col < 0);
    const dsts = [...g.nodes.values()].filter((n) => n.col > 0);
    const link = (n) => el("a", { href: hashOf({ ...state, ns: n.ns, ds: n.name, view: state.view, sel: null }) }, n.name);
    const withLineage = [...me.fields.values()].filter((f) => f.lineage).length;
    d.replaceChildren(
      el("h3", {}, me.name),
      el("div", { class: "muted" }, `namespace ${me.ns}`),
      el("dl", {},
        el("dt", {}, "Fields"), el("dd", {}, `${me.fields.size} (${withLineage} with lineage in range)`),
        el("dt", {}, "Sources"), el("dd", {}, srcs.length ? srcs.map((n, i) => [i ? ", " : "", link(n)]) : "none"),
        el("dt", {}, "Destinations"), el("dd", {}, dsts.length ? dsts.map((n, i) => [i ? ", " : "", link(n)]) : "none")),
      el("h4", {}, `Runs in ${rangeText()}`),
      g.props.length ? el("ul", { class: "runs" }, g.props.slice(0, 20).map((p) => el("li", {},
        el("code", {}, p.programRun),
        Object.keys(p.properties || {}).length ?
          el("div", { class: "props" }, Object.entries(p.properties).map(([k, v]) => el("div", {}, el("span", { class: "muted" }, k + " "), String(v)))) : ""))) :
        el("p", { class: "muted" }, "No run in this range."),
      g.props.length > 20 ? el("p", { class: "muted" }, `…and ${g.props.length - 20} more runs`) : "",
    );
  }

  // ---------------------------------------------------------------- field graph: data
  async function loadFieldGraph(token) {
    const t = timeParams();
    const depth = +state.depth;
    const dirs = state.dir === "both" ? ["backward", "forward"] : [state.dir];
    const g = {
      nodes: new Map(), conns: new Map(), ops: new Map(), runs: new Map(),
      focus: fieldKey(state.ns, state.ds, state.field), queries: 0, truncated: false,
    };
    addNode(g, { key: g.focus, kind: "field", ns: state.ns, ds: state.ds, label: state.field });
    g.nodes.get(g.focus).focus = true;
    for (const dir of dirs) {
      const seen = new Set([g.focus]);
      let frontier = [{ ns: state.ns, ds: state.ds, field: state.field }];
      for (let hop = 1; hop <= depth && frontier.length; hop++) {
        if (g.queries + frontier.length > MAX_QUERIES) {
          frontier = frontier.slice(0, Math.max(0, MAX_QUERIES - g.queries));
          g.truncated = true;
        }
        g.queries += frontier.length;
        const answers = await Promise.all(frontier.map((f) => fieldDetail(f, dir, t)));
        if (token !== renderToken) return null;
        const next = [];
        for (const { detail, ops } of answers) {
          for (const group of ops) {
            for (const p of group.programs || []) {
              g.runs.set(p.run, { run: p.run, program: p.program, time: p.lastExecutedTimeInSeconds });
            }
          }
          for (const path of detail.paths) {
            for (const far of addPath(g, path, dir, hop)) {
              const k = fieldKey(far.ns, far.ds, far.field);
              if (!seen.has(k)) { seen.add(k); next.push(far); }
            }
          }
        }
        frontier = next;
      }
    }
    return g;
  }

  async function fieldDetail(f, dir, t) {
    const base = `${v3(f.ns, f.ds)}/fields/${seg(f.field)}`;
    const cdapBase = `${v3(f.ns, f.ds)}/lineage/fields/${seg(f.field)}`;
    const [detail, ops] = await Promise.all([
      api(base + "/lineage", { ...t, direction: dir }),
      api(cdapBase + "/operations", { ...t, direction: dir === "backward" ? "incoming" : "outgoing" })
        .then((a) => a[dir === "backward" ? "incoming" : "outgoing"] || []).catch(() => []),
    ]);
    return { detail, ops };
  }

  function addNode(g, n) {
    const had = g.nodes.get(n.key);
    if (had) {
      for (const r of n.roles || []) had.roles.add(r);
      for (const id of n.restIds || []) had.restIds.add(id);
      return had;
    }
    const node = { roles: new Set(n.roles || []), restIds: new Set(n.restIds || []), focus: false, ...n };
    node.roles = new Set(n.roles || []);
    node.restIds = new Set(n.restIds || []);
    g.nodes.set(n.key, node);
    return node;
  }

  /** The key a REST node gets on the page: endpoint nodes are dataset fields,
   *  shared across paths, directions and hops; other nodes keep their REST id. */
  function keyOfRestNode(n) {
    const ep = n.sourceEndPoint || n.destinationEndPoint;
    return ep ? fieldKey(ep.namespace, ep.name, n.label) : nodeKey(n.id);
  }

  function addPath(g, path, dir, hop) {
    const byId = new Map();
    const far = [];
    for (const n of path.nodes) {
      const ep = n.sourceEndPoint || n.destinationEndPoint;
      const key = keyOfRestNode(n);
      byId.set(n.id, key);
      const origin = n.id.endsWith("." + n.label) ? n.id.slice(0, -(n.label.length + 1)) : n.id;
      const roles = [];
      if (n.sourceEndPoint) roles.push("source");
      if (n.destinationEndPoint) roles.push("destination");
      addNode(g, ep ? { key, kind: "field", ns: ep.namespace, ds: ep.name, label: n.label, roles, restIds: [n.id], hop } :
        { key, kind: "inter", label: n.label, origin, restIds: [n.id], hop });
      const farSide = dir === "backward" ? n.sourceEndPoint : n.destinationEndPoint;
      if (farSide && key !== g.focus) far.push({ ns: farSide.namespace, ds: farSide.name, field: n.label });
    }
    const opsByName = new Map(path.operations.map((o) => [o.name, o]));
    for (const op of path.operations) {
      const had = g.ops.get(op.name);
      if (!had) g.ops.set(op.name, { op, runs: new Set(path.runs), variants: 1 });
      else {
        for (const r of path.runs) had.runs.add(r);
        if (JSON.stringify(had.op) !== JSON.stringify(op)) {
          had.variants += 1;
          had.others = (had.others || []).concat([op]);
        }
      }
    }
    for (const c of path.connections) {
      const from = byId.get(c.from), to = byId.get(c.to);
      if (!from || !to) continue;
      const key = JSON.stringify([from, to, c.operation]);
      const op = opsByName.get(c.operation);
      const input = op && op.inputs && op.inputs.fields ?
        op.inputs.fields.find((i) => `${i.origin}.${i.name}` === c.from) : null;
      const tags = (input && input.transformations) || [];
      const had = g.conns.get(key);
      if (!had) {
        g.conns.set(key, { key, from, to, operation: c.operation, tags: [...tags], runs: new Set(path.runs), dir });
      } else {
        for (const r of path.runs) had.runs.add(r);
        for (const t of tags) {
          if (!had.tags.some((x) => JSON.stringify(x) === JSON.stringify(t))) had.tags.push(t);
        }
      }
    }
    return far;
  }

  /** "datasets only": intermediate fields folded away; an edge per pair of dataset
   *  fields joined through them, labelled with the operations on the way. */
  function collapseGraph(g) {
    const out = new Map();
    for (const c of g.conns.values()) {
      if (!out.has(c.from)) out.set(c.from, []);
      out.get(c.from).push(c);
    }
    const conns = new Map();
    for (const n of g.nodes.values()) {
      if (n.kind !== "field") continue;
      // walk through intermediate nodes only; collect operations and tags on the way
      const stack = (out.get(n.key) || []).map((c) => ({ c, ops: [c.operation], tags: [...c.tags], runs: new Set(c.runs) }));
      const seen = new Set();
      while (stack.length) {
        const { c, ops, tags, runs } = stack.pop();
        const target = g.nodes.get(c.to);
        if (target.kind === "field") {
          const label = ops.length === 1 ? ops[0] : `${ops.length} operations`;
          const key = JSON.stringify([n.key, c.to, label]);
          const had = conns.get(key);
          if (had) { for (const r of runs) had.runs.add(r); had.chain = [...new Set([...had.chain, ...ops])]; }
          else conns.set(key, { key, from: n.key, to: c.to, operation: label, chain: ops, tags, runs, dir: c.dir, collapsed: true });
          continue;
        }
        const visit = `${c.to}|${ops.join("\u0000")}`;
        if (seen.has(visit) || ops.length > 50) continue;
        seen.add(visit);
        for (const nc of out.get(c.to) || []) {
          stack.push({ c: nc, ops: ops.includes(nc.operation) ? ops : [...ops, nc.operation],
            tags: tags.concat(nc.tags), runs: new Set([...runs, ...nc.runs]) });
        }
      }
    }
    const nodes = new Map([...g.nodes].filter(([, n]) => n.kind === "field"));
    return { ...g, nodes, conns };
  }

  // ---------------------------------------------------------------- layered layout
  /**
   * Longest-path layering of a directed graph (edges closing a cycle are
   * ignored), then a few barycentre sweeps to cut crossings; returns
   * {key: {x, y}} with every layer centred on y = 0.
   */
  function layered(nodes, edges, opts) {
    const keys = [...nodes.keys()];
    const succ = new Map(keys.map((k) => [k, []]));
    const pred = new Map(keys.map((k) => [k, []]));
    // drop edges that close a cycle (DFS back edges), so layering terminates
    const color = new Map();
    const dag = [];
    const adj = new Map(keys.map((k) => [k, []]));
    for (const e of edges) adj.get(e.from).push(e);
    for (const root of keys) {
      if (color.get(root)) continue;
      const stack = [[root, 0]];
      color.set(root, 1);
      while (stack.length) {
        const top = stack[stack.length - 1];
        const list = adj.get(top[0]);
        if (top[1] >= list.length) { color.set(top[0], 2); stack.pop(); continue; }
        const e = list[top[1]++];
        const c = color.get(e.to);
        if (c === 1) continue;               // back edge: part of a cycle across runs
        dag.push(e);
        if (!c) { color.set(e.to, 1); stack.push([e.to, 0]); }
      }
    }
    for (const e of dag) { succ.get(e.from).push(e.to); pred.get(e.to).push(e.from); }
    const layer = new Map();
    const indeg = new Map(keys.map((k) => [k, pred.get(k).length]));
    const queue = keys.filter((k) => indeg.get(k) === 0);
    for (const k of queue) layer.set(k, 0);
    while (queue.length) {
      const k = queue.shift();
      for (const s of succ.get(k)) {
        layer.set(s, Math.max(layer.get(s) || 0, layer.get(k) + 1));
        indeg.set(s, indeg.get(s) - 1);
        if (indeg.get(s) === 0) queue.push(s);
      }
    }
    // pull sources right, next to what they feed, so short chains do not hang far left
    for (const k of [...keys].sort((a, b) => layer.get(b) - layer.get(a))) {
      const s = succ.get(k);
      if (!pred.get(k).length && s.length) layer.set(k, Math.min(...s.map((x) => layer.get(x))) - 1);
    }
    const minLayer = Math.min(...layer.values());
    const layers = [];
    for (const k of keys) {
      const l = layer.get(k) - minLayer;
      (layers[l] = layers[l] || []).push(k);
    }
    for (let i = 0; i < layers.length; i++) layers[i] = layers[i] || [];
    const order = new Map();
    const setOrder = () => layers.forEach((L) => L.forEach((k, i) => order.set(k, i)));
    for (const L of layers) L.sort((a, b) => (opts.sortKey(a)).localeCompare(opts.sortKey(b)));
    setOrder();
    const bary = (k, nbrs) => {
      const list = nbrs.get(k);
      if (!list.length) return order.get(k);
      return list.reduce((s, x) => s + order.get(x), 0) / list.length;
    };
    for (let sweep = 0; sweep < 6; sweep++) {
      const down = sweep % 2 === 0;
      const seq = down ? layers.slice(1) : layers.slice(0, -1).reverse();
      for (const L of seq) {
        const b = new Map(L.map((k) => [k, bary(k, down ? pred : succ)]));
        L.sort((x, y) => b.get(x) - b.get(y));
        L.forEach((k, i) => order.set(k, i));
      }
    }
    // the gap after a layer is wide enough for the widest label on an edge leaving it
    const gaps = layers.map(() => opts.gapX);
    for (const e of dag) {
      if (e.gap) {
        const l = layer.get(e.from) - minLayer;
        gaps[l] = Math.max(gaps[l], e.gap / Math.max(1, layer.get(e.to) - layer.get(e.from)));
      }
    }
    const pos = new Map();
    let x = 0;
    for (const [li, L] of layers.entries()) {
      const width = Math.max(0, ...L.map((k) => nodes.get(k).w));
      const heights = L.map((k) => nodes.get(k).h);
      const total = heights.reduce((s, h) => s + h, 0) + opts.gapY * Math.max(0, L.length - 1);
      let y = -total / 2;
      L.forEach((k, i) => {
        const n = nodes.get(k);
        pos.set(k, { x: x + (width - n.w) / 2, y, layer: li });
        y += heights[i] + opts.gapY;
      });
      x += width + gaps[li];
    }
    return pos;
  }

  // ---------------------------------------------------------------- field graph: drawing
  async function renderFieldGraph(token) {
    const raw = await loadFieldGraph(token);
    if (!raw || token !== renderToken) return;
    const shown = state.ind === "hide" ? withoutIndirect(raw) : raw;
    const g = state.collapse === "1" ? collapseGraph(shown) : shown;
    clearCanvas();
    current = { kind: "field", graph: g, raw };
    drawFieldGraph(g);
    if (!g.conns.size) {
      const dirText = { both: "backward or forward", backward: "backward", forward: "forward" }[state.dir];
      emptyState(`No lineage for ${state.field} of “${state.ds}” in ${rangeText()}`,
        `No run in this time range built this field from another field, or built another field ` +
        `from it (${dirText}).`);
    } else {
      setState("ready", g.truncated ? el("p", {}, `Showing the first ${MAX_QUERIES} field queries; ` +
        "lower the depth to see a complete graph.") : null);
      if (g.truncated) $("view").dataset.state = "ready";
    }
    fieldPanel(g);
    const items = [["src", "source dataset field"], ["focus", "this field"], ["dst", "destination dataset field"],
      ["inter", "field inside a run"], ["bubble", "operation"], ["masked", "masked path"],
      ["indirect", "indirect (filter, join, …)"]];
    const marked = await governMarks(g, token);
    if (token !== renderToken) return;
    if (marked.tags) items.push(["tag-direct", "tag put on the field"], ["tag-propagated", "tag reaching it through lineage"],
      ["tag-stopped", "tag stopped here (aggregated or masked)"]);
    if (marked.diff) items.push(["diff-added", "edge added since the period before"],
      ["diff-removed", "edge removed since then"], ["diff-changed", "edge with other transformations"]);
    legend(items);
    // a graph that fits at a still-readable scale is shown whole; a huge one is
    // centred on the field at a comfortable scale instead
    fitView(1.1, FIT_ALL_ABOVE, document.querySelector("#viewport .fnode.focus"), 0.6);
    $("hint").textContent = "Hover or click an operation bubble for details · double-click a dataset field to follow it · drag to pan · wheel to zoom";
  }

  /** The graph without its INDIRECT connections, and without the nodes only they
   *  reached (the focus field always stays). */
  // ---------------------------------------------------------------- tags and diff
  /** Mark the drawn field graph with classification tags and, when asked, the
   *  diff against the period before; returns what was marked. A failure here
   *  leaves the graph as drawn and says so in the panel. */
  async function governMarks(g, token) {
    const t = timeParams();
    const box = $("govern");
    const byId = new Map();  // "ns:ds:field" -> node key, for the answers' field ids
    for (const n of g.nodes.values()) if (n.kind === "field") byId.set(`${n.ns}:${n.ds}:${n.label}`, n.key);
    const nodeEl = (key) => [...document.querySelectorAll("#viewport .fnode")].find((e) => e.dataset.nodeKey === key);
    const out = { tags: false, diff: false };
    try {
      const answer = await api("api/v1/tags");
      const reaches = await Promise.all((answer.tags || []).map((tag) =>
        api(`api/v1/tags/${seg(tag.name)}/fields`, t).catch(() => null)));
      if (token !== renderToken) return out;
      const marks = new Map();
      for (const r of reaches) {
        if (!r) continue;
        for (const f of r.fields) {
          const key = byId.get(f.field);
          if (!key) continue;
          if (!marks.has(key)) marks.set(key, []);
          marks.get(key).push({ name: r.tag.name, direct: f.direct, stopped: f.stopped, f });
        }
      }
      for (const [key, list] of marks) {
        const node = nodeEl(key);
        if (!node) continue;
        const names = (pick) => list.filter(pick).map((m) => m.name).sort().join(" ");
        node.dataset.tagsDirect = names((m) => m.direct);
        node.dataset.tagsPropagated = names((m) => !m.direct && !m.stopped);
        node.dataset.tagsStopped = names((m) => m.stopped);
        const w = +node.querySelector("rect").getAttribute("width");
        let x = w - 6;
        for (const m of list.sort((a, b) => a.name.localeCompare(b.name))) {
          const kind = m.stopped ? "stopped" : m.direct ? "direct" : "propagated";
          const text = m.stopped ? `${m.name} ✕` : m.name;
          const badge = svg("text", { class: `tag-badge ${kind}`, x, y: -4, "text-anchor": "end",
            "data-tag": m.name, "data-kind": kind }, text);
          tip(badge, () => el("div", {}, el("b", {}, m.name), el("div", {},
            m.stopped ? `stopped at this field: ${m.f.transformations.map((x) => [x.type, x.subtype].filter(Boolean).join("/") + (x.masking ? " masked" : "")).join(", ")}`
              : m.direct ? "put on this field" : `reaches it from ${m.f.origins.join(", ")}`)));
          node.append(badge);
          x -= measure(text, FONT_SMALL) + 8;
        }
        out.tags = true;
      }
    } catch (e) {
      box.append(el("p", { class: "muted" }, `Tags could not be read: ${e.message}`));
    }
    const prev = previousRange();
    if (state.cmp !== "prev" || !prev) return out;
    try {
      const d = await api("api/v1/column-lineage/diff", {
        nodeId: `datasetField:${state.ns}:${state.ds}:${state.field}`,
        before: `${prev.start},${prev.end}`, after: `${t.start},${t.end}`, depth: state.depth });
      if (token !== renderToken) return out;
      const layer = svg("g", { class: "diff-edges" });
      const center = (node, side) => {
        const m = /translate\(([-\d.]+),([-\d.]+)\)/.exec(node.getAttribute("transform"));
        const r = node.querySelector("rect");
        const w = +r.getAttribute("width"), h = +r.getAttribute("height");
        return { x: +m[1] + (side === "right" ? w : 0), y: +m[2] + h / 2 };
      };
      const rows = [];
      const mark = (kind, e) => {
        const src = e.source || e.edge.source, dst = e.destination || e.edge.destination;
        rows.push([kind, src, dst, e]);
        const a = nodeEl(byId.get(src)), b = nodeEl(byId.get(dst));
        for (const n of [a, b]) if (n && !n.dataset.diff) n.dataset.diff = kind;
        if (!a || !b) return;
        const p = center(a, "right"), q = center(b, "left");
        const dx = Math.max(30, Math.abs(q.x - p.x) / 2);
        layer.append(svg("path", { class: `diff-edge ${kind}`, "data-diff": kind,
          "data-from": byId.get(src), "data-to": byId.get(dst),
          d: `M${p.x},${p.y} C${p.x + dx},${p.y - 40} ${q.x - dx},${q.y - 40} ${q.x},${q.y}` }));
      };
      for (const e of d.added) mark("added", e);
      for (const e of d.removed) mark("removed", e);
      for (const e of d.changed) mark("changed", e);
      const nodes = document.querySelector("#viewport g.nodes");
      if (nodes) nodes.before(layer);
      const tagText = (ts) => ts.map((x) => [x.type, x.subtype].filter(Boolean).join("/") + (x.masking ? "+masked" : "")).join(", ") || "untagged";
      box.append(el("h4", {}, `Compared with ${prev.text}`),
        el("p", { class: "muted", "data-diff-summary": "" },
          `${plural(d.added.length, "edge")} added, ${d.removed.length} removed, ${d.changed.length} changed`),
        el("ul", { class: "diff-list" }, rows.slice(0, 50).map(([kind, src, dst, e]) =>
          el("li", { class: kind, "data-diff": kind }, `${{ added: "+", removed: "−", changed: "~" }[kind]} ${src} → ${dst}`,
            el("div", { class: "muted" }, kind === "changed" ? `${tagText(e.before)} ⇒ ${tagText(e.after)}` : tagText(e.transformations))))),
        rows.length > 50 ? el("p", { class: "muted" }, `…and ${rows.length - 50} more`) : "");
      out.diff = true;
    } catch (e) {
      box.append(el("p", { class: "muted" }, `The comparison could not be made: ${e.message}`));
    }
    return out;
  }

  function withoutIndirect(g) {
    const conns = new Map([...g.conns].filter(([, c]) => !isIndirect(c.tags)));
    const used = new Set();
    for (const c of conns.values()) { used.add(c.from); used.add(c.to); }
    const nodes = new Map([...g.nodes].filter(([k, n]) => n.focus || used.has(k)));
    return { ...g, conns, nodes };
  }

  function nodeSize(n) {
    // the bold name always fits; the smaller second line may be cut at 150 px
    const w = Math.min(240, Math.max(90, measure(n.label, FONT_BOLD) + 26,
      Math.min(150, measure(subOf(n), FONT_SMALL) + 26)));
    return { w, h: 42 };
  }

  /** Bubbles: one per operation and connected group of its connections (an
   *  operation builds every output from every input, so that is usually one per
   *  operation; two pipelines that happen to share an operation name stay apart). */
  function opBubbles(g) {
    const parent = new Map();
    const find = (x) => {
      while (parent.get(x) !== x) { parent.set(x, parent.get(parent.get(x))); x = parent.get(x); }
      return x;
    };
    const add = (x) => { if (!parent.has(x)) parent.set(x, x); return x; };
    const tag = (c, side) => JSON.stringify([c.operation, side, side === "in" ? c.from : c.to]);
    for (const c of g.conns.values()) {
      const a = find(add(tag(c, "in"))), b = find(add(tag(c, "out")));
      if (a !== b) parent.set(a, b);
    }
    const bubbles = new Map();
    for (const c of g.conns.values()) {
      // a folded chain ("datasets only") keeps its own bubble: its label is only a count
      const key = c.collapsed ? JSON.stringify(["chain", c.key]) : JSON.stringify(["op", c.operation, find(tag(c, "in"))]);
      if (!bubbles.has(key)) {
        const text = fit(c.operation, 190, FONT_SMALL);
        bubbles.set(key, { key, operation: c.operation, text, conns: [], ins: new Map(), outs: new Set(),
          chain: c.chain, w: measure(text, FONT_SMALL) + 22, h: 22 });
      }
      const b = bubbles.get(key);
      b.conns.push(c);
      if (!b.ins.has(c.from)) b.ins.set(c.from, []);
      const tags = b.ins.get(c.from);
      for (const t of c.tags) if (!tags.some((x) => JSON.stringify(x) === JSON.stringify(t))) tags.push(t);
      b.outs.add(c.to);
      c.bubble = key;
    }
    return bubbles;
  }

  function drawFieldGraph(g) {
    // Fields are nodes; each operation is a bubble its input fields run into and
    // its output fields come out of, so an edge reads "field → (operation) → field".
    const lnodes = new Map();
    const ledges = [];
    for (const n of g.nodes.values()) lnodes.set(n.key, { ...nodeSize(n), kind: "node", n });
    const bubbles = opBubbles(g);
    for (const b of bubbles.values()) {
      lnodes.set(b.key, { w: b.w, h: b.h, kind: "bubble" });
      for (const [from, tags] of b.ins) ledges.push({ from, to: b.key, gap: tagLabel(tags) ? 84 : 36 });
      for (const to of b.outs) ledges.push({ from: b.key, to, gap: 36 });
    }
    const sortKey = (k) => {
      const n = lnodes.get(k);
      return n.kind === "node" ? `${n.n.ds || ""}\u0000${n.n.label}` : k;
    };
    const pos = layered(lnodes, ledges, { gapX: 36, gapY: 16, sortKey });
    const L = { edges: svg("g", { class: "edges" }), labels: svg("g", { class: "edge-labels" }),
      bubbles: svg("g", { class: "bubbles" }), nodes: svg("g", { class: "nodes" }) };
    const right = (k) => { const p = pos.get(k), n = lnodes.get(k); return { x: p.x + n.w, y: p.y + n.h / 2 }; };
    const left = (k) => { const p = pos.get(k), n = lnodes.get(k); return { x: p.x, y: p.y + n.h / 2 }; };
    const curve = (a, b) => {
      const dx = Math.max(18, Math.abs(b.x - a.x) / 2);
      return `M${a.x},${a.y} C${a.x + dx},${a.y} ${b.x - dx},${b.y} ${b.x},${b.y}`;
    };
    const selected = state.sel || "";
    // every connection is one path (input → bubble → output); masked ones drawn last, on top
    const conns = [...g.conns.values()].sort((a, b) =>
      (a.tags.some((t) => t.masking) ? 1 : 0) - (b.tags.some((t) => t.masking) ? 1 : 0));
    for (const c of conns) {
      const masked = c.tags.some((t) => t.masking);
      const indirect = c.tags.length && c.tags.every((t) => t.type === "INDIRECT");
      const path = svg("path", {
        class: "edge" + (masked ? " masked" : "") + (indirect ? " indirect" : ""),
        d: curve(right(c.from), left(c.bubble)) + " " + curve(right(c.bubble), left(c.to)),
        "marker-end": masked ? "url(#arrow-masked)" : "url(#arrow)",
        "data-edge": "", "data-from": c.from, "data-to": c.to, "data-operation": c.operation,
        "data-masked": masked ? "true" : "false",
        "data-transformations": c.tags.map((t) => [t.type, t.subtype].filter(Boolean).join("/")).join(","),
      });
      tip(path, () => edgeTip(g, c));
      L.edges.append(path);
    }
    for (const b of bubbles.values()) {
      for (const [from, tags] of b.ins) {
        const text = tagLabel(tags);
        if (!text) continue;
        const a = right(from), z = left(b.key);
        L.labels.append(svg("text", { class: "edge-tag" + (tags.some((t) => t.masking) ? " masked" : ""),
          x: (a.x + z.x) / 2, y: (a.y + z.y) / 2 - 5, "text-anchor": "middle" }, text));
      }
      const masked = b.conns.some((c) => c.tags.some((t) => t.masking));
      const p = pos.get(b.key);
      const bubble = svg("g", {
        class: "bubble op" + (masked ? " masked" : "") + (selected === "op:" + b.operation ? " selected" : ""),
        transform: `translate(${p.x},${p.y})`, tabindex: 0, "data-operation": b.operation,
      },
      svg("rect", { width: b.w, height: b.h, rx: b.h / 2 }),
      svg("text", { x: b.w / 2, y: 15, "text-anchor": "middle" }, b.text));
      bubble.addEventListener("mouseenter", () => { if (!state.sel) opPanel(g, b.operation, b); });
      bubble.addEventListener("click", (e) => { e.stopPropagation(); go({ sel: "op:" + b.operation }); });
      tip(bubble, () => opTip(g, b));
      L.bubbles.append(bubble);
    }
    for (const n of g.nodes.values()) {
      const p = pos.get(n.key), s = lnodes.get(n.key);
      const roles = [...n.roles];
      const cls = ["fnode", n.kind, ...roles, n.focus ? "focus" : "",
        selected === "node:" + n.key ? "selected" : ""].filter(Boolean).join(" ");
      const group = svg("g", {
        class: cls, transform: `translate(${p.x},${p.y})`, tabindex: 0,
        "data-node-key": n.key, "data-kind": n.kind, "data-label": n.label,
        "data-roles": roles.join(" "), "data-dataset": n.ds || null, "data-namespace": n.ns || null,
        "data-rest-ids": [...n.restIds].sort().join("\n"),
      },
      svg("rect", { width: s.w, height: s.h, rx: n.kind === "field" ? 8 : s.h / 2 }),
      svg("text", { class: "label", x: 12, y: 18 }, fit(n.label, s.w - 20, FONT_BOLD)),
      svg("text", { class: "sub", x: 12, y: 33 }, fitName(subOf(n), s.w - 20, FONT_SMALL)));
      group.addEventListener("click", (e) => { e.stopPropagation(); go({ sel: "node:" + n.key }); });
      if (n.kind === "field" && !n.focus) {
        group.addEventListener("dblclick", () => go({ ns: n.ns, ds: n.ds, field: n.label, sel: null }));
      }
      tip(group, () => nodeTip(n));
      L.nodes.append(group);
    }
    $("viewport").append(L.edges, L.labels, L.bubbles, L.nodes);
  }

  function subOf(n) {
    if (n.kind !== "field") return `from ${n.origin}`;
    return (n.focus ? "▶ " : roleText(n)) + shortName(n.ds);
  }

  function roleText(n) {
    if (n.focus) return "";
    if (n.roles.has("source") && n.roles.has("destination")) return "source+destination · ";
    if (n.roles.has("source")) return "source · ";
    if (n.roles.has("destination")) return "destination · ";
    return "";
  }

  /** The short text drawn on an edge: masking, and any subtype but the common
   *  DIRECT/TRANSFORMATION (the rest is in the tooltip and the panel). */
  function tagLabel(tags) {
    if (!tags.length) return "";
    const names = [...new Set(tags.filter((t) => t.subtype && t.subtype !== "TRANSFORMATION")
      .map((t) => t.subtype.toLowerCase().replace("_", " ")))];
    const masked = tags.some((t) => t.masking);
    return [masked ? "masked" : "", ...names].filter(Boolean).join(" · ");
  }

  function tagList(tags) {
    if (!tags.length) return el("div", { class: "muted" }, "transformation not recorded");
    return el("ul", { class: "tags" }, tags.map((t) => el("li", { class: t.masking ? "masked" : "" },
      el("span", { class: "pill" + (t.type === "INDIRECT" ? " indirect" : "") }, t.type),
      t.subtype ? el("span", { class: "pill sub" }, t.subtype) : "",
      t.masking ? el("span", { class: "pill masked" }, "MASKED") : "",
      t.description ? el("span", { class: "desc" }, t.description) : "")));
  }

  function labelOf(g, key) {
    const n = g.nodes.get(key);
    if (!n) return key;
    return n.kind === "field" ? `${n.ds}.${n.label}` : `${n.label} (from ${n.origin})`;
  }

  function edgeTip(g, c) {
    return [el("b", {}, `${labelOf(g, c.from)} → ${labelOf(g, c.to)}`),
      el("div", {}, "operation ", el("b", {}, c.operation)),
      c.chain && c.chain.length > 1 ? el("div", { class: "muted" }, c.chain.join(" → ")) : "",
      tagList(c.tags)];
  }

  function opTip(g, b) {
    const rawOps = current && current.raw ? current.raw.ops : g.ops;
    const info = rawOps && rawOps.get(b.operation);
    const op = info ? info.op : null;
    const inputs = [...b.ins.keys()].map((k) => labelOf(g, k));
    const runs = info ? info.runs.size || info.runs.length || 0 : 0;
    return [el("b", {}, b.operation),
      op && op.description ? el("div", { "data-testid": "tip-description" }, op.description) : "",
      el("div", { class: "muted" }, `stage ${stageOf(b.operation)}` + (runs ? ` · ${plural(runs, "run")}` : "")),
      inputs.length ? el("div", {}, "from ", inputs.slice(0, 6).join(", "), inputs.length > 6 ? ", …" : "") : "",
      tagList([...b.ins.values()].flat()),
      el("div", { class: "muted" }, "Click to keep the details in the panel")];
  }

  function nodeTip(n) {
    return [el("b", {}, n.label),
      el("div", { class: "muted" }, n.kind === "field" ? `${roleText(n) || (n.focus ? "this field · " : "")}${n.ns} / ${n.ds}` :
        `produced by ${n.origin}`),
      n.kind === "field" && !n.focus ? el("div", {}, "Double-click to follow this field") : ""];
  }

  function stageOf(name) {
    // fll pipelines name operations "<stage>.<operation>"; CDAP's example names them by stage
    const i = name.lastIndexOf(".");
    return i > 0 ? name.slice(0, i) : name;
  }

  function runList(g, runIds) {
    const runs = [...runIds].map((r) => g.runs.get(r) || { run: r, program: null, time: null })
      .sort((a, b) => (b.time || 0) - (a.time || 0));
    if (!runs.length) return el("p", { class: "muted" }, "No run in this range.");
    return el("ul", { class: "runs" }, runs.slice(0, 25).map((r) => el("li", { "data-run": r.run },
      el("code", {}, r.run), r.program ? el("span", { class: "muted" }, ` · ${r.program}`) : "",
      r.time ? el("div", { class: "muted" }, `${fmtTime(r.time)} (${ago(r.time)})`) : "")),
    runs.length > 25 ? el("li", { class: "muted" }, `…and ${runs.length - 25} more`) : "");
  }

  function opPanel(g, name, bubble) {
    const rawOps = current && current.raw ? current.raw.ops : g.ops;
    const chain = bubble && bubble.chain && bubble.chain.length > 1 ? bubble.chain : null;
    const d = $("details");
    if (chain) {
      d.replaceChildren(el("h3", {}, name), el("p", { class: "muted" }, "Operations on the way:"),
        el("ol", {}, chain.map((o) => el("li", {}, el("a", { href: hashOf({ ...state, collapse: "0", sel: "op:" + o }) }, o)))));
      return;
    }
    const info = rawOps.get(name);
    if (!info) { d.replaceChildren(el("h3", {}, name)); return; }
    const op = info.op;
    const kind = op.inputs && op.inputs.endPoint ? "READ" : op.outputs && op.outputs.endPoint ? "WRITE" : "TRANSFORM";
    const conns = [...g.conns.values()].filter((c) => c.operation === name);
    d.replaceChildren(
      el("h3", { "data-testid": "op-title" }, name),
      el("div", { class: "muted" }, kind),
      el("dl", {},
        el("dt", {}, "Description"), el("dd", { "data-testid": "op-description" }, op.description || "—"),
        el("dt", {}, "Stage"), el("dd", { "data-testid": "op-stage" }, stageOf(name)),
        op.inputs && op.inputs.endPoint ? [el("dt", {}, "Reads"), el("dd", {}, `${op.inputs.endPoint.namespace} / ${op.inputs.endPoint.name}`)] : "",
        op.outputs && op.outputs.endPoint ? [el("dt", {}, "Writes"), el("dd", {}, `${op.outputs.endPoint.namespace} / ${op.outputs.endPoint.name}`)] : "",
        op.outputs && op.outputs.fields ? [el("dt", {}, "Outputs"), el("dd", {}, op.outputs.fields.join(", ") || "—")] : ""),
      info.variants > 1 ? el("p", { class: "muted" }, `Recorded in ${info.variants} different operation sets in this range.`) : "",
      conns.length ? el("h4", {}, "Inputs on this graph") : "",
      conns.length ? el("ul", { class: "inputs" }, conns.map((c) => el("li", {},
        el("div", {}, `${labelOf(g, c.from)} → ${labelOf(g, c.to)}`), tagList(c.tags)))) : "",
      el("h4", {}, "Runs that produced it"),
      runList(g, info.runs));
  }

  function fieldPanel(g) {
    const sel = state.sel || "";
    if (sel.startsWith("op:")) { opPanel(g, sel.slice(3), null); return; }
    const d = $("details");
    if (sel.startsWith("node:") && g.nodes.has(sel.slice(5))) {
      const n = g.nodes.get(sel.slice(5));
      const ins = [...g.conns.values()].filter((c) => c.to === n.key);
      const outs = [...g.conns.values()].filter((c) => c.from === n.key);
      d.replaceChildren(
        el("h3", {}, n.label),
        el("div", { class: "muted" }, n.kind === "field" ? `${n.ns} / ${n.ds}` : `field produced by ${n.origin}`),
        el("dl", {},
          el("dt", {}, "Built by"), el("dd", {}, ins.length ? [...new Set(ins.map((c) => c.operation))].join(", ") : "—"),
          el("dt", {}, "Used by"), el("dd", {}, outs.length ? [...new Set(outs.map((c) => c.operation))].join(", ") : "—")),
        n.kind === "field" && !n.focus ? el("button", { type: "button", onclick: () => go({ ns: n.ns, ds: n.ds, field: n.label, sel: null }) },
          `Open the lineage of ${n.ds}.${n.label}`) : "");
      return;
    }
    const fields = [...g.nodes.values()].filter((n) => n.kind === "field" && !n.focus);
    const allRuns = new Set([...g.conns.values()].flatMap((c) => [...c.runs]));
    d.replaceChildren(
      el("h3", {}, `${state.ds}.${state.field}`),
      el("div", { class: "muted" }, `namespace ${state.ns}`),
      el("dl", {},
        el("dt", {}, "Sources"), el("dd", {}, String(fields.filter((n) => n.roles.has("source")).length)),
        el("dt", {}, "Destinations"), el("dd", {}, String(fields.filter((n) => n.roles.has("destination")).length)),
        el("dt", {}, "Operations"), el("dd", {}, String(new Set([...g.conns.values()].map((c) => c.operation)).size)),
        el("dt", {}, "Masked paths"), el("dd", {}, String([...g.conns.values()].filter((c) => c.tags.some((t) => t.masking)).length))),
      el("h4", {}, `Runs in ${rangeText()}`),
      runList(g, allRuns),
      el("p", { class: "muted" }, "Hover or click an operation bubble to see its description, stage and runs."));
  }

  function legend(items) {
    const box = $("legend");
    box.replaceChildren(...items.map(([k, text]) => el("div", { class: "item" },
      el("span", { class: "swatch " + k }), text)));
  }

  // ---------------------------------------------------------------- start
  function start() {
    initHeader();
    initPanZoom();
    window.addEventListener("hashchange", render);
    window.addEventListener("resize", () => fitView());
    $("canvas").addEventListener("click", () => {
      if (state.view === "field" && state.sel) go({ sel: null });
    });
    render();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
