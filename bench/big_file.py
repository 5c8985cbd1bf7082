"""One big text file through `kbgraph index`, offline: peak memory, wall time, and how steadily the
progress bars move (issue 24: "A 50 MB text file: peak RSS under 1 GB; progress visible throughout").

    python bench/big_file.py [--copies 264] [--embedding hash|local] [--workdir DIR] [--keep]

Writes A Christmas Carol (``shared/data/christmas-carol/book.txt``, decoded, line breaks as LF)
``--copies`` times, joined by blank lines, with "Scrooge" renamed Scrooge0, Scrooge1, ... in each
copy so that the copies do not merge into one graph (264 copies: 49.2 MB, under the default
50 MB file limit). Then, in a fresh data directory, runs what a user would:

    KBGRAPH_DATA_DIR=D KBGRAPH_EMBEDDING_PROVIDER=hash kbgraph kb create big --graph nlp
    KBGRAPH_DATA_DIR=D KBGRAPH_EMBEDDING_PROVIDER=hash kbgraph index big50.txt --kb big --progress

and watches the second command from outside: its peak RSS (``ru_maxrss`` from ``wait4``), its
resident memory sampled every 0.5 s (the peak of each phase), its CPU time, and every progress bar
update it prints on stderr (tqdm lines: phase, done/total), timestamped as they arrive. Prints the
CLI's estimate note, each phase's first and last update, and the largest gap between two updates.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("KBGRAPH_EVAL_DATA", HERE.parent.parent.parent / "shared" / "data"))
BOOK = SHARED / "christmas-carol" / "book.txt"
# a bar's refresh: "  extract:  45%|████      | 13000/30096 [01:23<01:40, 150.1/s, message]"
_BAR = re.compile(r"^\s*(\w+):\s+\d+%\|[^|]*\|\s*([\d.]+[kMG]?)/([\d.]+[kMG]?)")
_SCALE = {"k": 1e3, "M": 1e6, "G": 1e9}


def _number(shown: str) -> int:
    """A tqdm count, scaled ones included (12.3M)."""
    return int(float(shown[:-1]) * _SCALE[shown[-1]]) if shown[-1] in _SCALE else int(float(shown))


def write_big_file(path: Path, copies: int) -> int:
    book = BOOK.read_text(encoding="utf-8-sig").replace("\r\n", "\n")
    with open(path, "w", encoding="utf-8") as out:
        for number in range(copies):
            if number:
                out.write("\n\n")
            out.write(book.replace("Scrooge", f"Scrooge{number}"))
    return path.stat().st_size


@dataclass
class Update:
    at: float
    phase: str
    done: int
    total: int


class Watch:
    """The child's stderr (progress bars and notes) and its resident memory, as they come."""

    def __init__(self, proc: subprocess.Popen, start: float) -> None:
        self.proc, self.start = proc, start
        self.updates: list[Update] = []
        self.notes: list[str] = []
        self.rss: list[tuple[float, int]] = []  # (seconds, kB)
        self._last: dict[str, tuple[int, int]] = {}

    def read_stderr(self) -> None:
        buffer = b""
        while True:
            data = self.proc.stderr.read1(65536)
            if not data:
                break
            buffer += data
            *lines, buffer = re.split(rb"[\r\n]", buffer)
            now = time.monotonic() - self.start
            for raw in lines:
                try:
                    self._line(raw.decode("utf-8", "replace"), now)
                except ValueError:  # a line this parser does not know: keep reading, or the child blocks
                    self.notes.append(f"{now:7.1f}s unparsed: {raw[:120]!r}")

    def _line(self, line: str, now: float) -> None:
        found = _BAR.match(line)
        if not found:
            if line.strip() and "\x1b" not in line:
                self.notes.append(f"{now:7.1f}s {line.strip()}")
            return
        phase, done, total = found.group(1), _number(found.group(2)), _number(found.group(3))
        if self._last.get(phase) != (done, total):  # a redraw without news is no progress
            self._last[phase] = (done, total)
            self.updates.append(Update(now, phase, done, total))

    def sample_memory(self) -> None:
        status = Path(f"/proc/{self.proc.pid}/status")
        # not proc.poll(): it would reap the child, whose rusage main() takes with wait4
        while True:
            try:
                fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            except OSError:
                return
            if fields.get("State", "").strip().startswith("Z") or "VmRSS" not in fields:
                return
            self.rss.append((time.monotonic() - self.start, int(fields["VmRSS"].split()[0])))
            time.sleep(0.5)


def kbgraph_command() -> list[str]:
    beside = Path(sys.executable).with_name("kbgraph")
    return [str(beside)] if beside.exists() else [sys.executable, "-m", "kbgraph.cli"]


def report(watch: Watch, wall: float, usage, file_size: int) -> None:
    updates = watch.updates
    print(f"file {file_size / 1e6:.1f} MB; wall {wall:.1f} s ({wall / 60:.1f} min); "
          f"CPU {usage.ru_utime + usage.ru_stime:.1f} s; peak RSS {usage.ru_maxrss / 1024:.0f} MB (ru_maxrss)")
    print(f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for note in watch.notes:
        print("  " + note[:200])
    phases: dict[str, list[Update]] = {}
    for u in updates:
        phases.setdefault(u.phase, []).append(u)
    print("phase        first s   last s  updates  last done/total  peak RSS MB while latest")
    # which phase was last heard from at each memory sample
    for phase, items in phases.items():
        first, last = items[0], items[-1]
        peak = 0
        for at, kb in watch.rss:
            latest = next((u.phase for u in reversed(updates) if u.at <= at), None)
            if latest == phase:
                peak = max(peak, kb)
        print(f"{phase:<10} {first.at:8.1f} {last.at:8.1f} {len(items):8d}  {last.done:>8}/{last.total:<8} "
              f"{peak / 1024:8.0f}")
    times = [0.0] + [u.at for u in updates] + [wall]
    gaps = sorted(((b - a, a) for a, b in zip(times, times[1:])), reverse=True)[:5]
    print("largest gaps between progress updates (s, from):",
          ", ".join(f"{g:.1f} at {a:.1f}" for g, a in gaps))
    for gap, at in gaps[:3]:
        before = [u for u in updates if u.at <= at][-1:] or [None]
        after = [u for u in updates if u.at > at][:1] or [None]
        print(f"  {gap:.1f} s: after {_show(before[0])} until {_show(after[0])}")


def _show(update: Update | None) -> str:
    return "start/end" if update is None else f"{update.phase} {update.done}/{update.total} ({update.at:.1f} s)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=264)
    parser.add_argument("--embedding", choices=("hash", "local"), default="hash")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="kbgraph-bigfile-"))
    data = workdir / "data"
    if data.exists():
        shutil.rmtree(data)
    workdir.mkdir(parents=True, exist_ok=True)
    big = workdir / f"big{args.copies}.txt"
    size = write_big_file(big, args.copies)
    env = {**os.environ, "KBGRAPH_DATA_DIR": str(data), "KBGRAPH_EMBEDDING_PROVIDER": args.embedding}
    subprocess.run([*kbgraph_command(), "kb", "create", "big", "--graph", "nlp"], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    command = [*kbgraph_command(), "index", str(big), "--kb", "big", "--progress"]
    print(f"load average at the start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("$ KBGRAPH_DATA_DIR=D KBGRAPH_EMBEDDING_PROVIDER=%s %s" % (args.embedding, " ".join(command)), flush=True)
    start = time.monotonic()
    proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    watch = Watch(proc, start)
    sampler = threading.Thread(target=watch.sample_memory, daemon=True)
    sampler.start()
    reader = threading.Thread(target=watch.read_stderr, daemon=True)
    reader.start()
    out = proc.stdout.read().decode("utf-8", "replace")
    reader.join()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - start
    sampler.join(timeout=2)
    print(out.strip())
    report(watch, wall, usage, size)
    if not args.keep and args.workdir is None:
        shutil.rmtree(workdir, ignore_errors=True)
    if proc.returncode:
        sys.exit(f"kbgraph index exited with {proc.returncode}")


if __name__ == "__main__":
    main()
