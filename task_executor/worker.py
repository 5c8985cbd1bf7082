"""``kbgraph-worker``: a Celery worker for kbgraph's tasks, configured from kbgraph's settings.

Arguments after the command are Celery worker options, e.g.
``kbgraph-worker --concurrency 4 --loglevel INFO``. The queue is always kbgraph's own.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from kbgraph.config import ConfigError, load_settings
from task_executor.celery_app import QUEUE, make_celery
from task_executor.metrics import use_multiprocess_dir


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        print("\nCelery's worker options follow:\n")
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"kbgraph-worker: {exc}", file=sys.stderr)
        return 2
    if settings.worker_metrics_port:  # before prometheus_client is imported (task_executor/metrics.py)
        use_multiprocess_dir(settings.data_dir.resolve() / "metrics" / f"worker-{os.getpid()}")
    app = make_celery(settings)
    if not any(a == "--loglevel" or a.startswith(("--loglevel=", "-l")) for a in args):
        args += ["--loglevel", "INFO"]
    app.worker_main(["worker", "--queues", QUEUE, *args])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
