/*
 * The header's controls: the namespace and dataset search, the time range,
 * the view tabs and each view's tools; `syncControls` shows the state in them,
 * and every change goes through the URL (`go`).
 */
import { $, el } from "./util.js";
import { datasets, go, hashOf, previousRange, rangeText, render, state } from "./page.js";
import { setAllBoxes } from "./datasets.js";

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

export function pick(d) {
  $("dataset-search").blur();
  showSearch(false);
  go({ ns: d.namespace, ds: d.name, view: "overview", field: null, sel: null, filter: null });
}

export function initHeader() {
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

export function syncControls() {
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
