// Shared page helpers: JSON calls carrying the CSRF token, confirmations, copy buttons, times.
"use strict";

window.kb = (function () {
  const token = () => document.querySelector('meta[name="csrf-token"]').content;

  async function call(method, url, body) {
    const init = { method, headers: { "X-CSRFToken": token(), "Accept": "application/json" }, credentials: "same-origin" };
    if (body instanceof FormData) init.body = body;
    else if (body !== undefined) { init.body = JSON.stringify(body); init.headers["Content-Type"] = "application/json"; }
    let response;
    try { response = await fetch(url, init); }
    catch (e) { throw new Error("The server cannot be reached: " + e.message); }
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    if (!response.ok) {
      if (response.status === 401) { window.location.href = "/login?next=" + encodeURIComponent(location.pathname); }
      const error = new Error((data && (data.error || data.message)) || ("The server answered " + response.status));
      error.data = data;  // what else the answer says (the graph view's edit panel: whether to ask and retry)
      throw error;
    }
    return data;
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") node.className = v;
      else if (k === "style") node.style.cssText = v;  // through the CSSOM: the CSP refuses style attributes
      else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
      else node.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children.flat()) if (c !== null && c !== undefined) node.append(c instanceof Node ? c : String(c));
    return node;
  }

  function duration(ms) {
    if (ms == null || ms < 0) return "";
    const s = ms / 1000;
    if (s < 60) return s.toFixed(1) + " s";
    const m = Math.floor(s / 60);
    return m + " min " + Math.round(s - m * 60) + " s";
  }

  document.addEventListener("DOMContentLoaded", () => {
    // a page a form's post answered (a new API key, shown once) stands in history as the page's
    // plain address: reloading it reads the page again instead of posting the form again
    const plain = document.querySelector("[data-replace-url]");
    if (plain) history.replaceState(null, "", plain.dataset.replaceUrl);
    document.querySelectorAll("form[data-confirm]").forEach((f) =>
      f.addEventListener("submit", (e) => { if (!confirm(f.dataset.confirm)) e.preventDefault(); }));
    document.querySelectorAll("[data-copy]").forEach((b) => b.addEventListener("click", async () => {
      const text = document.querySelector(b.dataset.copy).textContent;
      try { await navigator.clipboard.writeText(text); b.textContent = "Copied"; } catch (e) { b.textContent = "Select and copy"; }
    }));
    document.querySelectorAll("time[data-ms]").forEach((t) => {
      const d = new Date(Number(t.dataset.ms));
      t.dateTime = d.toISOString(); t.textContent = d.toLocaleString();
    });
    document.querySelectorAll("[data-toggles]").forEach((box) => {
      const target = document.querySelector(box.dataset.toggles);
      const sync = () => { target.hidden = !box.checked; };
      box.addEventListener("change", sync); sync();
    });
    const settings = document.getElementById("kb-settings");
    if (settings) {
      let confirmed = false;
      settings.addEventListener("submit", async (e) => {
        if (confirmed) return;
        e.preventDefault();
        const out = document.getElementById("settings-preview");
        try {
          const plan = await call("POST", settings.dataset.preview, new FormData(settings));
          if (plan.notes.length && !confirm("Saving will do this:\n\n" + plan.notes.join("\n") + "\n\nSave?")) {
            out.hidden = false; out.textContent = "Not saved. " + plan.notes.join(" "); return;
          }
        } catch (err) { out.hidden = false; out.className = "error"; out.textContent = err.message; return; }
        confirmed = true; settings.submit();
      });
    }
  });

  return { call, el, duration };
})();
