"""Entity keys merged by entity resolution, as derivation reads them: a row is derived under its
canonical key from the mentions of every alias."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property

from kbgraph.store.base import DocStore, eq
from kbgraph.store.records import ResolutionDecision


@dataclass(frozen=True)
class AliasMap:
    """Entity keys merged by resolution: alias key -> canonical key (see resolution.plan_merges)."""

    canonical: Mapping[str, str] = field(default_factory=dict)

    def canon(self, key: str) -> str:
        return self.canonical.get(key, key)

    def pair(self, a: str, b: str) -> tuple[str, str]:
        low, high = sorted((self.canon(a), self.canon(b)))
        return low, high

    def members(self, key: str) -> set[str]:
        return {key, *self._aliases_of.get(key, ())}

    @cached_property
    def _aliases_of(self) -> dict[str, list[str]]:
        # members() is asked for every touched key: one pass over the map, not one per key
        grouped: dict[str, list[str]] = defaultdict(list)
        for alias, canon in self.canonical.items():
            grouped[canon].append(alias)
        return dict(grouped)


NO_ALIASES = AliasMap()


def load_aliases(store: DocStore, tenant: str, kb_id: str) -> AliasMap:
    from kbgraph.graph.resolution import Decision, plan_merges

    decisions = [ResolutionDecision.from_doc(d) for d in
                 store.scan(tenant, [kb_id], [eq("knowledge_graph_kwd", ResolutionDecision.KIND)])]
    return AliasMap(plan_merges(Decision(d.key_a, d.key_b, d.same) for d in decisions))
