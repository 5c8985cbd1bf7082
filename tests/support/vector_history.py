"""A knowledge base's history of adds, deletes and edits, replayed, and a fresh knowledge base of
the documents that remain: the tests of vectors made from chunks (relations', entities') compare the
two, row by row."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from hypothesis import strategies as st

from kbgraph.index.context import KBContext
from kbgraph.index.delete import delete_document
from kbgraph.index.embed_rows import embed_pending
from kbgraph.index.refresh_state import _graph_rows

# an edit keeps a document's sentences and changes the rest of its chunk: the rows' texts stay,
# their chunks' vectors do not
EDITED = " Rain fell on the harbour all week."

Add = Callable[[KBContext, str, str], None]


def operations(names: Sequence[str]) -> st.SearchStrategy[list[tuple[str, str]]]:
    return st.lists(st.tuples(st.sampled_from(["add", "delete", "edit"]), st.sampled_from(sorted(names))),
                    min_size=1, max_size=6)


def replay(ctx: KBContext, ops: Sequence[tuple[str, str]], docs: Mapping[str, str], add: Add) -> dict[str, str]:
    """Apply ``ops`` in order, embedding after each; returns the documents left, with their texts."""
    present: dict[str, str] = {}
    for op, name in ops:
        if op == "delete":
            if name in present:
                delete_document(ctx, name)
                del present[name]
        else:
            text = docs[name] if op == "add" else docs[name] + EDITED
            add(ctx, name, text)
            present[name] = text
        embed_pending(ctx, _graph_rows(ctx))
    return present


def build(ctx: KBContext, present: Mapping[str, str], add: Add) -> None:
    """Index ``present`` into a fresh ``ctx`` at once, as a KB that never saw the rest would be."""
    for name in sorted(present):
        add(ctx, name, present[name])
    embed_pending(ctx, _graph_rows(ctx))
