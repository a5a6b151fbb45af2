/*
 * The overview and fields views: the dataset in the middle, its sources left
 * and destinations right (GET /v3/.../fields/lineage), as dataset boxes with
 * one edge per pair, or as boxes of fields with one line per field mapping;
 * and the dataset's panel.
 */
import { $, CENTER_FIELDS_SHOWN, dsKey, el, fieldKey, FIELDS_SHOWN, fit, fitName, FONT,
  FONT_BOLD, FONT_SMALL, measure, plural, svg } from "./util.js";
import { api, current, go, hashOf, rangeText, render, renderToken, setCurrent, state, timeParams,
  v3 } from "./page.js";
import { clearCanvas, emptyState, fitView, legend, setState, tip } from "./canvas.js";

const boxModes = new Map();       // dataset key -> "collapsed" | "partial" | "full" (fields view)

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

export async function renderDatasets(token, withFields) {
  const g = await loadDatasetGraph();
  if (token !== renderToken) return;
  clearCanvas();
  setCurrent({ kind: "datasets", graph: g });
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

export function setAllBoxes(mode) {
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
