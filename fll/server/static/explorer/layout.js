/*
 * The layered layout of the field graph: longest-path layers and barycentre
 * sweeps. Pure: nodes and edges in, positions out.
 */

// ---------------------------------------------------------------- layered layout
/**
 * Longest-path layering of a directed graph (edges closing a cycle are
 * ignored), then a few barycentre sweeps to cut crossings; returns
 * {key: {x, y}} with every layer centred on y = 0.
 */
export function layered(nodes, edges, opts) {
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
