"""``kbgraph-web``: serve the REST API and manage API keys.

    kbgraph-web serve --host 127.0.0.1 --port 9380      # gunicorn: web_workers x web_threads
    kbgraph-web serve --dev                             # Flask's development server (debugging only)
    kbgraph-web apikey create --tenant acme [--name ci]
    kbgraph-web apikey list --tenant acme
    kbgraph-web setup-assets                            # npm-install and bundle the graph view's libraries
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from kbgraph.config import ConfigError, load_settings
from kbgraph.meta import MetaDB, MetaError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kbgraph-web", description="kbgraph's REST service")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the API under gunicorn (settings web_workers, web_threads)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=9380)
    serve.add_argument("--dev", action="store_true", help="Flask's development server instead (one process)")
    serve.add_argument("--debug", action="store_true", help="with --dev: Flask's debugger and reloader")
    assets = commands.add_parser("setup-assets", help="install the graph view's browser libraries with npm")
    assets.add_argument("--force", action="store_true", help="reinstall and rebuild even if built")
    keys = commands.add_parser("apikey", help="API keys (each maps to one tenant)")
    key_commands = keys.add_subparsers(dest="action", required=True)
    create = key_commands.add_parser("create", help="create a key and print it (shown only once)")
    create.add_argument("--tenant", required=True)
    create.add_argument("--name", default="")
    listing = key_commands.add_parser("list", help="list a tenant's keys (hashes only)")
    listing.add_argument("--tenant", required=True)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "setup-assets":
        from web.ui.assets import AssetsError, setup_assets

        try:
            print(f"graph view libraries ready: {setup_assets(force=args.force)}")
        except AssetsError as exc:
            print(f"kbgraph-web: {exc}", file=sys.stderr)
            return 1
        return 0
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"kbgraph-web: {exc}", file=sys.stderr)
        return 2
    if args.command == "serve":
        from web.ui.assets import AssetsError, setup_assets

        try:
            setup_assets()  # once: npm-installs the graph view's libraries if they are not there yet
        except AssetsError as exc:
            print(f"kbgraph-web: the graph view will not draw until this is fixed: {exc}", file=sys.stderr)
        if args.dev:
            from web.app import create_app

            create_app(settings).run(host=args.host, port=args.port, debug=args.debug, threaded=True)
        else:
            from task_executor.metrics import use_multiprocess_dir

            # the gunicorn workers' metrics, added up at each scrape; before prometheus_client loads
            use_multiprocess_dir(settings.data_dir.resolve() / "metrics" / f"web-{os.getpid()}")
            from web.server import serve

            serve(settings, args.host, args.port)
        return 0
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    with MetaDB.open(settings.meta_url) as meta:
        try:
            if args.action == "create":
                meta.ensure_tenant(args.tenant)
                _, token = meta.create_api_key(args.tenant, args.name)
                print(token)
            else:
                for key in meta.list_api_keys(args.tenant):
                    print(f"{key.token_hash[:16]}…  {key.name or '-'}  created {key.created}")
        except MetaError as exc:
            print(f"kbgraph-web: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
