"""Installing the graph view's browser libraries from the npm registry (never committed): `npm ci`
in web/ui/assets, then one esbuild bundle into web/ui/static/build (served as static files)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ASSETS_DIR = Path(__file__).parent / "assets"
BUNDLE = Path(__file__).parent / "static" / "build" / "graph-lib.js"


class AssetsError(RuntimeError):
    """npm is missing or failed; the message says what to do."""


def setup_assets(*, force: bool = False) -> Path:
    """Install and bundle the libraries unless the bundle exists (``force`` rebuilds); returns it."""
    if BUNDLE.is_file() and not force:
        return BUNDLE
    npm = shutil.which("npm")
    if npm is None:
        raise AssetsError("npm is not installed: install Node.js 18 or newer (with npm), then run "
                          "`kbgraph-web setup-assets` again; every page but the graph view works without it")
    install = "ci" if (ASSETS_DIR / "package-lock.json").is_file() else "install"
    for command in ([npm, install, "--no-audit", "--no-fund", "--loglevel=error"], [npm, "run", "--silent", "build"]):
        done = subprocess.run(command, cwd=ASSETS_DIR, capture_output=True, text=True)
        if done.returncode != 0:
            raise AssetsError(f"`{' '.join(command[1:])}` failed in {ASSETS_DIR}:\n{done.stderr.strip() or done.stdout.strip()}")
    if not BUNDLE.is_file():
        raise AssetsError(f"the build did not write {BUNDLE}")
    return BUNDLE
