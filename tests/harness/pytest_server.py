"""pytest runs (and ``python -m conv_harness.cli`` runs) for the harness's tests without a
torch import each.

A test of the pytest wiring runs the suite as a user would: ``python -m pytest``
in a process of its own. Most of such a run's start, once its bytecode is
cached (tests/harness/conftest.py), is importing torch (about 1.3 s of CPU
here, more than the search of a short run). The server below
imports NumPy and torch once, as conv_harness/triage/runner.py's script server
does, and forks a child per run: the child takes the run's folder,
environment, arguments and output files, and runs pytest's ``__main__`` as
``python -m pytest`` does; its exit status (negative: the signal
that ended it) is the run's. Everything else (pytest, Hypothesis, the
harness, the implementation) the child imports itself, under the run's own
environment.

Where the run's environment differs from the server's in anything but
`SAFE_TO_VARY` (a PYTHONPATH that hides torch, a thread count), what the
server imported could differ from what the run would import: that run gets a
fresh interpreter instead. A PYTHONPATH that only adds folders holding none of
`PREIMPORTED` (a user's package of kernels) is forked, its folders put on the
child's sys.path where Python would put them.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from conv_harness.triage.runner import PRELUDE, ForkServer

#: the top-level packages the server imports before it forks (PRELUDE's and pytest)
PREIMPORTED = ("numpy", "torch", "ml_dtypes", "pytest", "_pytest", "pluggy", "conv_harness")

#: environment variables a run may set differently from the server's: each is read
#: by pytest, Hypothesis's profiles or the harness at run time, never by torch or
#: NumPy at import
SAFE_TO_VARY = frozenset({"HYPOTHESIS_PROFILE", "HYPOTHESIS_STORAGE_DIRECTORY", "CONV_IMPL",
                          "CI", "CONV_DB", "CONV_DB_READ_ONLY", "PYTEST_CURRENT_TEST",
                          "PYTEST_ADDOPTS"})

_SERVER = PRELUDE + r'''
import atexit, traceback
import pytest  # imported by every run: once, here
reply = os.fdopen(os.dup(1), "w")
while True:
    line = sys.stdin.readline()
    if not line:
        break
    request = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            for fd, name in ((1, "stdout"), (2, "stderr")):
                os.dup2(os.open(request[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
            os.chdir(request["cwd"])
            os.environ.clear()
            os.environ.update(request["env"])
            sys.argv = [request["module"], *request["args"]]  # run_module sets argv[0]
            sys.path[0] = request["cwd"]  # what python -m puts first
            sys.path[1:1] = request["path"]  # then $PYTHONPATH's folders it adds
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
        finally:
            try:
                atexit._run_exitfuncs()
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    code = wait(pid, request["timeout"])
    reply.write(json.dumps({"code": code}) + "\n")
    reply.flush()
'''


class PytestServer(ForkServer):
    """The pytest server (a `ForkServer`): `run` is ``subprocess.run`` of ``python -m
    MODULE ARGS`` (pytest's, or another that runs pytest) with captured text output,
    made by a forked child where the environment allows (see the module doc). One run
    at a time."""

    source = _SERVER

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def _started(self) -> dict[str, str]:
        return self.env if self.proc is not None else dict(os.environ)

    def added_path(self, env: dict[str, str]) -> list[str] | None:
        """The folders ``env``'s PYTHONPATH puts before the server's, where a forked run
        can take them (put on its sys.path, where Python would): none of them holds a
        module the server imported before forking (what a run would import from there
        could differ); else None."""
        started = self._started().get("PYTHONPATH", "")
        wanted = env.get("PYTHONPATH", "")
        if wanted == started:
            return []
        if started and not wanted.endswith(os.pathsep + started):
            return None
        added = [p for p in wanted[:len(wanted) - len(started)].split(os.pathsep) if p]
        imported = {name.partition(".")[0] for name in PREIMPORTED}
        if any((Path(folder) / name).exists() or (Path(folder) / f"{name}.py").exists()
               for folder in added for name in imported):
            return None
        return added

    def forks(self, env: dict[str, str]) -> bool:
        """Whether a run in ``env`` may be forked from the server."""
        started = self._started()
        differ = {k for k in started.keys() | env.keys() if started.get(k) != env.get(k)}
        return differ - {"PYTHONPATH"} <= SAFE_TO_VARY and self.added_path(env) is not None

    def run(self, args: list[str], cwd: Path, env: dict[str, str], timeout: float,
            module: str = "pytest") -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", module, *args]
        if not self.forks(env):
            return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                                  timeout=timeout)
        with self.lock, tempfile.TemporaryDirectory(prefix="pytest-run-") as folder:
            out, err = Path(folder) / "stdout", Path(folder) / "stderr"
            proc = self._server()
            proc.stdin.write(json.dumps({"module": module, "args": args, "cwd": str(cwd),
                                         "env": env, "path": self.added_path(env), "stdout": str(out), "stderr": str(err),
                                         "timeout": timeout}) + "\n")
            proc.stdin.flush()
            code = json.loads(proc.stdout.readline())["code"]
            stdout = out.read_text(errors="replace") if out.exists() else ""
            stderr = err.read_text(errors="replace") if err.exists() else ""
        if code is None:
            raise subprocess.TimeoutExpired(command, timeout, stdout, stderr)
        return subprocess.CompletedProcess(command, code, stdout, stderr)


#: this process's server (an xdist worker's own), closed when the process ends
SERVER = PytestServer()
atexit.register(SERVER.close)
