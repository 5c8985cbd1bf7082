"""``kbgraph-web``: serve the REST API and manage API keys.

    kbgraph-web serve --host 127.0.0.1 --port 9380      # gunicorn: web_workers x web_threads
    kbgraph-web serve --dev                             # Flask's development server (debugging only)
    kbgraph-web apikey create --tenant acme [--name ci]
    kbgraph-web apikey list --tenant acme
    kbgraph-web user create --email a@acme.com --tenant acme   # a web account acting for a tenant
    kbgraph-web user link --email a@acme.com --tenant acme     # an existing account moved to a tenant
    kbgraph-web tenants                                        # every tenant, its accounts and keys
    kbgraph-web providers reseal                        # providers' keys sealed again with provider_key_secret
    kbgraph-web setup-assets                            # npm-install and bundle the graph view's libraries
    kbgraph-web db upgrade                              # the metadata schema to the newest revision
    kbgraph-web db current | history                    # its revision; every revision
    kbgraph-web db revision -m "what changes"           # (developers) a new revision from models.py
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from datetime import datetime, timezone

from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from kbgraph.config import ConfigError, Settings, load_settings
from kbgraph.meta import SCHEMA_HEAD, MetaDB, MetaError, database_revision, schema_history, upgrade_database


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
    users = commands.add_parser("user", help="web accounts (each acts for one tenant)")
    user_commands = users.add_subparsers(dest="action", required=True)
    made = user_commands.add_parser("create", help="a web account for an existing tenant (asks for the password)")
    made.add_argument("--email", required=True)
    made.add_argument("--tenant", required=True, help="an existing tenant (`kbgraph-web tenants` lists them)")
    made.add_argument("--password-stdin", action="store_true", help="read the password from stdin's first line")
    link = user_commands.add_parser("link", help="move an existing account to an existing tenant")
    link.add_argument("--email", required=True)
    link.add_argument("--tenant", required=True)
    commands.add_parser("tenants", help="every tenant with its web accounts and API keys")
    providers = commands.add_parser("providers", help="tenants' model providers")
    provider_commands = providers.add_subparsers(dest="action", required=True)
    provider_commands.add_parser("reseal", help="seal every provider's API key again with provider_key_secret, after "
                                 "changing it (the old value listed in provider_key_previous_secrets)")
    db = commands.add_parser("db", help="the metadata database's schema (Alembic migrations)")
    db_commands = db.add_subparsers(dest="action", required=True)
    db_commands.add_parser("upgrade", help="create, adopt or upgrade the schema to the newest revision")
    db_commands.add_parser("current", help="print the revision the database is at")
    db_commands.add_parser("history", help="list the revisions, newest first")
    revision = db_commands.add_parser("revision", help="(developers) write a new revision: the difference "
                                      "between kbgraph/meta/models.py and the database, which must be up to date")
    revision.add_argument("-m", "--message", required=True)
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
    if args.command == "db":
        return _db(settings, args.action, getattr(args, "message", ""))
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

            try:
                serve(settings, args.host, args.port)
            except (MetaError, SQLAlchemyError) as exc:  # the schema upgrade before the workers start
                print(f"kbgraph-web: the metadata database {_shown(settings)}: {_first_line(exc)}", file=sys.stderr)
                return 2
        return 0
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    if args.command in ("user", "tenants"):
        from web.accounts_cli import accounts_command

        return accounts_command(settings, args)
    if args.command == "providers":
        return _reseal(settings)
    with MetaDB.open(settings.meta_url) as meta:
        try:
            if args.action == "create":
                meta.ensure_tenant(args.tenant)
                _, token = meta.create_api_key(args.tenant, args.name)
                print(token)
            else:
                for key in meta.list_api_keys(args.tenant):
                    print(f"{key.token_hash[:16]}…  {key.name or '-'}  created {_when(key.created)}")
        except MetaError as exc:
            print(f"kbgraph-web: {exc}", file=sys.stderr)
            return 2
    return 0


def _reseal(settings: Settings) -> int:
    """``kbgraph-web providers reseal``: after provider_key_secret changed (the old secret listed in
    provider_key_previous_secrets), every stored key sealed with the new one; keys no secret opens are
    named and left as they are."""
    from kbgraph.engine.providers import reseal_keys

    with MetaDB.open(settings.meta_url) as meta:
        resealed, unreadable = reseal_keys(settings, meta)
    print(f"{resealed} provider key(s) sealed again with provider_key_secret")
    if unreadable:
        print(f"kbgraph-web: {len(unreadable)} key(s) could not be opened with provider_key_secret or any of "
              f"provider_key_previous_secrets and were left as they are: {', '.join(unreadable)}; list the secret "
              "they were sealed with in provider_key_previous_secrets and run this again, or add those providers "
              "again", file=sys.stderr)
        return 1
    print("provider_key_previous_secrets can now be emptied")
    return 0


def _when(epoch_ms: int) -> str:
    return datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _shown(settings: Settings) -> str:
    return make_url(settings.meta_url).render_as_string(hide_password=True)


def _first_line(exc: BaseException) -> str:
    return (str(getattr(exc, "orig", None) or exc).strip().splitlines() or [type(exc).__name__])[0]


def _db(settings: Settings, action: str, message: str) -> int:
    """``kbgraph-web db ...``: the schema's revision, upgraded, listed, or a new one written."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    url = settings.meta_url
    try:
        if action == "upgrade":
            before = upgrade_database(url)
            print(f"{_shown(settings)}: at revision {SCHEMA_HEAD} (was {before or 'none'})")
        elif action == "current":
            found = database_revision(url)
            print(found or "none (no alembic_version table: `kbgraph-web db upgrade` creates or adopts the schema)")
        elif action == "history":
            print(schema_history(url).rstrip())
        else:
            from kbgraph.meta.migrate import write_revision

            print(f"wrote {write_revision(url, message)}: read it against kbgraph/meta/models.py")
    except (MetaError, SQLAlchemyError) as exc:
        print(f"kbgraph-web: the metadata database {_shown(settings)}: {_first_line(exc)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
