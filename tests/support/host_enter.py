"""Enter a drill's host, then run its command (tests/support/hosts.py starts this under ``unshare``, in
a mount and a UTS namespace of the command's own): take the host's name, mount an empty read-only
tmpfs over every other host's folder (so nothing of theirs can be read, or written, from here), move
into the host's own folder and exec the command in place (same pid, same process group).

    python host_enter.py --hostname worker-a --root /tmp/.../worker-a --hide /tmp/.../web -- cmd args...

A script of its own, run by the interpreter with nothing of tests/ imported: it runs before the
host's program does.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hostname", required=True)
    parser.add_argument("--root", required=True)
    parser.add_argument("--hide", action="append", default=[])
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run")
    socket.sethostname(args.hostname)
    for folder in args.hide:
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=4k,mode=0555", "kbgraph-other-host", folder], check=True)
    os.chdir(args.root)
    os.execvp(command[0], command)
    return 127  # not reached: exec replaced this process


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
