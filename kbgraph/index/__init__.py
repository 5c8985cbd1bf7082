"""The indexing pipeline: documents to chunks, mentions and graph rows, and the knowledge base's
graph phases kept current.

Each step is idempotent (deterministic ids; a rerun rewrites the same rows), resumable after a
crash (a rerun picks up from what is stored), reports progress through a callback and honours a
cancel check between units of work. The engine (kbgraph.engine), the Celery tasks and the CLI call
these. One module per concern:

- ``context``: ``KBContext``, what every step knows of one knowledge base; progress and cancel helpers
- ``chunks``: a document's text chunked, embedded and stored (``parse_document``, ``store_chunks``)
- ``extraction``: entity and relation mentions extracted from chunks
- ``graph_meta``: the knowledge base's ``graph_meta`` row (version, counts, mention format)
- ``merge``: mentions into entity and relation rows; ``delete``: a document or the whole graph removed
- ``refresh``: the phases after a batch (``refresh_kb``), with ``refresh_state`` (the rows and
  changes they share), ``summaries``, ``embed_rows``, ``pagerank``, ``resolution``, ``communities``
  and ``reports`` (community reports), ``schedule`` (summaries and reports overlapped)
- ``run`` and ``run_merge``: an indexing run of many documents (``IndexRun``), ``documents`` (its
  inputs and outcomes), ``estimate`` (its cost beforehand), ``summaries_ahead`` (summaries asked in
  the calls its last chunks leave free)
- ``chunk_edit``: chunks edited by hand; ``reembed``: a knowledge base moved to another embedder

Nothing is imported here: a query process loads none of this (the engine imports these modules in
the methods that index).
"""
