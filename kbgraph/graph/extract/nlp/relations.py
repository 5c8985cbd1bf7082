"""Relations without an LLM: two entities named in one sentence. With N the chunk's sentences, c(x)
the sentences naming x and c(x,y) those naming both, p = c/N and
    npmi(x,y) = log(p(x,y) / (p(x) p(y))) / -log p(x,y)        (npmi = 1 when p(x,y) = 1)
    weight    = c(x,y) * (1 + npmi(x,y)) / 2
npmi > -1 whenever c(x,y) >= 1, so the weight lies in (0, c(x,y)]: pairs that co-occur more than
their frequencies predict keep most of their count, ubiquitous names that happen to meet keep less.
Only the first 12 entities of a sentence are paired (lists and legal boilerplate would otherwise
add quadratically many pairs). Description: the shared sentence(s), about 300 characters.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict

from kbgraph.graph.extract.base import ExtractedRelation
from kbgraph.graph.extract.nlp.candidates import _Candidate
from kbgraph.graph.extract.nlp.sentences import _SPACES, _excerpt

MAX_PAIRED_PER_SENTENCE = 12


def sentence_mentions(occurrences: list[tuple[int, int, str]], keep: set[str]
                      ) -> tuple[dict[tuple[int, str], int], dict[int, list[str]]]:
    """Where each kept name is first mentioned in each sentence ((sentence, key) -> offset), and the
    kept names of each sentence in order of mention."""
    first_offset: dict[tuple[int, str], int] = {}
    by_sentence: dict[int, list[str]] = defaultdict(list)
    for si, off, key in sorted(occurrences):
        if key not in keep:
            continue
        if (si, key) not in first_offset:
            first_offset[(si, key)] = off
            by_sentence[si].append(key)
    return first_offset, by_sentence


def _name_and_its_part(x: str, y: str) -> bool:
    """One key is the other's part after "of" ("flood of varrow", "varrow")."""
    return any(long.endswith((f" of {short}", f" of the {short}")) for long, short in ((x, y), (y, x)))


def cooccurrence_relations(text: str, spans: list[tuple[int, int]], cands: dict[str, _Candidate],
                           first_offset: dict[tuple[int, str], int], by_sentence: dict[int, list[str]],
                           sentence_count: Counter[str], limit: int) -> list[ExtractedRelation]:
    """The relations of the names sharing a sentence (``sentence_mentions``; ``sentence_count``: the
    sentences naming each), weighted as the module says, described in about ``limit`` characters."""
    n_sent = max(1, len(spans))
    pair_sents: dict[tuple[str, str], list[int]] = defaultdict(list)
    for si in sorted(by_sentence):
        keys = by_sentence[si][:MAX_PAIRED_PER_SENTENCE]
        for a in range(len(keys)):
            for b in range(a + 1, len(keys)):
                x, y = keys[a], keys[b]
                if _name_and_its_part(x, y):
                    continue  # "Flood of Varrow" and Varrow: the name says it, no fact of the text
                pair = (x, y) if x < y else (y, x)
                pair_sents[pair].append(si)
    relations: list[ExtractedRelation] = []
    for (x, y), sents in sorted(pair_sents.items(), key=lambda kv: (kv[1][0], kv[0])):
        cxy = len(sents)
        pxy = cxy / n_sent
        px, py = sentence_count[x] / n_sent, sentence_count[y] / n_sent
        npmi = 1.0 if pxy >= 1.0 else math.log(pxy / (px * py)) / -math.log(pxy)
        weight = cxy * (1.0 + max(-1.0, min(1.0, npmi))) / 2.0
        first = sents[0]
        focus = min(first_offset[(first, x)], first_offset[(first, y)])
        s, e = spans[first]
        desc = _excerpt(text[s:e], focus - s, limit)
        for si in sents[1:]:
            more = _SPACES.sub(" ", text[spans[si][0]:spans[si][1]].strip())
            if len(desc) + 1 + len(more) > limit:
                break
            desc = f"{desc} {more}"
        relations.append(ExtractedRelation(source=cands[x].name, target=cands[y].name, description=desc,
                                           keywords=[], weight=max(weight, 1e-6)))
    return relations
