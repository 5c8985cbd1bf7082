"""The embedded DocStore: one SQLite file; BM25 and kNN from in-memory indexes kept in step with it.

Per tenant (``t<hash>`` tag, so any tenant string maps to a safe identifier) the file holds:

- ``<tag>_docs``: rowid, ``id`` (unique), ``kb_id``, ``kg`` (= knowledge_graph_kwd) and the document
  as JSON without its vectors;
- ``<tag>_kv``: one row per (field, value, doc) for every ``*_kwd``/``*_int``/``*_flt`` value and
  ``doc_id`` (list elements each get a row), indexed both ways, so keyword/range filters are index
  lookups instead of JSON scans. Fields no query filters on (``records.UNFILTERED_FIELDS``, e.g.
  display names) get no kv rows: a condition, ordering or aggregation on one computes the values its
  kv rows would hold from each body instead (same answer, slower);
- ``<tag>_vec``: float32 blobs per (doc, vector field), with kb and kind for cache partitions;
- ``<tag>_fts<code>``: one contentless FTS5 table per text field, so BM25 statistics (document count,
  document frequency; ``kb_fts`` keeps row and token counts) are per field, as in Elasticsearch;
- ``<tag>_log``: a change log of the rows every write touched (see ``_ensure_log``).

Text tokens are written to FTS5 hex-encoded: every token becomes a run of [0-9a-f], so FTS5's
tokenizer splits on spaces only, never folds case and never mangles CJK or punctuation; matching is
exact, like Elasticsearch's whitespace analyzer. Scores are Lucene's BM25 (idf = ln(1 + (N - n +
0.5) / (n + 0.5)), k1 1.2, b 0.75) from those statistics and per-row term frequencies held in memory
(``text_index``) per KB and kind; vectors are held in memory the same way (``vector_index``: exact
for small slices, an inverted file for large ones). A process keeps these indexes current by
reading the change log since the generation it last saw, so another process's writes cost it only
what changed.

Every write runs in one ``BEGIN IMMEDIATE`` transaction (WAL, synchronous=NORMAL): a killed process
leaves either the whole batch or none of it.

The package, one file per concern (``SQLiteStore`` in store.py is composed of their mixins):

- store.py: ``SQLiteStore`` itself, its state and ``close``;
- connections.py: the connection pool, leases, read and write transactions, ``batch()``;
- schema.py: the shared and per-tenant tables, their names and field codes, upgrades of older files;
- change_log.py: write generations and the change log the in-memory indexes catch up from;
- fields.py: how a field is stored (by its suffix) and how bodies and values are encoded;
- filters.py: conditions compiled to SQL;
- index_writes.py: the kv, FTS and vector rows a write changes, queued and applied in bulk;
- writes.py: upsert, patch, update and delete;
- reads.py: get, count, scan, aggregate and loading rows by rowid;
- listing.py: searches with neither text nor vector (filtered, ordered pages);
- term_search.py: BM25 (with text_index.py's postings);
- vector_search.py: kNN (with vector_index.py's slices and row_set.py's sets);
- fusion.py: ``search``: both halves fused into one ranked page;
- slice_cache.py: the in-memory indexes and filter sets, cached and kept current;
  kbgraph/store/index_files.py keeps the large ones on disk for the next process.
"""

from kbgraph.store.sqlite.store import SQLiteStore

__all__ = ["SQLiteStore"]
