"""LLM extraction ("general" and "light"): one prompt per chunk, then optional gleaning.

Conversation, with G = max_gleanings:
    user: extraction prompt (input text last)      -> assistant: records        phase "extract"
    user: glean_continue                           -> assistant: more records   phase "glean"
    user: glean_check ("answer YES or NO")         -> assistant: YES / NO       phase "glean"
    ... continue/check repeat; no check after the G-th continue (its answer could not be used).
    The check exchange is not kept in the history: a further continue follows the last records.

A first answer with nothing readable in it is asked again once under a different prompt version
(``#retry1``), so the response cache cannot hand back the same garbage, and at a higher temperature;
if that is unreadable too the chunk fails with ``ExtractionError``. Unreadable answers are never
cached, so the next run asks again. Unreadable gleaning answers are ignored: gleaning only ever adds.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from kbgraph.graph.extract.base import ChunkExtraction, ExtractedEntity, ExtractedRelation, ExtractionError
from kbgraph.graph.extract.finalize import finalize
from kbgraph.graph.extract.glean import GleanGate, record_glean
from kbgraph.graph.extract.output_parser import ParsedOutput, parse_records
from kbgraph.llm.base import Cancelled, CancelCheck, ChatModel, Message, UsageLedger
from kbgraph.parse.token_count import count_tokens
from kbgraph.prompts import prompt_version, render

TUPLE_DELIMITER = "<|>"
RECORD_DELIMITER = "##"
COMPLETION_DELIMITER = "<|COMPLETE|>"
RETRY_TEMPERATURE = 0.7
# A model that found nothing sometimes says so in words instead of writing only the completion marker.
_SAYS_EMPTY = re.compile(r"\bno (?:named |relevant |notable )?(?:entities|entity|relationships|relations)\b", re.I)
_YES = re.compile(r"^\W*(yes|y)\b", re.I)


def _garbled(answer: str, parsed: ParsedOutput) -> bool:
    """Nothing usable although the answer should have held records."""
    if not parsed.empty:
        return False
    if parsed.complete and parsed.dropped == 0:
        return False  # an explicit empty extraction
    return not (answer.strip() and parsed.dropped == 0 and _SAYS_EMPTY.search(answer[:500]))


class LLMExtractor:
    def __init__(self, chat: ChatModel, method: str = "general", entity_types: Sequence[str] = (),
                 language: str = "English", max_gleanings: int = 1, glean_min_tokens: int = 0,
                 glean_policy: str = "always", glean_missed_names: int = 2, ledger: UsageLedger | None = None) -> None:
        if method not in ("general", "light"):
            raise ValueError(f"LLMExtractor handles 'general' and 'light', not {method!r}")
        self.chat = chat
        self.method = method
        self.entity_types = list(entity_types) or ["organization", "person", "geo", "event", "category"]
        self.language = language or "English"
        self.max_gleanings = max(0, int(max_gleanings))
        # a chunk shorter than glean_min_tokens is not gleaned: one pass lists what a short text
        # names, and a gleaning round costs a call that re-sends the whole conversation; under
        # the "missed" policy neither is one whose first pass listed the names it holds (glean.py)
        self.glean_gate = GleanGate(glean_policy, glean_min_tokens, glean_missed_names)
        self.ledger = ledger
        self.template = f"extract_{method}"
        self._delims = {"tuple_delimiter": TUPLE_DELIMITER, "record_delimiter": RECORD_DELIMITER,
                        "completion_delimiter": COMPLETION_DELIMITER}
        self._version = prompt_version(self.template)
        self._continue_text = render("glean_continue", language=self.language, light=method == "light",
                                     **self._delims)
        self._check_text = render("glean_check")
        self._continue_version = f"{self._version}+{prompt_version('glean_continue')}"
        self._check_version = f"{self._version}+{prompt_version('glean_check')}"

    def prompt(self, text: str) -> str:
        return render(self.template, entity_types=self.entity_types, language=self.language, input_text=text,
                      **self._delims)

    def _parse(self, answer: str) -> ParsedOutput:
        return parse_records(answer, TUPLE_DELIMITER, RECORD_DELIMITER, COMPLETION_DELIMITER)

    def _readable(self, answer: str) -> bool:
        return not _garbled(answer, self._parse(answer))

    def _call(self, messages: list[Message], phase: str, version: str, cancel: CancelCheck | None,
              temperature: float | None = None, max_tokens: int | None = None, *, checked: bool = False) -> str:
        if cancel is not None and cancel():
            raise Cancelled("extraction cancelled")
        # a checked answer is cached only when readable: a garbled one is asked again on the next run
        return self.chat.chat(messages, phase=phase, prompt_version=version, temperature=temperature,
                              max_tokens=max_tokens, cancel=cancel, accept=self._readable if checked else None)

    def extract(self, text: str, *, cancel: CancelCheck | None = None) -> ChunkExtraction:
        if not text.strip():
            return ChunkExtraction()
        messages = [Message("user", self.prompt(text))]
        answer = self._call(messages, "extract", self._version, cancel, checked=True)
        calls = 1
        parsed = self._parse(answer)
        if _garbled(answer, parsed):
            answer = self._call(messages, "extract", f"{self._version}#retry1", cancel,
                                temperature=RETRY_TEMPERATURE, checked=True)
            calls += 1
            parsed = self._parse(answer)
            if _garbled(answer, parsed):
                raise ExtractionError(f"unreadable extraction answer after a retry ({self.method}): {answer[:200]!r}")
        entities: list[ExtractedEntity] = list(parsed.entities)
        relations: list[ExtractedRelation] = list(parsed.relations)
        dropped = parsed.dropped

        gleanings = 0
        if self.max_gleanings:
            listed = [e.name for e in entities] + [n for r in relations for n in (r.source, r.target)]
            decision = self.glean_gate.decide(text, count_tokens(text), listed)
            record_glean(self.ledger, decision)
            gleanings = self.max_gleanings if decision.glean else 0
        for round_no in range(1, gleanings + 1):
            messages += [Message("assistant", answer), Message("user", self._continue_text)]
            answer = self._call(messages, "glean", self._continue_version, cancel)
            calls += 1
            more = self._parse(answer)
            entities += more.entities
            relations += more.relations
            dropped += more.dropped
            if round_no == gleanings:
                break
            check = messages + [Message("assistant", answer), Message("user", self._check_text)]
            verdict = self._call(check, "glean", self._check_version, cancel, max_tokens=16)
            calls += 1
            if not _YES.match(verdict or ""):
                break
        return finalize(entities, relations, self.entity_types, text=text, dropped=dropped, llm_calls=calls)
