"""Real service processes for drills: ``kbgraph-web serve`` (gunicorn) and ``kbgraph-worker`` (Celery
prefork), each in its own process group so a test can kill -9 the whole of it, as an operator's
crash or the OOM killer would."""

from __future__ import annotations

import dataclasses
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import requests

from kbgraph.config import Settings

BIN = Path(sys.executable).parent


def service_env(settings: Settings, **extra: str) -> dict[str, str]:
    """This environment without KBGRAPH_* variables, plus every setting of ``settings`` as one."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KBGRAPH_")}
    for field in dataclasses.fields(Settings):
        value = getattr(settings, field.name)
        if value is not None:  # an optional setting left unset stays unset (not the text "None")
            env[f"KBGRAPH_{field.name.upper()}"] = str(value)
    env.update(extra)
    return env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def children(pid: int) -> list[int]:
    """Direct child processes of ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # the command name may hold spaces and parentheses: the fields start after the last ")"
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return sorted(found)


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def fd_targets(pid: int) -> dict[int, str]:
    """What each open descriptor of ``pid`` is: a file's path, ``socket:[inode]``, ``pipe:[inode]``..."""
    found = {}
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found[int(fd)] = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
    return found


TCP_LISTEN = "0A"


def tcp_sockets() -> dict[str, tuple[int, int, str]]:
    """This host's TCP sockets: inode -> (local port, remote port, state as /proc/net/tcp writes it)."""
    found = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, remote, state, inode = fields[1], fields[2], fields[3], fields[9]
            found[inode] = (int(local.rsplit(":", 1)[1], 16), int(remote.rsplit(":", 1)[1], 16), state)
    return found


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")


class ServiceProcess:
    """A command in a new session (process group); ``kill9`` kills the group, children and all."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path, *, preexec: Any = None) -> None:
        self.argv, self.env, self.log = argv, env, log
        self._preexec = preexec
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> "ServiceProcess":
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(self.argv, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                         start_new_session=True, preexec_fn=self._preexec)
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def kill9(self) -> None:
        """SIGKILL to the whole process group: no shutdown handler of any process runs."""
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(10)

    def stop(self, timeout: float = 20.0) -> None:
        if not self.alive():
            return
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill9()

    def __enter__(self) -> "ServiceProcess":
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()


def _limit_open_files(limit: int) -> Any:
    def apply() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))

    return apply


class WebServer(ServiceProcess):
    """``kbgraph-web serve`` (gunicorn) on a free port; ``open_files`` caps RLIMIT_NOFILE."""

    def __init__(self, settings: Settings, log: Path, *, open_files: int | None = None, **env: str) -> None:
        self.port = free_port()
        super().__init__([str(BIN / "kbgraph-web"), "serve", "--host", "127.0.0.1", "--port", str(self.port)],
                         service_env(settings, **env), log,
                         preexec=_limit_open_files(open_files) if open_files else None)
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> "WebServer":
        super().start()
        self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.alive():
                raise AssertionError(f"kbgraph-web exited:\n{self.output()}")
            try:
                if requests.get(self.url + "/health", timeout=2).status_code == 200:
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise AssertionError(f"kbgraph-web did not answer /health within {timeout:g} s:\n{self.output()}")

    def workers(self) -> list[int]:
        return children(self.pid)


class Worker(ServiceProcess):
    """``kbgraph-worker`` with the prefork pool (a main process and ``concurrency`` children)."""

    def __init__(self, settings: Settings, log: Path, *, concurrency: int = 2, **env: str) -> None:
        super().__init__([str(BIN / "kbgraph-worker"), "--pool", "prefork", "--concurrency", str(concurrency),
                          "--loglevel", "INFO", "--without-gossip", "--without-mingle"],
                         service_env(settings, **env), log)
        self.settings = settings

    def wait_ready(self, timeout: float = 60.0) -> "Worker":
        """Wait until this worker beats (it is ready: its start's sweep and repairs have begun) and a
        moment more for that sweep to end."""
        import socket
        import time

        import redis

        from task_executor.heartbeat import workers_seen

        client = redis.Redis.from_url(self.settings.redis_url)
        name = f"{socket.gethostname()}:{self.pid}"
        deadline = time.monotonic() + timeout
        try:
            while name not in workers_seen(client, self.settings):
                assert self.alive(), f"the worker exited:\n{self.output()}"
                assert time.monotonic() < deadline, f"the worker never beat:\n{self.output()}"
                time.sleep(0.1)
        finally:
            client.close()
        time.sleep(1.0)
        return self
