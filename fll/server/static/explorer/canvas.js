/*
 * The drawing area: pan and zoom of the SVG viewport, tooltips, the message
 * that says a view is loading, empty or failed, and the legend.
 */
import { $, el } from "./util.js";
import { go, state } from "./page.js";

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
export function fitView(maxK = 1.1, minK = 0, focus = null, floorK = minK) {
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

export function initPanZoom() {
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
export function tip(target, build) {
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
export function setState(kind, message, actions) {
  const view = $("view");
  view.dataset.state = kind;
  const box = $("message");
  if (!message) { box.hidden = true; box.replaceChildren(); return; }
  box.hidden = false;
  box.className = "message " + kind;
  box.replaceChildren(...[].concat(message), actions ? el("div", { class: "actions" }, actions) : "");
}

export function emptyState(title, why) {
  const actions = [];
  if (state.range !== "all") {
    actions.push(el("button", { type: "button", id: "widen-range", onclick: () => go({ range: "all" }) },
      "Show all time"));
  }
  setState("empty", [el("h2", { "data-testid": "empty-title" }, title), el("p", {}, why)], actions);
}

export function errorState(err) {
  const title = err.status === 404 ? "Not in the store" : err.status === 400 ? "Bad request" :
    "Something went wrong";
  setState("error", [el("h2", {}, title), el("p", {}, err.message)]);
}

export function clearCanvas() {
  $("viewport").replaceChildren();
  $("tooltip").hidden = true;
}


export function legend(items) {
  const box = $("legend");
  box.replaceChildren(...items.map(([k, text]) => el("div", { class: "item" },
    el("span", { class: "swatch " + k }), text)));
}
