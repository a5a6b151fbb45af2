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
 * This file is the page's entry (an ES module, loaded by index.html after
 * auth.js; no build step): it renders the view the URL asks for. The rest is
 * in explorer/, one module per concept, imported one way:
 *   util.js        DOM/SVG builders, text measuring, keys, formatting
 *   page.js        the page's state, the URL hash, the REST client
 *   canvas.js      pan and zoom, tooltips, the view's message, the legend
 *   header.js      the header's controls (dataset search, range, tabs, tools)
 *   datasets.js    the overview and fields views
 *   fieldgraph.js  the field graph's data (REST paths to nodes and edges)
 *   layout.js      the layered layout of the field graph
 *   govern.js      tags and the lineage diff marked on the field graph
 *   fielddraw.js   the field graph view: drawing, tooltips and panels
 *
 * What these files must never do: load anything from another origin, build
 * HTML from strings holding data (every name goes through textContent), or
 * write to the server.
 */
import { $, el, plural } from "./explorer/util.js";
import { api, beginRender, datasets, go, onRender, renderToken, setDatasets, state } from "./explorer/page.js";
import { clearCanvas, errorState, fitView, initPanZoom, legend, setState } from "./explorer/canvas.js";
import { renderFieldGraph } from "./explorer/fielddraw.js";
import { renderDatasets } from "./explorer/datasets.js";
import { initHeader, pick, syncControls } from "./explorer/header.js";

// ---------------------------------------------------------------- render dispatch
async function renderView() {
  const token = beginRender();
  const view = $("view");
  view.dataset.view = state.view;
  view.dataset.range = state.range;
  view.dataset.state = "loading";
  syncControls();
  $("details").replaceChildren();
  $("govern").replaceChildren();
  try {
    if (!datasets.length) {
      const answer = await api("api/v1/datasets");
      if (token !== renderToken) return;
      setDatasets(answer.datasets || []);
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


// ---------------------------------------------------------------- start
function start() {
  onRender(renderView);
  initHeader();
  initPanZoom();
  window.addEventListener("hashchange", renderView);
  window.addEventListener("resize", () => fitView());
  $("canvas").addEventListener("click", () => {
    if (state.view === "field" && state.sel) go({ sel: null });
  });
  renderView();
}

if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
else start();
