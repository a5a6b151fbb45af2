/*
 * The field graph's data: one field's lineage followed hop by hop across
 * datasets (GET /v3/.../fields/{f}/lineage and .../operations, at most
 * MAX_QUERIES fetches per view), merged into nodes, connections, operations
 * and runs; and the graph folded to dataset fields, or without INDIRECT edges.
 */
import { $, fieldKey, isIndirect, MAX_QUERIES, nodeKey } from "./util.js";
import { api, renderToken, seg, state, timeParams, v3 } from "./page.js";

// ---------------------------------------------------------------- field graph: data
export async function loadFieldGraph(token) {
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
export function collapseGraph(g) {
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


/** The graph without its INDIRECT connections, and without the nodes only they
 *  reached (the focus field always stays). */
export function withoutIndirect(g) {
  const conns = new Map([...g.conns].filter(([, c]) => !isIndirect(c.tags)));
  const used = new Set();
  for (const c of conns.values()) { used.add(c.from); used.add(c.to); }
  const nodes = new Map([...g.nodes].filter(([k, n]) => n.focus || used.has(k)));
  return { ...g, conns, nodes };
}
