"""``python -m kbgraph.llm.e5``: prepare the local embedding model ahead of time (a Docker image
does, at build) and print the folder it is prepared in."""

from kbgraph.llm.e5.preparation import default_cache_root, prepared_dir
from kbgraph.llm.e5.weights import bundled_weights

if __name__ == "__main__":
    print(prepared_dir(bundled_weights(), default_cache_root()))
