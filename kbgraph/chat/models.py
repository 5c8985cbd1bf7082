"""Which chat model an assistant answers with.

RAGFlow clients name a model per assistant (``glm-4``, ``gpt-4o-mini@OpenAI``: RAGFlow's
``name@factory`` form). kbgraph talks to one OpenAI-compatible endpoint, so a named model is one that
endpoint serves: its ``GET /models`` list decides, read at most once a minute per process. An
endpoint that cannot list its models (not every gateway implements the route) leaves the choice to
the caller; the endpoint itself answers for an unknown name when the assistant is asked.
"""

from __future__ import annotations

import logging
import threading
import time

from kbgraph.config import Settings

log = logging.getLogger(__name__)

LIST_TTL = 60.0  # seconds a model list is trusted


def model_id(name: str) -> str:
    """The model name as the endpoint knows it: RAGFlow's ``@factory`` suffix dropped."""
    return name.rsplit("@", 1)[0].strip() if "@" in name else name.strip()


class ModelCatalog:
    """The models the configured endpoint serves (cached), and whether a name is one of them."""

    def __init__(self, settings: Settings, ttl: float = LIST_TTL) -> None:
        self.settings = settings
        self.ttl = ttl
        self._lock = threading.Lock()
        self._served: frozenset[str] | None = None
        self._read_at = float("-inf")

    def served(self) -> frozenset[str] | None:
        """The endpoint's model ids, or None when it could not say (no LLM, no /models route, down)."""
        if not self.settings.llm_configured:
            return None
        with self._lock:
            if time.monotonic() - self._read_at > self.ttl:
                self._served = self._fetch()
                self._read_at = time.monotonic()
            return self._served

    def _fetch(self) -> frozenset[str] | None:
        from kbgraph.llm.openai_chat import shared_client

        client = shared_client(self.settings.llm_base_url, self.settings.llm_api_key,
                               min(self.settings.llm_timeout, 10.0))
        try:
            return frozenset(m.id for m in client.models.list())
        except Exception as exc:  # an endpoint without the route is common; it is not an error here
            log.info("the LLM endpoint did not list its models (%s); model names are not checked", exc)
            return None

    def knows(self, name: str) -> bool:
        """Whether an assistant may name this model: the configured one always, another when the
        endpoint lists it or cannot list anything. Without a configured LLM, no name is known."""
        if not self.settings.llm_configured:
            return False
        wanted = model_id(name)
        if not wanted:
            return False
        if wanted == self.settings.llm_model:
            return True
        served = self.served()
        return served is None or wanted in served
