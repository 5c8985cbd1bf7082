// The chat page: history, answers streamed token by token, citation markers that open their chunk.
"use strict";

(function () {
  const list = document.getElementById("messages");
  if (!list) return;
  const { el } = window.kb;
  const kbNames = JSON.parse(list.dataset.kbs);
  const dialog = document.getElementById("citation");
  const MARKER = /\[ID:(\d+)\]/g;

  function openCitation(chunk) {
    document.getElementById("citation-h").textContent = chunk.document_name || "Source";
    const link = el("a", { href: `/kbs/${chunk.dataset_id}/documents/${chunk.document_id}?chunk=${chunk.id}#chunk-${chunk.id}` },
      "open in " + (chunk.document_name || "the document"));
    document.getElementById("citation-doc").replaceChildren(kbNames[chunk.dataset_id] || "", " · ", link);
    document.getElementById("citation-text").textContent = chunk.content;
    dialog.showModal();
  }

  function render(body, text, reference) {
    // text stays text: markers become buttons, nothing else is interpreted
    const parts = [];
    let last = 0;
    for (const m of text.matchAll(MARKER)) {
      parts.push(text.slice(last, m.index));
      const chunk = reference && reference[Number(m[1])];
      if (chunk) {
        const b = el("button", { type: "button", class: "cite", title: chunk.document_name, "aria-label": "Source " + (Number(m[1]) + 1) + ": " + chunk.document_name }, String(Number(m[1]) + 1));
        b.addEventListener("click", () => openCitation(chunk));
        parts.push(b);
      }
      last = m.index + m[0].length;
    }
    parts.push(text.slice(last));
    body.replaceChildren(...parts);
  }

  function sources(reference, text) {
    const cited = new Set([...text.matchAll(MARKER)].map((m) => Number(m[1])));
    const docs = new Map();
    cited.forEach((i) => { const c = reference && reference[i]; if (c) docs.set(c.document_id, c); });
    if (!docs.size) return null;
    return el("p", { class: "meta sources" }, "Sources: ", ...[...docs.values()].map((c, i) => [i ? ", " : "",
      el("a", { href: `/kbs/${c.dataset_id}/documents/${c.document_id}` }, c.document_name)]));
  }

  // the model's reasoning, folded above its answer (filled as it streams)
  function reasoningBox(text) {
    const inner = el("div", { class: "content" }, text || "");
    const box = el("details", { class: "reasoning" }, el("summary", {}, "Reasoning"), inner);
    box.hidden = !text;
    return { box, inner };
  }

  // what the answer was given: the graph's entities, relations and reports, and the chunks
  function workBox(graph, reference) {
    const g = graph || {};
    const entities = g.entities || [], relations = g.relations || [], reports = g.reports || [], chunks = reference || [];
    if (!entities.length && !relations.length && !reports.length && !chunks.length) return null;
    const count = (n, one, many) => `${n} ${n === 1 ? one : many}`;
    const section = (title, items) => items.length ? [el("h3", {}, title), el("ul", {}, ...items)] : [];
    const summary = [entities.length || relations.length || reports.length ? "Graph context and chunks used" : "Chunks used",
      " (", [count(entities.length, "entity", "entities"), count(relations.length, "relation", "relations"),
        count(reports.length, "report", "reports"), count(chunks.length, "chunk", "chunks")].join(", "), ")"].join("");
    return el("details", { class: "work" }, el("summary", {}, summary),
      ...section("Entities", entities.map((e) => el("li", {}, el("strong", {}, e.name), ` (${e.type}) `,
        el("span", { class: "meta" }, e.description)))),
      ...section("Relations", relations.map((r) => el("li", {}, el("strong", {}, `${r.source} → ${r.target}`), " ",
        el("span", { class: "meta" }, r.description)))),
      ...section("Community reports", reports.map((r) => el("li", {}, el("strong", {}, r.title), " ",
        el("span", { class: "meta" }, r.content)))),
      ...section("Chunks", chunks.map((c, i) => el("li", { "data-marker": String(i) }, el("strong", {}, `[${i + 1}] ${c.document_name || ""}`), " ",
        el("span", { class: "meta" }, c.content)))));
  }

  function message(role, text, reference, extra) {
    const body = el("div", { class: "content" });
    render(body, text, reference);
    const info = extra || {};
    const thinking = role === "assistant" ? reasoningBox(info.reasoning) : null;
    const item = el("li", { class: "msg " + role }, el("p", { class: "who" }, role === "user" ? "You" : "Assistant"),
      thinking ? thinking.box : null, body);
    const src = role === "assistant" ? sources(reference, text) : null;
    if (src) item.append(src);
    const work = role === "assistant" ? workBox(info.graph, reference) : null;
    if (work) item.append(work);
    list.append(item);
    item.scrollIntoView({ block: "end" });
    return { item, body, thinking };
  }

  function nameSession(id, name) {
    const link = document.querySelector(`.sessions a[data-session="${id}"]`);
    if (link && link.textContent !== name) link.textContent = name;
  }

  JSON.parse(list.dataset.history).forEach((m) => { if (m.content) message(m.role, m.content, m.reference, m); });

  const form = document.getElementById("ask");
  const box = document.getElementById("question");
  box.addEventListener("keydown", (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); form.requestSubmit(); } });
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const question = box.value.trim();
    if (!question) return;
    box.value = "";
    const button = form.querySelector("button");
    button.disabled = true;
    message("user", question);
    const current = document.querySelector(`.sessions a[data-session="${list.dataset.session}"]`);
    if (current && current.textContent.trim() === "New conversation") nameSession(list.dataset.session, question.slice(0, 80));
    const { item, body, thinking } = message("assistant", "…");
    let thought = "";
    item.classList.add("streaming");
    let text = "";
    try {
      const response = await fetch(list.dataset.ask, {
        method: "POST", credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": document.querySelector('meta[name="csrf-token"]').content },
        body: JSON.stringify({ question }),
      });
      if (!response.ok) {
        let msg = "The server answered " + response.status;
        try { msg = (await response.json()).error || msg; } catch (err) { /* not JSON */ }
        throw new Error(msg);
      }
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const line = buffer.slice(0, cut).replace(/^data: /, "");
          buffer = buffer.slice(cut + 2);
          const event = JSON.parse(line);
          if (event.error) throw new Error(event.error);
          if (event.session) nameSession(event.session.id, event.session.name);
          if (event.reasoning && !event.done) { thought += event.reasoning; thinking.inner.textContent = thought; thinking.box.hidden = false; }
          if (event.delta) { text += event.delta; body.textContent = text; item.dataset.deltas = String(Number(item.dataset.deltas || 0) + 1); }
          if (event.done) {
            render(body, event.answer, event.reference);
            if (event.reasoning) { thinking.inner.textContent = event.reasoning; thinking.box.hidden = false; }
            const src = sources(event.reference, event.answer);
            if (src) item.append(src);
            const work = workBox(event.graph, event.reference);
            if (work) item.append(work);
            item.dataset.done = "yes";
          }
        }
      }
    } catch (err) {
      body.replaceChildren(el("span", { class: "error" }, err.message));
      item.dataset.done = "error";
    } finally {
      item.classList.remove("streaming");
      button.disabled = false;
      box.focus();
    }
  });
})();
