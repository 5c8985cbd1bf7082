"""Entity and relation rows derived from their mentions (DESIGN.md principle 1).

Mentions are the source of truth. For a set of touched keys recompute.py reads every remaining
mention of those keys, derives the rows from them alone, writes the rows, and removes rows with
no mention left. When a merge adds one document's mentions to an entity row that does not cite the
document yet, the row's stored state (counts, and where the fragments its description shows first
occur) stands in for the older mentions, so a frequent entity costs the same to merge as a rare one;
the result is the same row, which tests/graph/test_extend_entity.py checks.

Derivation depends only on the set of mentions (every choice is order-free or made on a sorted
order), so the graph after any sequence of adds and deletes equals a rebuild from the remaining
mentions; ``kbgraph.graph.invariants`` checks exactly that.

Phase products stored on entity rows (PageRank, community ids) are carried over from the
existing row: the KB phases own them and are marked stale whenever the graph changes.

The modules: recompute.py re-derives and writes the rows of touched keys (the change, DeriveResult);
entities.py and relations.py derive one row from its mentions; fragments.py orders the mentions'
description fragments; mentions.py reads mentions and finds the keys a change touches; aliases.py
holds the keys resolution merged, with the users' corrections (corrections.py) laid over them; vectors.py
says what each row embeds and makes vectors from chunks.
This package exports nothing: import the modules.
"""
