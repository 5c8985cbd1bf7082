"""The `kg` retrieval mode: question -> entities, relations, community reports and their chunks.

Scoring, every part in [0, 1]:

- seed relevance r(e) of an entity: probabilistic OR of its hybrid entity-search score (BM25 over
  names, boosted, and descriptions + kNN over entity vectors), an exact-name match of an analysed
  entity (1.0) and an answer-type match (BM25 of the keywords over descriptions, or the type itself);
- neighbour expansion, up to ``hops`` relations away, read from relation rows on demand: a
  neighbour b of a frontier entity a gets ``r(a) * decay * (0.5 + 0.5 * w/w_max(a))`` per path,
  the contributions of different paths OR-ed together, so an entity linking two question entities
  outranks one hanging off a single one;
- final entity score ``(1 - p) * r + p * pagerank/max_pagerank`` (a small PageRank prior);
- a relation scores by its own hybrid search score OR-ed with the score of the expansion that used
  it, plus the same small weight prior;
- a report scores by the summed scores of the chosen entities among its members (normalized)
  OR-ed with its own hybrid search score over report content;
- a chunk scores by the summed scores of the chosen entities and relations citing it, each
  damped by how many chunks it cites (an entity named everywhere says little about any one chunk).

The modules: params.py (``KGParams``), rows.py (graph rows read and turned into hits), scoring.py
(the formulas above, and the entities' chunk counts behind specificity), seeds.py (seed relevance),
facts.py (the anchors' relations scored against the question, and the bridge chunks they lead to),
expand.py (neighbour expansion), ranking.py (entities, relations, reports ranked) and retrieval.py
(``retrieve_kg``, which puts them together). This package exports nothing: import the modules.
"""
