"""RAGFlow routes kbgraph does not serve (agents, RAPTOR, the file manager, embedded bots...): each
answers RAGFlow's envelope with a message naming the missing feature, never a bare 404, so a client
learns what is missing rather than guessing at a typo."""

from __future__ import annotations

from flask import Response

from web.api import blueprint
from web.envelope import DATA_ERROR, ApiError

METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]
# path prefix (under /api/v1) -> the feature it belongs to
FEATURES = {
    "/agents": "Agents",
    "/agents_openai": "Agents",
    "/agentbots": "Agents",
    "/chatbots": "Embedded chat bots",
    "/searchbots": "Search apps",
    "/sessions": "Chats without an assistant (/sessions/ask, /sessions/related_questions)",
    "/file": "The file manager",
    "/dify": "The Dify retrieval endpoint",
    "/mcp": "MCP servers",
}
DATASET_FEATURES = {
    "run_raptor": "RAPTOR", "trace_raptor": "RAPTOR", "run_mindmap": "Mind maps", "trace_mindmap": "Mind maps",
    "metadata": "Dataset metadata settings",
}


def not_available(feature: str) -> ApiError:
    return ApiError(DATA_ERROR, f"Not available in kbgraph: {feature}. It serves datasets, documents, chunks, "
                                "retrieval, the knowledge graph, chat assistants and their sessions.", with_data=True)


def _register(prefix: str, feature: str) -> None:
    def view(rest: str = "") -> Response:
        raise not_available(feature)

    endpoint = "unavailable" + prefix.replace("/", "_")
    blueprint.add_url_rule(prefix, endpoint, view, methods=METHODS, defaults={"rest": ""})
    blueprint.add_url_rule(f"{prefix}/<path:rest>", endpoint + "_sub", view, methods=METHODS)


for _prefix, _feature in FEATURES.items():
    _register(_prefix, _feature)


@blueprint.route("/datasets/<dataset_id>/<any(" + ", ".join(DATASET_FEATURES) + "):action>", methods=METHODS)
@blueprint.route("/datasets/<dataset_id>/<any(" + ", ".join(DATASET_FEATURES) + "):action>/<path:rest>",
                 methods=METHODS)
def dataset_feature(dataset_id: str, action: str, rest: str = "") -> Response:
    raise not_available(DATASET_FEATURES[action])
