"""The knowledge base's entity types as the nlp extractor fills them.

The extractor recognises five kinds of name: people, organizations, places, events, and other
names (products, works, anything its cues cannot place). Each kind goes to the first configured type
that names it or a synonym of it ("place", "location", "city" take the places; "company",
"org" the organizations; "people", "character" the people); the other names go to a configured
catch-all type ("category", "concept", "other", "misc", "thing", "entity"). A name whose kind no
configured type takes gets ``FALLBACK_TYPE`` ("other"): with ``--entity-types person,ghost,place``
people are "person", places "place", everything else "other"; "ghost" stays empty, because no cue
of the nlp method can tell a ghost (an LLM method can). ``kbgraph config`` and the knowledge base
settings page say the same (kbgraph.config.ENTITY_TYPES_HELP).
"""

from __future__ import annotations

from collections.abc import Sequence

from kbgraph.config import NLP_FALLBACK_TYPE

FALLBACK_TYPE = NLP_FALLBACK_TYPE
KINDS: tuple[str, ...] = ("person", "organization", "geo", "event", "concept")

# kind -> the type names (lower case) that take it, first the ones that name it best
_TAKEN_BY: dict[str, tuple[str, ...]] = {
    "person": ("person", "people", "persons", "human", "humans", "individual", "character", "per", "speaker",
               "人物", "人名", "人"),
    "organization": ("organization", "organisation", "org", "company", "companies", "institution",
                     "corporation", "agency", "business", "firm", "team", "club", "组织", "机构", "公司"),
    "geo": ("geo", "location", "place", "places", "gpe", "loc", "country", "city", "region", "geography",
            "area", "地点", "地名", "地理"),
    "event": ("event", "events", "incident", "occasion", "事件"),
    "concept": ("category", "concept", "other", "misc", "miscellaneous", "thing", "entity", "object",
                "类别", "概念"),
}

# the types that say only "a name": an entity typed so may be the same as one of any type
CATCH_ALL_TYPES = frozenset(_TAKEN_BY["concept"])


def kind_types(entity_types: Sequence[str]) -> dict[str, str]:
    """Kind -> the configured type that takes it, ``FALLBACK_TYPE`` where none does."""
    configured = [t.strip() for t in entity_types if t.strip()]
    by_lower = {t.lower(): t.lower() for t in configured}
    out: dict[str, str] = {}
    for kind in KINDS:
        out[kind] = next((by_lower[name] for name in _TAKEN_BY[kind] if name in by_lower), "")
    catch_all = out["concept"] or FALLBACK_TYPE
    return {kind: t or catch_all for kind, t in out.items()}
