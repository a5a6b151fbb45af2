/*
 * The field graph view: fields as nodes, each operation a bubble its inputs
 * run into and its outputs come out of; the tooltips and the panel of a
 * field, a node or an operation.
 */
import { $, ago, el, fit, FIT_ALL_ABOVE, fitName, fmtTime, FONT_BOLD, FONT_SMALL, MAX_QUERIES,
  measure, plural, shortName, svg } from "./util.js";
import { current, go, hashOf, rangeText, renderToken, setCurrent, state } from "./page.js";
import { clearCanvas, emptyState, fitView, legend, setState, tip } from "./canvas.js";
import { layered } from "./layout.js";
import { collapseGraph, loadFieldGraph, withoutIndirect } from "./fieldgraph.js";
import { governMarks } from "./govern.js";

// ---------------------------------------------------------------- field graph: drawing
export async function renderFieldGraph(token) {
  const raw = await loadFieldGraph(token);
  if (!raw || token !== renderToken) return;
  const shown = state.ind === "hide" ? withoutIndirect(raw) : raw;
  const g = state.collapse === "1" ? collapseGraph(shown) : shown;
  clearCanvas();
  setCurrent({ kind: "field", graph: g, raw });
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
