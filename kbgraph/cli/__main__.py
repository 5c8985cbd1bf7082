"""`python -m kbgraph.cli`: the `kbgraph` command without its console script (the tests run it so).

Importing kbgraph.cli.root runs kbgraph/cli/__init__.py first, which registers every command on
`main`.
"""

from kbgraph.cli.root import main

if __name__ == "__main__":
    main()
