// The documents page: upload (drag and drop), bulk actions and live progress.
"use strict";

(function () {
  const { call, el, duration } = window.kb;
  const table = document.getElementById("documents");
  const body = table.querySelector("tbody");
  const status = document.getElementById("upload-status");
  const graphState = document.getElementById("graph-state");
  const selected = new Set();
  let timer = null;
  const LABEL = { pending: "queued", running: "running", done: "done", failed: "failed", cancelled: "cancelled" };

  function llmCell(d) {
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

  function row(d, now) {
    const box = el("input", { type: "checkbox", "aria-label": "Select " + d.name, checked: selected.has(d.id) });
    box.addEventListener("change", () => { box.checked ? selected.add(d.id) : selected.delete(d.id); });
    const pct = Math.round((d.progress || 0) * 100);
    const phase = d.status === "running" ? (d.message || "running") : (d.status === "done" ? (d.message || "") : (d.message || ""));
    return el("tr", { "data-id": d.id, "data-status": d.status, class: "doc-" + d.status },
      el("td", {}, box),
      el("td", {}, el("a", { href: table.dataset.base + "/documents/" + d.id }, d.name)),
      el("td", {}, el("span", { class: "badge st-" + (d.no_worker ? "waiting" : d.status) },
        d.no_worker ? "no worker" : (LABEL[d.status] || d.status)),
        d.error ? el("p", { class: "error" }, d.error) : null),
      el("td", {}, el("progress", { max: 100, value: pct, "aria-label": d.name + " progress" }, pct + "%"),
        el("span", { class: "pct" }, " " + pct + "%"), el("p", { class: "meta phase" }, phase)),
      el("td", {}, String(d.chunks)),
      el("td", {}, llmCell(d)),
      el("td", {}, elapsed(d, now)),
      el("td", { class: "rowactions" }, ...rowActions(d)));
  }

  function rowActions(d) {
    const running = d.status === "running" || d.status === "pending";
    const button = (action, text, extra) => el("button", {
      type: "button", class: "small " + (extra || ""), "aria-label": `${text} ${d.name}`,
      onclick: () => act(action, [d.id]) }, text);
    return running ? [button("cancel", "Cancel")]
      : [button("parse", d.status === "done" || d.status === "failed" ? "Re-parse" : "Parse"), button("delete", "Delete", "danger")];
  }

  function describeGraph(g, docs, noWorker) {
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
    parts.push(`${g.entities} entities, ${g.relations} relations` + (g.reports ? `, ${g.reports} community reports` : ""));
    return parts.join(" · ");
  }

  function busy(data) {
    const g = data.graph;
    return data.documents.some((d) => d.status === "running" || d.status === "pending") ||
      (g.enabled && (g.refresh !== "idle" || (g.build && (g.build.status === "running" || g.build.status === "pending"))));
  }

  async function refresh() {
    clearTimeout(timer);
    let data;
    try { data = await call("GET", table.dataset.url); }
    catch (e) { graphState.textContent = e.message; timer = setTimeout(refresh, 3000); return; }
    const ids = new Set(data.documents.map((d) => d.id));
    for (const id of [...selected]) if (!ids.has(id)) selected.delete(id);
    body.replaceChildren(...(data.documents.length ? data.documents.map((d) => row(d, data.now))
      : [el("tr", {}, el("td", { colspan: 8 }, "No documents yet: upload some above."))]));
    graphState.textContent = describeGraph(data.graph, data.documents, data.no_worker);
    const working = busy(data);
    table.dataset.busy = working ? "yes" : "no";
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
    body.querySelectorAll("tr[data-id]").forEach((tr) => { e.target.checked ? selected.add(tr.dataset.id) : selected.delete(tr.dataset.id); });
    refresh();
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
  refresh();
})();
