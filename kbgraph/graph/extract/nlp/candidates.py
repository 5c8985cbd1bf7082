"""Name candidates: a name found in a chunk, where it occurs and the votes for its type, gathered
by the Latin-script and Chinese name finders and merged once both have run (a one-word name that is
the short form of exactly one longer name is that entity).
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import lru_cache

from kbgraph.graph.extract.nlp.sentences import _SPACES
from kbgraph.graph.extract.nlp.words import _EVENT_HEADS, _HOLIDAYS, _ORG_HEADS, _TITLE_ABBR
from kbgraph.graph.keys import normalize_key


@dataclass
class _Candidate:
    name: str
    key: str
    sentences: list[int] = field(default_factory=list)
    first_pos: int = 0
    votes: Counter[str] = field(default_factory=Counter)
    proven: bool = False  # seen where capitalization means a name
    name_part: bool = False  # seen after "of" in a longer name: its own entity, never that name's short form


def _proven_candidate(cands: dict[str, _Candidate], occurrences: list[tuple[int, int, str]], name: str, key: str,
                      pos: int, sentence: int) -> _Candidate:
    """The candidate of ``key`` (made with ``name`` at ``pos`` if new), proven a name, seen in ``sentence``."""
    cand = cands.get(key)
    if cand is None:
        cand = cands[key] = _Candidate(name=name, key=key, first_pos=pos)
    cand.proven = True
    if not cand.sentences or cand.sentences[-1] != sentence:
        cand.sentences.append(sentence)
    occurrences.append((sentence, pos, key))
    return cand


@lru_cache(maxsize=65536)
def _key(name: str) -> str:
    return normalize_key(name)


def _take_title(text: str, start: int, end: int, starts: list[int], cands: dict[str, _Candidate],
                occurrences: list[tuple[int, int, str]]) -> None:
    """A quoted title ("Moonlit Orchard", "Overwatch 3") as one name, typed by its head word if any."""
    name = _SPACES.sub(" ", text[start:end]).strip()
    key = _key(name)
    if not key:
        return
    cand = _proven_candidate(cands, occurrences, name, key, start, bisect.bisect_right(starts, start) - 1)
    head = name.split()[-1].lower()
    if head in _EVENT_HEADS or head in _HOLIDAYS:
        cand.votes["event"] += 3
    elif head in _ORG_HEADS:
        cand.votes["organization"] += 3


def _link_short_names(cands: dict[str, "_Candidate"], occurrences: list[tuple[int, int, str]]
                      ) -> list[tuple[int, int, str]]:
    """A one-word name that is the first or last word of exactly one longer name of the chunk ("Dev"
    and "Dev Patel", "Wren" and "Tobias Wren") is that entity: its occurrences and votes move there."""
    longer: dict[str, set[str]] = defaultdict(set)
    for key in cands:
        parts = key.split()
        # "Mrs. Fezziwig" is not "Fezziwig" (Mr. Fezziwig, titles dropped): titled names take no short form
        if len(parts) >= 2 and parts[0].rstrip(".") not in _TITLE_ABBR:
            longer[parts[0]].add(key)
            # "Maharashtra" is not the short form of "Chief Minister of Maharashtra": what follows
            # "of" names another entity (``_of_tail``)
            if parts[-2] != "of":
                longer[parts[-1]].add(key)
    moved: dict[str, str] = {}
    for key, cand in cands.items():
        if " " in key or key not in longer or len(longer[key]) != 1 or cand.name_part:
            continue
        target = next(iter(longer[key]))
        full = cands[target]
        if full.votes and cand.votes and full.votes.most_common(1)[0][0] != cand.votes.most_common(1)[0][0]:
            continue  # "Harbor" (a place) is not "Tin Harbor"'s short form only because it is its last word
        moved[key] = target
        full.proven = full.proven or cand.proven
        full.votes.update(cand.votes)
        full.sentences = sorted(set(full.sentences) | set(cand.sentences))
        full.first_pos = min(full.first_pos, cand.first_pos)
    for key in moved:
        del cands[key]
    return [(si, off, moved.get(key, key)) for si, off, key in occurrences]
