"""Machines for drills, on one machine: each ``Host`` is a folder of its own (its data directory, HOME
and TMPDIR) and runs its services in a mount and a UTS namespace of their own (``unshare``), where it
has its own hostname and sees every other host's folder as an empty read-only directory. So a web
server and workers started as different hosts share exactly what machines share: the network and
the services on it, and nothing on disk (what a host might read of another's would not be there).

    group = HostGroup(tmp_path, ["web", "worker-a"])          # None when Linux refuses the namespaces
    web = group["web"].run(WebServer(settings_with(group["web"].data_dir), log))
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TypeVar

from support.processes import ServiceProcess

ENTER = Path(__file__).with_name("host_enter.py")

# as root: the namespaces directly; otherwise in a user namespace of our own, where we are root
_UNSHARE_WAYS = (["unshare", "--mount", "--uts"], ["unshare", "--user", "--map-root-user", "--mount", "--uts"])

Service = TypeVar("Service", bound=ServiceProcess)


@cache
def unshare_prefix() -> tuple[str, ...] | None:
    """The ``unshare`` command that gives a process its own mount and UTS namespaces here (with a
    tmpfs mount and a hostname change tried in them), or None where the kernel or the sandbox refuses."""
    with tempfile.TemporaryDirectory() as folder:
        for way in _UNSHARE_WAYS:
            probe = [*way, sys.executable, str(ENTER), "--hostname", "kbgraph-probe", "--root", folder,
                     "--hide", folder, "--", "true"]
            try:
                if subprocess.run(probe, capture_output=True, timeout=30).returncode == 0:
                    return tuple(way)
            except (OSError, subprocess.TimeoutExpired):
                continue
    return None


@dataclass(frozen=True)
class Host:
    name: str
    root: Path  # everything of this host's on disk
    others: tuple[Path, ...]  # the other hosts' folders: empty here

    @property
    def data_dir(self) -> Path:
        return self.root / "data"

    @property
    def home(self) -> Path:
        return self.root / "home"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    def env(self) -> dict[str, str]:
        return {"HOME": str(self.home), "TMPDIR": str(self.tmp)}

    def wrap(self, argv: list[str]) -> list[str]:
        prefix = unshare_prefix()
        assert prefix is not None, "this machine gives no mount and UTS namespaces"
        hide = [arg for folder in self.others for arg in ("--hide", str(folder))]
        return [*prefix, sys.executable, str(ENTER), "--hostname", self.name, "--root", str(self.root), *hide,
                "--", *argv]

    def run(self, service: Service) -> Service:
        """``service`` (not started yet) as a process of this host: its command entered into the
        host's namespaces, HOME and TMPDIR in the host's folder."""
        service.argv = self.wrap(service.argv)
        service.env = {**service.env, **self.env()}
        return service

    def sees(self, pid: int, folder: Path) -> list[str]:
        """What process ``pid`` sees in ``folder`` (through its own root, so through its mounts)."""
        return sorted(p.name for p in Path(f"/proc/{pid}/root{folder}").iterdir())


class HostGroup:
    """Hosts named ``names``, each a folder under ``parent`` that the others cannot see into."""

    def __init__(self, parent: Path, names: list[str]) -> None:
        roots = {name: parent / name for name in names}
        self.hosts = {name: Host(name, root, tuple(r for n, r in roots.items() if n != name))
                      for name, root in roots.items()}
        for host in self.hosts.values():
            for folder in (host.data_dir, host.home, host.tmp):
                folder.mkdir(parents=True, exist_ok=True)

    def __getitem__(self, name: str) -> Host:
        return self.hosts[name]
