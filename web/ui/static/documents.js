// The documents page: upload (drag and drop), bulk actions, a page of documents found by name, and
// live progress. Rows are updated in place (a cell changes only when its text does), so keyboard
// focus, selections and the scroll position survive the refreshes; a row's main button keeps its
// place when it turns from Parse into Cancel and back.
"use strict";

(function () {
  const { call, el, duration } = window.kb;
  const table = document.getElementById("documents");
  const body = table.querySelector("tbody");
  const status = document.getElementById("upload-status");
  const graphState = document.getElementById("graph-state");
  const search = document.getElementById("doc-q");
  const sizeBox = document.getElementById("doc-size");
  const pageInfo = document.getElementById("page-info");
  const prev = document.getElementById("page-prev");
  const next = document.getElementById("page-next");
  const selected = new Set();
  const rows = new Map();
  const empty = el("tr", { class: "empty" }, el("td", { colspan: 8 }, "No documents yet: upload some above."));
  const params = new URLSearchParams(location.search);
  const view = { page: Number(params.get("page")) || 1, q: params.get("q") || "", size: Number(params.get("size")) || 20 };
  let timer = null;
  let pages = 1;
  const LABEL = { pending: "queued", running: "running", done: "done", failed: "failed", cancelled: "cancelled" };
  search.value = view.q;
  sizeBox.value = String(view.size);

  function llmText(d) {
    const t = d.task;
    const live = /(\d+) LLM calls, (\d+) tokens/.exec(d.message || "");
    if (t && (t.llm_calls || t.prompt_tokens)) return `${t.llm_calls} calls · ${t.prompt_tokens + t.completion_tokens} tokens`;
    if (live) return `${live[1]} calls · ${live[2]} tokens`;
    return "—";
  }

  function elapsed(d, now) {
    if (!d.started) return "";
    return duration((d.finished || now) - d.started);
  }

  function setText(node, text) { if (node.textContent !== text) node.textContent = text; }
  function setAttr(node, name, value) { if (node.getAttribute(name) !== value) node.setAttribute(name, value); }

  function makeRow(d) {
    const r = {};
    r.box = el("input", { type: "checkbox", "aria-label": "Select " + d.name });
    r.box.addEventListener("change", () => { r.box.checked ? selected.add(d.id) : selected.delete(d.id); });
    r.link = el("a", { href: table.dataset.base + "/documents/" + d.id }, d.name);
    r.badge = el("span", { class: "badge" });
    r.error = el("p", { class: "error", hidden: true });
    r.bar = el("progress", { max: 100, value: 0, "aria-label": d.name + " progress" });
    r.pct = el("span", { class: "pct" });
    r.phase = el("p", { class: "meta phase" });
    r.chunks = el("td", { "data-label": "Chunks" });
    r.llm = el("td", { "data-label": "LLM" });
    r.time = el("td", { "data-label": "Elapsed" });
    // the main button: Parse, Re-parse or Cancel as the document's state asks, one element throughout
    r.main = el("button", { type: "button", class: "small" });
    r.main.addEventListener("click", () => act(r.main.dataset.action, [d.id]));
    r.remove = el("button", { type: "button", class: "small danger", "aria-label": "Delete " + d.name }, "Delete");
    r.remove.addEventListener("click", () => act("delete", [d.id]));
    r.tr = el("tr", { "data-id": d.id },
      el("td", { class: "pick" }, r.box),
      el("td", { class: "name" }, r.link),
      el("td", { class: "state", "data-label": "Status" }, r.badge, r.error),
      el("td", { class: "progress", "data-label": "Progress" }, r.bar, r.pct, r.phase),
      r.chunks, r.llm, r.time,
      el("td", { class: "rowactions" }, r.main, r.remove));
    return r;
  }

  function updateRow(r, d, now) {
    const pct = Math.round((d.progress || 0) * 100);
    setAttr(r.tr, "data-status", d.status);
    setAttr(r.tr, "class", "doc-" + d.status);
    setText(r.link, d.name);
    r.box.checked = selected.has(d.id);
    setAttr(r.badge, "class", "badge st-" + (d.no_worker ? "waiting" : d.status));
    setText(r.badge, d.no_worker ? "no worker" : (LABEL[d.status] || d.status));
    r.error.hidden = !d.error;
    setText(r.error, d.error || "");
    if (Number(r.bar.value) !== pct) r.bar.value = pct;
    setText(r.pct, " " + pct + "%");
    setText(r.phase, d.message || (d.status === "running" ? "running" : ""));
    setText(r.chunks, String(d.chunks));
    setText(r.llm, llmText(d));
    setText(r.time, elapsed(d, now));
    const running = d.status === "running" || d.status === "pending";
    const action = running ? "cancel" : "parse";
    const label = running ? "Cancel" : (d.status === "done" || d.status === "failed" ? "Re-parse" : "Parse");
    r.main.dataset.action = action;
    setText(r.main, label);
    setAttr(r.main, "aria-label", `${label} ${d.name}`);
  }

  function showRows(docs, now) {
    const ids = new Set(docs.map((d) => d.id));
    for (const [id, r] of rows) if (!ids.has(id)) { r.tr.remove(); rows.delete(id); }
    if (!docs.length) {
      setText(empty.firstChild, view.q ? "No document's name holds “" + view.q + "”." : "No documents yet: upload some above.");
      if (empty.parentNode !== body) body.replaceChildren(empty);
      return;
    }
    if (empty.parentNode === body) empty.remove();
    [...body.children].forEach((tr) => { if (!tr.dataset.id) tr.remove(); });  // the "Loading…" row
    docs.forEach((d, i) => {
      let r = rows.get(d.id);
      if (!r) { r = makeRow(d); rows.set(d.id, r); }
      updateRow(r, d, now);
      if (body.children[i] !== r.tr) body.insertBefore(r.tr, body.children[i] || null);  // moved only when out of place
    });
  }

  function describeGraph(g, noWorker) {
    if (!g.enabled) return "Knowledge graph off.";
    if (g.store_error) return g.store_error;
    const parts = [];
    if (g.build && (g.build.status === "running" || g.build.status === "pending"))
      parts.push(`Building the knowledge graph: ${Math.round(g.build.progress * 100)}% (${g.build.message})`);
    else if (g.build && g.build.status === "failed") parts.push("Graph build failed: " + (g.build.error || g.build.message));
    if (g.refresh === "queued" && noWorker) parts.push("Graph refresh waiting: no worker is running (start kbgraph-worker).");
    else if (g.refresh === "queued") parts.push("Graph refresh queued (PageRank, communities)…");
    else if (g.refresh === "running") {
      const t = g.refresh_task;
      parts.push(t && t.status === "running"
        ? `Refreshing the graph: ${Math.round(t.progress * 100)}% (${t.message})`
        : "Refreshing the graph (PageRank, communities, reports)…");
    } else if (g.refresh_task && g.refresh_task.status === "failed")
      parts.push("Graph refresh failed: " + (g.refresh_task.error || g.refresh_task.message));
    else if (g.refresh_task && g.refresh_task.status === "done" && g.refresh_task.finished)
      // a refresh can start and end between two polls: the reader still learns that it ran, and when
      parts.push(`Graph refreshed at ${new Date(g.refresh_task.finished).toLocaleTimeString()}` +
        (g.refresh_task.started ? ` (${duration(g.refresh_task.finished - g.refresh_task.started)})` : ""));
    parts.push(`${g.entities} entities, ${g.relations} relations` + (g.reports ? `, ${g.reports} community reports` : ""));
    return parts.join(" · ");
  }

  function busy(data) {
    const g = data.graph;
    return data.parsing > 0 ||
      (g.enabled && (g.refresh !== "idle" || (g.build && (g.build.status === "running" || g.build.status === "pending"))));
  }

  function showPager(data) {
    pages = data.pages;
    view.page = data.page;
    const what = data.q ? `${data.total} of ${data.all} documents match` : `${data.all} document${data.all === 1 ? "" : "s"}`;
    setText(pageInfo, `Page ${data.page} of ${data.pages} · ${what}`);
    prev.disabled = data.page <= 1;
    next.disabled = data.page >= data.pages;
  }

  function remember() {
    const query = new URLSearchParams();
    if (view.q) query.set("q", view.q);
    if (view.page > 1) query.set("page", String(view.page));
    if (view.size !== 20) query.set("size", String(view.size));
    const target = location.pathname + (query.toString() ? "?" + query : "");
    if (target !== location.pathname + location.search) history.replaceState(null, "", target);
  }

  async function refresh() {
    clearTimeout(timer);
    const query = new URLSearchParams({ page: String(view.page), page_size: String(view.size), q: view.q });
    let data;
    try { data = await call("GET", table.dataset.url + "?" + query); }
    catch (e) { setText(graphState, e.message); timer = setTimeout(refresh, 3000); return; }
    showRows(data.documents, data.now);
    showPager(data);
    remember();
    setText(graphState, describeGraph(data.graph, data.no_worker));
    const working = busy(data);
    table.dataset.busy = working ? "yes" : "no";
    table.dataset.refreshes = String(Number(table.dataset.refreshes || 0) + 1);
    timer = setTimeout(refresh, working ? 1000 : 5000);
  }

  async function upload(files) {
    if (!files.length) return;
    const form = new FormData();
    for (const f of files) form.append("file", f, f.name);
    form.append("parse", document.querySelector('#upload input[name="parse"]').checked ? "on" : "off");
    status.className = ""; status.textContent = `Uploading ${files.length} file(s)…`;
    try {
      const out = await call("POST", document.getElementById("upload").dataset.url, form);
      status.textContent = `Uploaded ${out.uploaded.length} file(s).` + (out.refused.length ? " Refused: " + out.refused.join("; ") : "");
      if (out.refused.length) status.className = "error";
    } catch (e) { status.className = "error"; status.textContent = e.message; }
    refresh();
  }

  const zone = document.getElementById("upload");
  const input = document.getElementById("file-input");
  input.addEventListener("change", () => { upload([...input.files]); input.value = ""; });
  zone.addEventListener("dragover", (e) => { e.preventDefault(); zone.classList.add("over"); });
  zone.addEventListener("dragleave", () => zone.classList.remove("over"));
  zone.addEventListener("drop", (e) => { e.preventDefault(); zone.classList.remove("over"); upload([...e.dataTransfer.files]); });

  document.getElementById("select-all").addEventListener("change", (e) => {
    for (const id of rows.keys()) e.target.checked ? selected.add(id) : selected.delete(id);
    for (const [id, r] of rows) r.box.checked = selected.has(id);
  });
  async function act(action, ids) {
    if (action === "delete" && !confirm(`Delete ${ids.length} document(s) with their chunks and their part of the graph?`)) return;
    try {
      await call("POST", `${table.dataset.api}/${action}`, { ids });
      status.className = ""; status.textContent = { parse: "Parsing queued.", cancel: "Cancelling…", delete: "Deleted." }[action];
      if (action === "delete") ids.forEach((id) => selected.delete(id));
    } catch (e) { status.className = "error"; status.textContent = e.message; }
    refresh();
  }

  document.querySelectorAll("#bulk button").forEach((b) => b.addEventListener("click", () => {
    if (!selected.size) { status.className = "error"; status.textContent = "Select documents first."; return; }
    act(b.dataset.action, [...selected]);
  }));
  let typing = null;
  search.addEventListener("input", () => {
    clearTimeout(typing);
    typing = setTimeout(() => { view.q = search.value.trim(); view.page = 1; refresh(); }, 250);
  });
  document.getElementById("doc-filter").addEventListener("submit", (e) => {
    e.preventDefault(); view.q = search.value.trim(); view.page = 1; refresh();
  });
  sizeBox.addEventListener("change", () => { view.size = Number(sizeBox.value); view.page = 1; refresh(); });
  prev.addEventListener("click", () => { if (view.page > 1) { view.page -= 1; refresh(); } });
  next.addEventListener("click", () => { if (view.page < pages) { view.page += 1; refresh(); } });
  refresh();
})();
