/*
 * Governance marks on a drawn field graph: the classification tags on its
 * fields (GET /api/v1/tags/{tag}/fields) and, when asked, the lineage diff
 * against the period before (GET /api/v1/column-lineage/diff).
 */
import { $, el, FONT_SMALL, measure, plural, svg } from "./util.js";
import { api, previousRange, renderToken, seg, state, timeParams } from "./page.js";
import { tip } from "./canvas.js";

// ---------------------------------------------------------------- tags and diff
/** Mark the drawn field graph with classification tags and, when asked, the
 *  diff against the period before; returns what was marked. A failure here
 *  leaves the graph as drawn and says so in the panel. */
export async function governMarks(g, token) {
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
