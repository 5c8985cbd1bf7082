"""Model providers on the settings page: a tenant adds OpenAI-compatible endpoints (base URL, API key
kept encrypted, the chat and embedding models it offers), tries one before saving ("Test
connection"), and removes them. Their chat models are offered to assistants and knowledge bases (extraction), their embedding models
to knowledge bases, as ``model@provider``; the server's own settings stay the default provider."""

from __future__ import annotations

from typing import Any

from flask import Response, flash, redirect, request, url_for

from kbgraph.engine.providers import seal_key, unseal_key
from kbgraph.meta import ModelProvider
from web.services import services
from web.ui.common import PageError, json_body, page_blueprint, tenant

blueprint = page_blueprint("ui_providers")


def _names(raw: str | None) -> list[str]:
    return [n.strip() for n in (raw or "").replace("\n", ",").split(",") if n.strip()]


def chat_model_choices() -> list[str]:
    """The ``model@provider`` names the signed-in tenant's assistants may use."""
    return [f"{model}@{p.name}" for p in services().meta.list_providers(tenant()) for model in p.chat_models]


def embedding_model_choices() -> list[str]:
    """The ``model@provider`` names the signed-in tenant's knowledge bases may embed with."""
    return [f"{model}@{p.name}" for p in services().meta.list_providers(tenant()) for model in p.embedding_models]


def listed_models(base_url: str, api_key: str) -> list[str]:
    """The models an endpoint lists at GET /models (raises PageError saying why it could not)."""
    from kbgraph.llm.openai_chat import shared_client

    try:
        return sorted(m.id for m in shared_client(base_url.rstrip("/"), api_key or "none", 10.0).models.list())
    except Exception as exc:  # the endpoint's own words: wrong key, wrong URL, no such route
        raise PageError(f"The endpoint did not list its models: {type(exc).__name__}: {str(exc)[:300]}") from None


@blueprint.post("/settings/providers")
def add_provider() -> Response:
    form = request.form
    svc = services()
    svc.meta.add_provider(tenant(), (form.get("name") or "").strip(), (form.get("base_url") or "").strip(),
                          seal_key(svc.settings, form.get("api_key") or ""),
                          chat_models=_names(form.get("chat_models")), embedding_models=_names(form.get("embedding_models")))
    flash(f"Provider {form.get('name')!r} added: its key is stored encrypted.")
    return redirect(url_for("ui_auth.settings_page"))


@blueprint.post("/settings/providers/<name>/delete")
def delete_provider(name: str) -> Response:
    svc = services()
    if not svc.meta.delete_provider(tenant(), name):
        raise PageError("No such provider.", 404)
    stranded = [kb.name for kb in svc.meta.list_kbs(tenant()) if kb.embedding_model.endswith(f"@{name}")]
    flash(f"Provider {name!r} removed; assistants naming its models answer with the default model again."
          + (f" Knowledge bases embedding with its models ({', '.join(stranded)}) cannot index or search until a "
             f"provider named {name!r} offering those models is added again." if stranded else ""))
    return redirect(url_for("ui_auth.settings_page"))


@blueprint.post("/ui/api/providers/test")
def test_provider() -> dict[str, Any]:
    """Ask an endpoint for its models: the form's URL and key, or a saved provider's (``name``)."""
    body = json_body()
    saved: ModelProvider | None = services().meta.find_provider(tenant(), str(body.get("name") or "")) \
        if body.get("name") and not body.get("api_key") else None
    base_url = str(body.get("base_url") or (saved.base_url if saved else "")).strip()
    if not base_url:
        raise PageError("Give the provider's base URL first.")
    key = str(body.get("api_key") or "") or (unseal_key(services().settings, saved.api_key_sealed) if saved else "")
    return {"models": listed_models(base_url, key)}
