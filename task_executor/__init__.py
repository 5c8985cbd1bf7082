"""kbgraph's service-mode worker: Celery on Redis, running the pipeline per document."""
