// The interactive graph view (sigma.js + graphology, WebGL): a PageRank sample of the graph that
// grows as nodes are expanded; search, filters, colours, details, community reports, export.
import { Graph, Sigma, forceAtlas2, circular } from "./build/graph-lib.js";

const { call, el } = window.kb;
const app = document.getElementById("graph-app");
const api = app.dataset.api;
const statusLine = document.getElementById("graph-status");
const panel = document.getElementById("node-panel");
const searchBox = document.getElementById("entity-search");
const suggestionList = document.getElementById("suggestions");
const PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
  "#9c755f", "#bab0ac", "#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22"];

const graph = new Graph({ type: "undirected", multi: false });
const state = { colourBy: "type", selected: null, hovered: null, expanded: new Set(), communities: [], types: [],
  maxRank: 0, dragging: null, moved: false };
const renderer = new Sigma(graph, document.getElementById("graph-canvas"), {
  renderEdgeLabels: false, labelRenderedSizeThreshold: 7, defaultEdgeColor: "#c8ccd4", zIndex: true,
  nodeReducer: (node, data) => {
    const out = { ...data };
    const focus = state.hovered || state.selected;
    if (focus && node !== focus && !graph.areNeighbors(node, focus)) { out.color = "#e3e5ea"; out.label = ""; out.zIndex = 0; }
    else if (focus) { out.zIndex = 1; out.forceLabel = true; }
    if (node === state.selected) { out.highlighted = true; }
    return out;
  },
  edgeReducer: (edge, data) => {
    const out = { ...data };
    const focus = state.hovered || state.selected;
    if (focus && !graph.hasExtremity(edge, focus)) out.hidden = true;
    else if (focus) out.color = "#7d8597";
    return out;
  },
});

function colourKey(attrs) {
  if (state.colourBy === "type") return attrs.entityType || "?";
  const known = new Set(state.communities.map((c) => c.label));
  return (attrs.communities || []).find((c) => known.has(c)) || (attrs.communities || [])[0] || "none";
}

function palette() {
  const keys = state.colourBy === "type" ? state.types.map(([t]) => t) : state.communities.map((c) => c.label);
  const map = new Map();
  keys.forEach((k, i) => map.set(k, PALETTE[i % PALETTE.length]));
  return map;
}

function recolour() {
  const colours = palette();
  graph.forEachNode((node, attrs) => graph.setNodeAttribute(node, "color", colours.get(colourKey(attrs)) || "#999"));
  const legend = document.getElementById("legend");
  const entries = state.colourBy === "type"
    ? state.types.map(([t, n]) => [t, `${t} (${n})`])
    : state.communities.slice(0, 40).map((c) => [c.label, `${c.title || c.label} (${c.size})`]);
  legend.replaceChildren(...entries.map(([k, text]) => el("span", { style: `--c:${colours.get(k)}` }, text)));
  if (!entries.length) legend.replaceChildren(el("span", { class: "meta" }, state.colourBy === "community" ? "No communities (switch them on in the settings)." : ""));
}

function nodeSize(rank) {
  return 3 + 15 * Math.sqrt(state.maxRank > 0 ? rank / state.maxRank : 0);
}

function addNode(n, near) {
  // "type" is sigma's own attribute (which program draws the node): the entity's type goes elsewhere
  const attrs = { label: n.name, entityType: n.type, pagerank: n.pagerank, communities: n.communities, size: nodeSize(n.pagerank) };
  if (graph.hasNode(n.key)) { graph.mergeNodeAttributes(n.key, attrs); return false; }
  const angle = Math.random() * 2 * Math.PI;
  const origin = near && graph.hasNode(near) ? graph.getNodeAttributes(near) : { x: Math.random(), y: Math.random() };
  graph.addNode(n.key, { ...attrs, x: origin.x + Math.cos(angle) * 0.05, y: origin.y + Math.sin(angle) * 0.05 });
  return true;
}

function addEdge(e) {
  if (!graph.hasNode(e.source) || !graph.hasNode(e.target) || graph.hasEdge(e.source, e.target)) return;
  graph.addEdge(e.source, e.target, { weight: e.weight, size: Math.min(1 + Math.log1p(e.weight), 5) });
}

function layout(iterations) {
  if (graph.order < 2) return;
  const settings = forceAtlas2.inferSettings(graph);
  forceAtlas2.assign(graph, { iterations, settings: { ...settings, barnesHutOptimize: graph.order > 400 } });
}

function filters() {
  const params = new URLSearchParams();
  params.set("limit", document.getElementById("limit").value || "300");
  document.querySelectorAll("#type-filter input:checked").forEach((b) => params.append("type", b.value));
  const community = document.getElementById("community-filter").value;
  if (community) params.set("community", community);
  params.set("min_weight", document.getElementById("min-weight").value || "0");
  return params;
}

async function load() {
  statusLine.textContent = "Loading…";
  const params = filters();
  state.expanded.forEach((k) => params.append("include", k));
  if (state.types.length) params.set("facets", "0");  // types and communities are known from the first load
  let sample;
  const t0 = performance.now();
  try { sample = await call("GET", api + "?" + params); }
  catch (e) { statusLine.textContent = e.message; statusLine.className = "error"; return; }
  statusLine.className = "meta";
  graph.clear();
  if (!state.types.length) { state.types = sample.types; state.communities = sample.communities; buildFilters(); }
  state.maxRank = Math.max(0, ...sample.nodes.map((n) => n.pagerank));
  sample.nodes.forEach((n) => addNode(n));
  circular.assign(graph);
  sample.edges.forEach(addEdge);
  const t1 = performance.now();
  layout(graph.order > 1000 ? 20 : 60);
  const t2 = performance.now();
  recolour();
  renderer.refresh();
  // where the time went, for bench/graph_view_browser.py
  app.dataset.timing = JSON.stringify({ fetch_ms: Math.round(t1 - t0), layout_ms: Math.round(t2 - t1),
    draw_ms: Math.round(performance.now() - t2), since_navigation_ms: Math.round(performance.now()) });
  statusLine.textContent = `Showing ${graph.order} of ${sample.total_entities} entities and ${graph.size} of ${sample.total_relations} relations (top by PageRank${state.expanded.size ? ", plus expanded" : ""}).`;
  app.dataset.loaded = "yes";
  const wanted = new URLSearchParams(location.hash.slice(1)).get("entity");
  if (wanted) { history.replaceState(null, "", location.pathname); focusEntity(wanted); }
  else if (state.selected && graph.hasNode(state.selected)) select(state.selected);
  if (!sample.nodes.length) statusLine.textContent = "The graph is empty: parse some documents first.";
}

function buildFilters() {
  const box = document.getElementById("type-filter");
  box.querySelectorAll("label").forEach((l) => l.remove());
  state.types.forEach(([t, n]) => box.append(el("label", { class: "check" }, el("input", { type: "checkbox", value: t }), `${t} (${n})`)));
  const select = document.getElementById("community-filter");
  select.replaceChildren(el("option", { value: "" }, "all"),
    ...state.communities.map((c) => el("option", { value: c.label }, `${c.title || c.label} (${c.size})`)));
}

async function expand(key) {
  const minWeight = document.getElementById("min-weight").value || "0";
  const out = await call("GET", `${api}/neighbours?key=${encodeURIComponent(key)}&min_weight=${minWeight}`);
  state.expanded.add(key);
  out.nodes.forEach((n) => { state.expanded.add(n.key); });
  const fresh = out.nodes.filter((n) => addNode(n, key)).length;
  out.edges.forEach(addEdge);
  recolour();
  renderer.refresh();
  statusLine.textContent = `Expanded ${graph.getNodeAttribute(key, "label")}: ${fresh} new neighbour(s); ${graph.order} entities shown.`;
  return fresh;
}

async function focusEntity(key) {
  if (!graph.hasNode(key)) {
    try { await expand(key); } catch (e) { statusLine.textContent = e.message; return; }
  }
  if (!graph.hasNode(key)) { statusLine.textContent = "That entity is not in the graph."; return; }
  select(key);
  const pos = renderer.getNodeDisplayData(key);
  if (pos) renderer.getCamera().animate({ x: pos.x, y: pos.y, ratio: 0.4 }, { duration: 400 });
}

function section(title, ...children) { return el("section", {}, el("h3", {}, title), ...children); }

async function select(key) {
  state.selected = key;
  renderer.refresh();
  panel.replaceChildren(el("p", { class: "meta" }, "Loading…"));
  let d;
  try { d = await call("GET", `${api}/entity?key=${encodeURIComponent(key)}`); }
  catch (e) { panel.replaceChildren(el("p", { class: "error" }, e.message)); return; }
  const docs = app.dataset.docs;
  const expandButton = el("button", { type: "button", class: "primary", id: "expand-node" }, "Expand neighbours");
  expandButton.addEventListener("click", async () => {
    expandButton.disabled = true;
    try { const n = await expand(key); expandButton.textContent = n ? `Added ${n} neighbour(s)` : "No more neighbours"; }
    catch (e) { expandButton.textContent = e.message; }
  });
  panel.replaceChildren(...[
    el("h2", {}, d.name),
    el("p", { class: "meta" }, `${d.type} · PageRank ${d.pagerank.toFixed(4)} · ${d.mentions} mention(s) · ${graph.degree(key)} link(s) shown`),
    expandButton,
    el("div", { class: "content" }, d.description || "(no description)"),
    d.aliases.length ? section("Aliases", el("p", {}, d.aliases.join(", "))) : null,
    section("Documents", el("ul", {}, d.documents.map((doc) => el("li", {}, el("a", { href: `${docs}/documents/${doc.id}` }, doc.name))))),
    section(`Source chunks (${d.chunks.length})`, ...d.chunks.map((c) =>
      el("details", { class: "report" }, el("summary", {}, c.doc_name),
        el("div", { class: "content" }, c.content.slice(0, 1200)),
        el("a", { href: `${docs}/documents/${c.doc_id}?chunk=${c.id}#chunk-${c.id}` }, "open in document")))),
    d.reports.length ? section("Community reports", ...d.reports.map(reportView)) : null,
  ].filter(Boolean));
  // the edit panel (graph_edit.js) adds its controls for this entity
  app.dispatchEvent(new CustomEvent("entity-selected", { detail: { key, entity: d, panel } }));
}

// a correction changed the graph (graph_edit.js): draw it again, with the entity it left selected
app.addEventListener("graph-changed", (e) => {
  state.selected = (e.detail && e.detail.select) || null;
  if (!state.selected) panel.replaceChildren(el("p", { class: "hint" }, "Click a node to see and correct it."));
  if (state.selected) state.expanded.add(state.selected);
  load();
});

function reportView(r) {
  return el("details", { class: "report" },
    el("summary", {}, el("b", {}, r.title || r.community), ` · level ${r.level} · rating ${r.rating.toFixed(1)} · ${r.size} entities`),
    el("div", { class: "content" }, r.summary),
    el("ul", {}, r.findings.map((f) => el("li", {}, el("b", {}, f.summary), " ", f.explanation))));
}

// -- search with suggestions -------------------------------------------------------------------
let suggestTimer = null;
let asked = 0;
let choices = [];
let active = -1;
function showSuggestions(items) {
  choices = items; active = -1;
  suggestionList.replaceChildren(...items.map((n, i) => {
    const li = el("li", { role: "option", id: "sugg-" + i, "aria-selected": "false" }, n.name, el("span", { class: "meta" }, " " + n.type));
    li.addEventListener("mousedown", (e) => { e.preventDefault(); choose(i); });
    return li;
  }));
  suggestionList.hidden = !items.length;
  searchBox.setAttribute("aria-expanded", items.length ? "true" : "false");
}
function choose(i) {
  const n = choices[i];
  if (!n) return;
  clearTimeout(suggestTimer);
  asked += 1;  // a suggestion request still in flight must not reopen the list
  searchBox.value = n.name;
  showSuggestions([]);
  focusEntity(n.key);
}
searchBox.addEventListener("input", () => {
  clearTimeout(suggestTimer);
  const text = searchBox.value.trim();
  if (!text) { showSuggestions([]); return; }
  const lower = text.toLowerCase();
  const local = [];
  graph.forEachNode((key, a) => { if (local.length < 6 && a.label.toLowerCase().startsWith(lower)) local.push({ key, name: a.label, type: a.entityType }); });
  showSuggestions(local);
  const ticket = ++asked;
  suggestTimer = setTimeout(async () => {
    try {
      const out = await call("GET", `${api}/suggest?q=${encodeURIComponent(text)}`);
      if (ticket !== asked) return;
      const seen = new Set(local.map((n) => n.key));
      showSuggestions([...local, ...out.entities.filter((n) => !seen.has(n.key))].slice(0, 10));
    } catch (e) { /* suggestions are a convenience: typing on is still possible */ }
  }, 150);
});
searchBox.addEventListener("keydown", (e) => {
  if (e.key === "ArrowDown" || e.key === "ArrowUp") {
    e.preventDefault();
    active = (active + (e.key === "ArrowDown" ? 1 : -1) + choices.length) % Math.max(choices.length, 1);
    suggestionList.querySelectorAll("li").forEach((li, i) => li.setAttribute("aria-selected", i === active ? "true" : "false"));
    searchBox.setAttribute("aria-activedescendant", "sugg-" + active);
  } else if (e.key === "Enter") { e.preventDefault(); choose(active >= 0 ? active : 0); }
  else if (e.key === "Escape") showSuggestions([]);
});
searchBox.addEventListener("blur", () => setTimeout(() => showSuggestions([]), 100));

// -- pointer: hover, click, drag ---------------------------------------------------------------
renderer.on("enterNode", ({ node }) => { state.hovered = node; renderer.refresh({ skipIndexation: true }); });
renderer.on("leaveNode", () => { state.hovered = null; renderer.refresh({ skipIndexation: true }); });
renderer.on("downNode", ({ node }) => { state.dragging = node; state.moved = false; renderer.getCamera().disable(); });
renderer.on("moveBody", ({ event }) => {
  if (!state.dragging) return;
  const pos = renderer.viewportToGraph(event);
  graph.mergeNodeAttributes(state.dragging, { x: pos.x, y: pos.y });
  state.moved = true;
  event.preventSigmaDefault(); event.original.preventDefault(); event.original.stopPropagation();
});
const release = () => { state.dragging = null; renderer.getCamera().enable(); };
renderer.on("upNode", release);
renderer.on("upStage", release);
renderer.on("clickNode", ({ node }) => { if (!state.moved) select(node); });
renderer.on("clickStage", () => { state.selected = null; renderer.refresh(); });

// -- controls ----------------------------------------------------------------------------------
document.getElementById("colour-by").addEventListener("change", (e) => { state.colourBy = e.target.value; recolour(); renderer.refresh(); });
document.getElementById("apply-filters").addEventListener("click", load);
document.getElementById("community-filter").addEventListener("change", async (e) => {
  const label = e.target.value;
  if (!label) return;
  const out = await call("GET", `${api}/community?label=${encodeURIComponent(label)}`);
  panel.replaceChildren(el("h2", {}, "Community"), ...(out.reports.length ? out.reports.map(reportView) : [el("p", {}, "No report for this community yet.")]));
});
const exportUrl = (fmt) => app.dataset.export.replace("FMT", fmt);
document.getElementById("export-graphml").href = exportUrl("graphml");
document.getElementById("export-json").href = exportUrl("json");
document.getElementById("export-png").addEventListener("click", () => {
  // sigma draws on stacked canvases (edges, nodes, labels...): flatten them on white
  const { width, height } = renderer.getDimensions();
  const ratio = window.devicePixelRatio || 1;
  const out = document.createElement("canvas");
  out.width = width * ratio; out.height = height * ratio;
  const ctx = out.getContext("2d");
  ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, out.width, out.height);
  renderer.refresh();
  Object.values(renderer.getCanvases()).forEach((c) => ctx.drawImage(c, 0, 0, out.width, out.height));
  const url = out.toDataURL("image/png");
  app.dataset.pngBytes = String(url.length);  // lets a test see that an image was made
  const a = el("a", { href: url, download: `${app.dataset.name}-graph.png` });
  document.body.append(a); a.click(); a.remove();
});

load();
