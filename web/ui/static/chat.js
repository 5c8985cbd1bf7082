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

  function message(role, text, reference) {
    const body = el("div", { class: "content" });
    render(body, text, reference);
    const item = el("li", { class: "msg " + role }, el("p", { class: "who" }, role === "user" ? "You" : "Assistant"), body);
    const src = role === "assistant" ? sources(reference, text) : null;
    if (src) item.append(src);
    list.append(item);
    item.scrollIntoView({ block: "end" });
    return { item, body };
  }

  JSON.parse(list.dataset.history).forEach((m) => { if (m.content) message(m.role, m.content, m.reference); });

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
    const { item, body } = message("assistant", "…");
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
          if (event.delta) { text += event.delta; body.textContent = text; item.dataset.deltas = String(Number(item.dataset.deltas || 0) + 1); }
          if (event.done) {
            render(body, event.answer, event.reference);
            const src = sources(event.reference, event.answer);
            if (src) item.append(src);
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
