"""Chat layers: cache, retry, per-minute budget, concurrency limit and token accounting, each
wrapping the next, one module each (the request, completion and stream they pass are in base.py).

Every layer is itself a ChatModel. Besides the protocol's ``chat``/``stream`` they speak an
internal richer call, ``complete(request) -> Completion`` and ``open_stream(request) ->
TextStream``, so token counts from the server travel back up through the layers without any
shared mutable "last call" state. The factory stacks them, outermost first:

    CachedChat -> RetryingChat -> BudgetedChat -> LimitedChat (KB) -> LimitedChat -> AccountedChat -> OpenAIChat

The cache sits outside the retry loop (a hit never retries or waits for a slot), the limit sits
inside it (a request sleeping in backoff does not hold a slot), and accounting sits next to the
wire so that every attempt, failed or not, is counted once.
"""

from kbgraph.llm.layers.accounting import AccountedChat, count_message_tokens, record_usage
from kbgraph.llm.layers.base import (
    ChatBase,
    ChatLayer,
    ChatRequest,
    Check,
    Completion,
    TextStream,
    TransientLLMError,
)
from kbgraph.llm.layers.budget import Budget, BudgetedChat, RequestBudget, shared_budget
from kbgraph.llm.layers.cache import CachedChat, SqliteCache, chat_cache_key
from kbgraph.llm.layers.retry import RetryingChat, RetryPolicy, call_with_retry
from kbgraph.llm.layers.slots import (
    LimitedChat,
    PrioritySlots,
    ProcessSlots,
    Slots,
    call_priority,
    shared_semaphore,
)

__all__ = [
    "AccountedChat", "Budget", "BudgetedChat", "CachedChat", "ChatBase", "ChatLayer", "ChatRequest", "Check",
    "Completion", "LimitedChat", "PrioritySlots", "ProcessSlots", "RequestBudget", "RetryPolicy", "RetryingChat",
    "Slots", "SqliteCache", "TextStream", "TransientLLMError", "call_priority", "call_with_retry", "chat_cache_key",
    "count_message_tokens", "record_usage", "shared_budget", "shared_semaphore",
]
