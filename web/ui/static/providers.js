// The settings page's model providers: "Test connection" asks the endpoint for its models, with the
// form's URL and key (before saving) or a saved provider's, and offers them for the chat models box.
"use strict";

(function () {
  const form = document.getElementById("new-provider");
  if (!form) return;
  const { call } = window.kb;
  const out = document.getElementById("provider-status");

  async function test(body) {
    out.className = ""; out.textContent = "Asking the endpoint for its models…";
    try {
      const found = await call("POST", form.dataset.test, body);
      out.textContent = found.models.length ? `Connected: ${found.models.length} model(s): ${found.models.join(", ")}`
        : "Connected, but the endpoint lists no model.";
      out.dataset.ok = "yes";
      return found.models;
    } catch (e) { out.className = "error"; out.textContent = e.message; out.dataset.ok = "no"; return null; }
  }

  document.getElementById("test-provider").addEventListener("click", async () => {
    const models = await test({ base_url: form.base_url.value, api_key: form.api_key.value });
    if (models && models.length && !form.chat_models.value.trim()) form.chat_models.value = models.join(", ");
  });
  document.querySelectorAll("[data-test-provider]").forEach((b) =>
    b.addEventListener("click", () => test({ name: b.dataset.testProvider })));
})();
