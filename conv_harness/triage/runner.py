"""Running saved scripts as if alone, without paying for a fresh torch import each.

A script is verified "alone": nothing the run did may be in its process. A
fresh Python per script costs the import of torch (seconds on a loaded
machine), again for every bug and every candidate sequence. Instead one
process per harness process imports NumPy and torch (all a script imports
besides the implementation), and what torch imports on its first backward
(sympy, for its symbolic shapes: 0.3 s, five times what the rest of a short
script's child costs), and forks a child per script: each child starts
from that state, imports the implementation itself, and runs the script as
``__main__``, as ``python script.py`` would, in the folder and with the
environment of the request (what a subprocess started then would inherit).
Requests are served in order, one child at a time.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
from pathlib import Path

#: what a server imports before it forks (all a script imports besides the
#: implementation, and what torch imports on its first backward), and `wait`: a
#: child's exit code, or None where it did not end within ``seconds`` (then killed).
#: The opening of this server, and of the harness's tests' pytest server.
PRELUDE = r'''
import json, os, runpy, sys, time
import numpy
try:
    import torch
except ImportError:
    pass
try:  # what autograd's first backward imports (sympy, mpmath): 0.3 s in every child
    import torch.fx.experimental.symbolic_shapes
except ImportError:
    pass


def wait(pid, seconds):
    deadline = time.monotonic() + seconds
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.005)
'''

#: the server: reads {"script", "cwd", "env", "timeout"} lines, answers {"code", "out"} lines
_SERVER = PRELUDE + r'''
import shutil, tempfile
reply = os.fdopen(os.dup(1), "w")
server = os.getpid()
out_dir = tempfile.mkdtemp(prefix="conv-scripts-")
try:
    for line in sys.stdin:
        request = json.loads(line)
        out_path = os.path.join(out_dir, "out")
        fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            os.dup2(fd, 1)
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 2)
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            sys.argv = [request["script"]]
            sys.path[0] = os.path.dirname(os.path.abspath(request["script"]))
            code = 0
            try:
                runpy.run_path(request["script"], run_name="__main__")
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException:
                code = 1
            try:
                sys.stdout.flush()
            finally:
                os._exit(code)
        os.close(fd)
        code = wait(pid, request["timeout"])
        with open(out_path, errors="replace") as f:
            out = f.read(4096)
        reply.write(json.dumps({"code": code, "out": out}) + "\n")
        reply.flush()
finally:
    if os.getpid() == server:  # not in a child that failed before its own exit
        shutil.rmtree(out_dir, ignore_errors=True)
'''


class ForkServer:
    """A server process running ``source``, started on first use with the environment
    of that moment (``env``), and closed by `close`."""

    #: the server's program: a `PRELUDE` and its loop, set by each kind of server
    source: str

    def __init__(self) -> None:
        self.proc: subprocess.Popen | None = None
        self.env: dict[str, str] = {}

    def _server(self) -> subprocess.Popen:
        if self.proc is None or self.proc.poll() is not None:
            self.env = dict(os.environ)
            self.proc = subprocess.Popen([sys.executable, "-c", self.source], text=True,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, cwd=os.getcwd(),
                                         env=self.env)
        return self.proc

    def close(self) -> None:
        if self.proc is not None:
            try:
                self.proc.stdin.close()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
            self.proc = None


class ScriptRunner(ForkServer):
    """The script server; `run` returns a script's exit code and the start of its
    output (None for the code: it did not end in time)."""

    source = _SERVER

    def run(self, script: Path, timeout: float,
            cwd: Path | None = None) -> tuple[int | None, str]:
        """``script`` run as ``python script`` would be from ``cwd`` (else the current
        folder) with this process's environment as it is now."""
        proc = self._server()
        try:
            proc.stdin.write(json.dumps({"script": str(Path(script).resolve()),
                                         "cwd": str(cwd or os.getcwd()), "env": dict(os.environ),
                                         "timeout": timeout}) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            answer = json.loads(line)
        except (OSError, ValueError):
            self.close()
            return None, ""
        return answer["code"], answer["out"]


RUNNER = ScriptRunner()
atexit.register(RUNNER.close)
