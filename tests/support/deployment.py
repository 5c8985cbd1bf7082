"""The shape of a deployment across machines, as tests/service/test_many_hosts.py runs it and
docker/compose.yaml ships it (tests/unit/test_docker_compose.py): which service holds what."""

from __future__ import annotations

from urllib.parse import urlsplit

from kbgraph.config import Settings

# what every host's settings point at: the document store, the metadata database, the blob store
# and the task queue, each a service of its own on the network
DEPLOYMENT_SHAPE = {"store": "elasticsearch", "metadata": "postgresql", "blob_store": "s3", "queue": "redis"}


def deployment_shape(settings: Settings) -> dict[str, str]:
    return {"store": settings.store,
            "metadata": urlsplit(settings.database_url).scheme.split("+")[0] if settings.database_url else "sqlite",
            "blob_store": settings.blob_store, "queue": urlsplit(settings.redis_url).scheme}
