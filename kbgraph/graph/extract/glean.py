"""Whether a chunk's first LLM extraction pass gets a gleaning round.

Gleaning (asking the model, after its first answer, for the entities it left out) re-sends the
whole conversation, the chunk and the first answer, so it costs as much as the first pass. It exists to
recover names the first pass left out. Policies (``Settings.glean_policy``):

* ``always``: every chunk of at least ``glean_min_tokens`` tokens is gleaned (GraphRAG,
  nano-graphrag and LightRAG do this).
* ``missed`` (default): the offline name detector of the nlp extractor (``nlp.detect``) lists the
  proper names of the chunk (capitalised runs in Latin script, jieba's person/place/organization
  tags in Chinese);
  the chunk is gleaned only when the first pass left out at least ``glean_missed_names`` of them.
  A first pass that lists every name the text visibly holds has nothing for gleaning to recover
  that the detector could point at; one that left names out gets its round.

A detected name counts as listed when the first pass named an entity (or a relation endpoint)
whose words contain the detected name's words or are contained in them ("Bob" and "Bob Cratchit",
"Mrs. Cratchit" and "Cratchit"). Words are compared as the detector reads them, letters only, so
"Scrooge3" listed by the model is the detector's "Scrooge"; names without Latin letters (Chinese)
match when one key contains the other.

What it risks: names the detector cannot see (lower-case concepts, events named by common nouns)
are never a reason to glean, so a first pass that found every proper name but skipped such
concepts is not asked again. The tolerance of one missed name absorbs the detector's own false
positives (a capitalised word that is no name).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from kbgraph.graph.extract.nlp.detect import proper_names
from kbgraph.graph.keys import normalize_key
from kbgraph.llm.base import UsageLedger

GLEAN_POLICIES: tuple[str, ...] = ("missed", "always")
# why a chunk was or was not gleaned, as the run's report counts them
SHORT, ALWAYS, MISSED, COVERED = "short", "always", "missed names", "names covered"

_LETTERS = re.compile(r"[A-Za-zÀ-ÖØ-öø-ÿĀ-ɏ]+")
_CONNECTORS = frozenset("of the de von van der den da di du la le del des and".split())


@dataclass(frozen=True)
class GleanDecision:
    glean: bool
    reason: str
    missed: tuple[str, ...] = ()


@lru_cache(maxsize=65536)
def _words(name: str) -> frozenset[str]:
    return frozenset(w for w in _LETTERS.findall(normalize_key(name)) if w not in _CONNECTORS)


def _listed(detected: str, listed: list[tuple[frozenset[str], str]]) -> bool:
    words = _words(detected)
    if words:
        return any(own and (words <= own or own <= words) for own, _ in listed)
    key = normalize_key(detected)  # no Latin letters (Chinese): one key inside the other
    return any(key and other and (key in other or other in key) for _, other in listed)


def missed_names(detected: Iterable[str], listed: Iterable[str]) -> list[str]:
    """The detected names no listed name covers (see the module's matching rule)."""
    own = [(_words(name), normalize_key(name)) for name in listed]
    return [name for name in detected if not _listed(name, own)]


class GleanGate:
    """Decides per chunk, after the first pass, whether a gleaning round may add something."""

    def __init__(self, policy: str = "missed", min_tokens: int = 0, missed_names_min: int = 2) -> None:
        if policy not in GLEAN_POLICIES:
            raise ValueError(f"unknown glean policy {policy!r}; expected one of {', '.join(GLEAN_POLICIES)}")
        self.policy = policy
        self.min_tokens = max(0, int(min_tokens))
        self.missed_names_min = max(1, int(missed_names_min))

    def decide(self, text: str, tokens: int, listed: Iterable[str]) -> GleanDecision:
        if tokens < self.min_tokens:
            return GleanDecision(False, SHORT)
        if self.policy == "always":
            return GleanDecision(True, ALWAYS)
        missed = missed_names(proper_names(text), listed)
        if len(missed) >= self.missed_names_min:
            return GleanDecision(True, MISSED, tuple(missed))
        return GleanDecision(False, COVERED, tuple(missed))


def record_glean(ledger: UsageLedger | None, decision: GleanDecision) -> None:
    """Count the decision in the run's ledger ("glean: missed names" 12, "glean: names covered" 31...)."""
    if ledger is not None:
        ledger.count(f"glean: {decision.reason}")
