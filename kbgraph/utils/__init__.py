"""Small helpers every layer may use: progress events, a shared thread pool, garbage-collector
scopes for bulk work, top-k selection and the per-user cache. Nothing here imports the rest of
kbgraph."""
