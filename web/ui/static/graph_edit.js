// The graph view's edit panel: correct the selected entity (name, type, description), merge it with
// similar-named entities, split names or documents out of it, delete it or one of its relations, add a
// relation from it; undo the last correction (or any one);
// list the knowledge base's corrections; import a curated graph file. Every change is a stored correction (kbgraph graph corrections).
const { call, el } = window.kb;
const app = document.getElementById("graph-app");
const base = app.dataset.corrections;
const historyList = document.getElementById("corrections");
const undoButton = document.getElementById("undo-correction");
const editStatus = document.getElementById("edit-status");

function say(text, error) { editStatus.textContent = text; editStatus.className = error ? "error" : "meta"; }

// a correction; one that would fold two entities together is asked about first
async function correct(body) {
  try {
    return await call("POST", base, body);
  } catch (e) {
    if (e.data && e.data.confirm && window.confirm(e.message + "\n\nGo ahead?")) {
      try { return await call("POST", base, { ...body, force: true }); } catch (again) { e = again; }
    }
    say(e.message, true);
    return null;
  }
}

function changed(done, select) {
  if (!done) return;
  say(`Correction ${done.id}: ${done.summary}.`);
  app.dispatchEvent(new CustomEvent("graph-changed", { detail: { select } }));
  listCorrections();
}

function field(label, input) { return el("label", {}, label, input); }

function editForm(key, d) {
  const name = el("input", { id: "edit-name", value: d.name });
  const type = el("input", { id: "edit-type", value: d.type });
  const description = el("textarea", { id: "edit-description", rows: "4" }, d.description || "");
  const save = el("button", { type: "button", id: "save-entity", class: "primary" }, "Save");
  save.addEventListener("click", async () => {
    let current = key;
    if (name.value.trim() && name.value.trim() !== d.name) {
      const done = await correct({ op: "rename", entity: key, name: name.value.trim() });
      if (!done) return;
      current = done.entity_key;
      changed(done, current);
    }
    const body = { op: "set", entity: current };
    if (type.value.trim() && type.value.trim() !== d.type) body.type = type.value.trim();
    if (description.value.trim() !== (d.description || "").trim()) body.description = description.value.trim();
    if (body.type !== undefined || body.description !== undefined) changed(await correct(body), current);
  });
  return el("div", { class: "edit-fields" }, field("Name", name), field("Type", type),
    field("Description", description), save);
}

function mergeForm(key) {
  const box = el("div", { id: "merge-candidates" }, el("p", { class: "meta" }, "Looking for similar names…"));
  const other = el("input", { id: "merge-other", placeholder: "or another entity's name" });
  const button = el("button", { type: "button", id: "merge-picked" }, "Merge the picked into this entity");
  button.addEventListener("click", async () => {
    const picked = [...box.querySelectorAll("input:checked")].map((b) => b.value);
    if (other.value.trim()) picked.push(other.value.trim());
    if (!picked.length) { say("Pick at least one entity to merge.", true); return; }
    changed(await correct({ op: "merge", entities: [key, ...picked], into: key }), key);
  });
  call("GET", `${base.replace(/corrections$/, "similar")}?name=${encodeURIComponent(key)}`).then((out) => {
    box.replaceChildren(...(out.entities.length ? out.entities.map((n) => el("label", { class: "check" },
      el("input", { type: "checkbox", value: n.key }), `${n.name} (${n.type}, ${n.mentions})`))
      : [el("p", { class: "meta" }, "No similar names.")]));
  }).catch((e) => box.replaceChildren(el("p", { class: "error" }, e.message)));
  return el("details", { class: "report", open: true }, el("summary", {}, "Merge"), box, other, button);
}

function relationForm(key) {
  const other = el("input", { id: "relation-target", placeholder: "another entity's name" });
  const description = el("input", { id: "relation-description", placeholder: "what links them" });
  const add = el("button", { type: "button", id: "add-relation" }, "Add relation");
  add.addEventListener("click", async () => changed(await correct({ op: "add_relation", source: key,
    target: other.value.trim(), description: description.value.trim() }), key));
  return el("details", { class: "report" }, el("summary", {}, "Add a relation"), other, description, add);
}

function checks(items) {
  return items.map(([value, label]) => el("label", { class: "check" }, el("input", { type: "checkbox", value }), label));
}

function picked(box) { return [...box.querySelectorAll("input:checked")].map((b) => b.value); }

// undo a merge after the fact: names merged into this entity, or its mentions in some documents, become
// an entity of their own again
function splitForm(key, d) {
  const names = el("div", { id: "split-names" }, ...(d.aliases.length ? checks(d.aliases.map((a) => [a, a]))
    : [el("p", { class: "meta" }, "No other names were merged into it.")]));
  const byName = el("button", { type: "button", id: "split-by-name" }, "Split the picked names out");
  byName.addEventListener("click", async () => {
    const chosen = picked(names);
    if (!chosen.length) { say("Pick at least one name to split out.", true); return; }
    changed(await correct({ op: "split", entity: key, names: chosen }), key);
  });
  const docs = el("div", { id: "split-documents" }, ...checks(d.documents.map((doc) => [doc.id, doc.name])));
  const newName = el("input", { id: "split-name", placeholder: "the new entity's name", "aria-label": "the new entity's name" });
  const byDocs = el("button", { type: "button", id: "split-by-documents" }, "Make its mentions in the picked documents a new entity");
  byDocs.addEventListener("click", async () => {
    const chosen = picked(docs);
    if (!chosen.length || !newName.value.trim()) { say("Pick documents and name the new entity.", true); return; }
    changed(await correct({ op: "split", entity: key, documents: chosen, name: newName.value.trim() }), key);
  });
  return el("details", { class: "report", id: "split-form" }, el("summary", {}, "Split"), names, byName,
    el("p", { class: "meta" }, "Or by documents:"), docs, newName, byDocs);
}

// the entity's relations, each deletable (all of them, not only the ones drawn)
function relationsList(key) {
  const list = el("ul", { id: "entity-relations" }, el("li", { class: "meta" }, "Loading…"));
  call("GET", `${app.dataset.api}/neighbours?key=${encodeURIComponent(key)}&min_weight=0`).then((out) => {
    const names = new Map(out.nodes.map((n) => [n.key, n.name]));
    const items = out.edges.map((edge) => {
      const other = edge.source === key ? edge.target : edge.source;
      const remove = el("button", { type: "button", class: "link delete-relation", "data-other": other }, "delete");
      remove.addEventListener("click", async () => {
        if (!window.confirm(`Delete the relation with ${names.get(other) || other}? (Undo brings it back.)`)) return;
        changed(await correct({ op: "delete_relation", source: key, target: other }), key);
      });
      return el("li", {}, names.get(other) || other, " ", remove);
    });
    list.replaceChildren(...(items.length ? items : [el("li", { class: "meta" }, "No relations.")]));
  }).catch((e) => list.replaceChildren(el("li", { class: "error" }, e.message)));
  return el("details", { class: "report" }, el("summary", {}, "Relations"), list);
}

app.addEventListener("entity-selected", (e) => {
  const { key, entity, panel } = e.detail;
  const remove = el("button", { type: "button", id: "delete-entity", class: "danger" }, "Delete entity");
  remove.addEventListener("click", async () => {
    if (!window.confirm(`Delete ${entity.name} from the graph? (Undo brings it back.)`)) return;
    changed(await correct({ op: "delete_entity", entity: key }), null);
  });
  panel.append(el("section", { id: "edit-panel" }, el("h3", {}, "Correct"), editForm(key, entity), mergeForm(key),
    relationForm(key), splitForm(key, entity), relationsList(key), remove));
});

undoButton.addEventListener("click", () => undo());

async function undo(id) {
  try {
    const done = await call("POST", base + "/undo", id === undefined ? {} : { id });
    say(`Undone: ${done.summary}.`);
    app.dispatchEvent(new CustomEvent("graph-changed", { detail: { select: done.entity_key } }));
    listCorrections();
  } catch (e) { say(e.message, true); }
}

function correctionItem(c) {
  const when = new Date(c.at * 1000).toLocaleString();
  const item = el("li", { class: c.undone ? "undone" : "", "data-id": String(c.id) }, `${c.id}. ${c.summary}`,
    el("span", { class: "meta" }, ` · ${c.who} · ${when}${c.undone ? " · undone" : ""}`));
  if (!c.undone) {
    const button = el("button", { type: "button", class: "link undo-one" }, "undo");
    button.addEventListener("click", () => undo(c.id));
    item.append(" ", button);
  }
  return item;
}

async function listCorrections() {
  try {
    const out = await call("GET", base);
    historyList.replaceChildren(...(out.corrections.length ? out.corrections.map(correctionItem)
      : [el("li", { class: "meta" }, "No corrections yet.")]));
  } catch (e) { historyList.replaceChildren(el("li", { class: "error" }, e.message)); }
}

document.getElementById("import-button").addEventListener("click", async () => {
  const file = document.getElementById("import-file").files[0];
  if (!file) { say("Choose a file to import.", true); return; }
  const form = new FormData();
  form.append("file", file);
  const relations = document.getElementById("import-relations").files[0];
  if (relations) form.append("relations", relations);
  form.append("source", document.getElementById("import-source").value.trim());
  say("Importing…");
  try { changed(await call("POST", base.replace(/corrections$/, "import"), form), null); }
  catch (e) { say(e.message, true); }
});
listCorrections();
