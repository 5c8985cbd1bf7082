"""Every proper name of a chunk: the Latin-script names (names.py) and, in text with CJK characters,
the Chinese ones (chinese.py), found outside boilerplate, with short forms merged into the one longer
name they stand for. The nlp extractor types and describes these; the LLM extractor's gleaning gate
(glean.py) compares its first pass against the bare list (``proper_names``), without loading the
extractor.
"""

from __future__ import annotations

import bisect
import re

from kbgraph.graph.extract.nlp.candidates import _Candidate, _key, _link_short_names, _proven_candidate
from kbgraph.graph.extract.nlp.chinese import _cjk_titles, chinese_names
from kbgraph.graph.extract.nlp.names import latin_names
from kbgraph.graph.extract.nlp.sentences import _CJK_CHAR, _sentences, _without_boilerplate
from kbgraph.graph.extract.nlp.structure import Structure, read_structure

# "（英文：Canada Place）", "（Hopley）": a Latin-script name in parentheses, after an optional label
_GLOSS = re.compile(r"[（(][ \t]*(?:(?:英文|英语|英文名|英语名|原名|外文名?|德文|法文|德语|法语)[:：][ \t]*)?"
                    r"([A-Za-z\u00c0-\u024f][A-Za-z0-9\u00c0-\u024f.'’&\- ]{1,60}?)[ \t]*[）)，,;；]")


def find_names(text: str) -> tuple[list[tuple[int, int]], dict[str, _Candidate], list[tuple[int, int, str]],
                                   set[str]]:
    """The chunk's sentences, its name candidates by key, every (sentence, offset, key) occurrence,
    and the keys of the candidates proven to be names."""
    spans = _sentences(text)
    starts = [s for s, _ in spans]
    names_text = _without_boilerplate(text, spans)
    structure = read_structure(names_text)
    names_text = structure.blanked(names_text)  # labels, tags, dates: same length, offsets hold
    cands: dict[str, _Candidate] = {}
    # (sentence index, char offset, key) of every accepted-or-pending occurrence
    occurrences: list[tuple[int, int, str]] = []
    _structure_people(structure, starts, cands, occurrences)
    cjk = _CJK_CHAR.search(names_text) is not None
    cjk_titles = _cjk_titles(names_text) if cjk else []
    latin_names(names_text, spans, starts, cands, occurrences, cjk_titles, structure.utterances, structure.values,
                structure.named_values)
    if cjk:
        chinese_names(names_text, spans, starts, cjk_titles, cands, occurrences)
    if cjk:
        occurrences = _link_glosses(names_text, cands, occurrences)
    occurrences = _link_short_names(cands, occurrences)
    keep = {k for k, c in cands.items() if c.proven}
    return spans, cands, occurrences, keep


def _link_glosses(text: str, cands: dict[str, _Candidate], occurrences: list[tuple[int, int, str]]
                  ) -> list[tuple[int, int, str]]:
    """A Latin-script name in parentheses right after a Chinese name, alone or after a label
    ("加拿大广场（英文：Canada Place）", "霍普利（Hopley）"), is that entity's name in another
    language: its occurrences and votes move to the Chinese name. So do the parts of it the Latin
    name finder read alone ("Mohammed" of "穆罕默德•杰登（Mohammed al-Jadaan）", "Beust" of "（Von
    Beust）"): the gloss is one name, however its particles are written."""
    at = {(off, key) for _, off, key in occurrences}
    ends = {off + len(cands[key].name): key for off, key in at if key in cands and _CJK_CHAR.match(cands[key].name)}
    moved: dict[str, str] = {}
    for m in _GLOSS.finditer(text):
        target = ends.get(m.start())
        if target is None:
            continue
        inside = {key for off, key in at if m.start(1) <= off < m.end(1) and key in cands and key != target
                  and not _CJK_CHAR.search(cands[key].name)}
        for gloss in sorted(inside - set(moved)):
            moved[gloss] = target
            full, cand = cands[target], cands.pop(gloss)
            full.votes.update(cand.votes)
            full.sentences = sorted(set(full.sentences) | set(cand.sentences))
    return [(si, off, moved.get(key, key)) for si, off, key in occurrences]


def _structure_people(structure: Structure, starts: list[int], cands: dict[str, _Candidate],
                      occurrences: list[tuple[int, int, str]]) -> None:
    """The people the chunk's structure names (senders, IRC nicks), persons wherever they stand."""
    for name, places in structure.people.items():
        key = _key(name)
        if not key:
            continue
        for start, _end in sorted(places):
            cand = _proven_candidate(cands, occurrences, name, key, start, bisect.bisect_right(starts, start) - 1)
            cand.votes["person"] += 3


def proper_names(text: str) -> list[str]:
    """The proper names the nlp extractor would list for ``text``, in order of first mention, without
    typing, descriptions or relations: a cheap, model-free list of what the text names (the LLM
    extractor checks its first pass against it before spending a gleaning round)."""
    if not text.strip():
        return []
    _, cands, _, keep = find_names(text)
    return [cands[k].name for k in sorted(keep, key=lambda k: (cands[k].first_pos, k))]
