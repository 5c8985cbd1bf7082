"""``kbgraph-web user create|link`` and ``kbgraph-web tenants``: web accounts for the tenants that API
keys and the CLI (``kbgraph --tenant T``) work on, so that one tenant's knowledge bases are the same
through every door. Signing up on the pages still gives a new account a tenant of its own."""

from __future__ import annotations

import argparse
import getpass
import sys

from werkzeug.security import generate_password_hash

from kbgraph.config import Settings
from kbgraph.meta import MetaDB, MetaError

# the sign-up page's rule (web/ui/auth.py)
MIN_PASSWORD = 8


def _password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass("password: ")
    if first != getpass.getpass("again: "):
        raise MetaError("the two passwords differ")
    return first


def _require_tenant(meta: MetaDB, tenant: str) -> None:
    known = [t.id for t in meta.list_tenants()]
    if tenant not in known:
        raise MetaError(f"no tenant {tenant!r} (known: {', '.join(known) or 'none'}); "
                        f"`kbgraph-web apikey create --tenant {tenant}` makes one")


def _tenants(meta: MetaDB) -> None:
    users = meta.list_users()
    for tenant in meta.list_tenants():
        emails = [u.email for u in users if u.tenant_id == tenant.id]
        kbs = meta.list_kbs(tenant.id)
        print(f"{tenant.id}: {len(kbs)} knowledge base(s), {len(meta.list_api_keys(tenant.id))} API key(s), "
              f"accounts: {', '.join(emails) or '-'}")


def accounts_command(settings: Settings, args: argparse.Namespace) -> int:
    """Run one of the account commands; the exit code (2: the command cannot run as given)."""
    with MetaDB.open(settings.meta_url) as meta:
        try:
            if args.command == "tenants":
                _tenants(meta)
                return 0
            _require_tenant(meta, args.tenant)
            if args.action == "create":
                password = _password(args.password_stdin)
                if len(password) < MIN_PASSWORD:
                    raise MetaError(f"the password needs at least {MIN_PASSWORD} characters")
                user = meta.create_user(args.email, generate_password_hash(password), args.tenant)
                print(f"{user.email} signs in to tenant {args.tenant!r}")
            else:
                user, before = meta.set_user_tenant(args.email, args.tenant)
                left = len(meta.list_kbs(before)) if before != args.tenant else 0
                print(f"{user.email} now acts for tenant {args.tenant!r}"
                      + (f" (tenant {before!r} keeps its {left} knowledge base(s))" if left else ""))
        except MetaError as exc:
            print(f"kbgraph-web: {exc}", file=sys.stderr)
            return 2
    return 0
