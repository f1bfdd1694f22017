"""``conv-harness``: the installed conformance suite, run from any folder (contract section 5).

    conv-harness --impl my_pkg.conv -n auto [any option of the suite, pytest or Hypothesis]

It runs pytest on the test modules shipped in `conv_harness.conformance`, so that
a plain (non-editable) install, a wheel, carries and runs the whole suite.
The folder it runs in is the user's, with perhaps a conftest.py, pytest.ini
or pyproject.toml of their own that must not change the run:

- ``-c conv_harness/conformance/pytest.ini``: this config file and no other;
- ``--rootdir`` and ``--confcutdir`` the installed suite's folder: no
  conftest.py above it (the user's among them) is loaded, and test ids are
  the suite's own (``test_conformance.py::test_forward[mine-conv2d]``);
- ``-o cache_dir=<this folder>/.pytest_cache``: ``--lf``/``--ff`` work and
  nothing is written into site-packages.

Everything relative stays relative to the folder it runs in: ``--impl
mine.py``, failures in ``.conv-failures/`` (``--conv-failures DIR``),
``--replay FILE``, Hypothesis's ``.hypothesis/`` example database (or
``--conv-db``). The exit status is pytest's: 0 all passed, 1 a check failed,
4 a usage error (e.g. an implementation that cannot be loaded).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from conv_harness.path_options import joined_path_options

SUITE_DIR = Path(__file__).resolve().parent / "conformance"
INI = SUITE_DIR / "pytest.ini"
#: what the pytest11 entry points load, for a run with plugin autoloading disabled (the
#: harness's entry point registers the suite's own plugins)
PLUGINS = ("conv_harness.pytest_entry", "_hypothesis_pytestplugin", "xdist.plugin",
           "xdist.looponfail")


def pytest_args(argv: Sequence[str], cwd: Path | None = None) -> list[str]:
    """The pytest command line that runs the installed suite with the user's ``argv``."""
    cwd = Path.cwd() if cwd is None else cwd
    args = ["-c", str(INI), "--rootdir", str(SUITE_DIR), "--confcutdir", str(SUITE_DIR),
            "-o", f"cache_dir={cwd / '.pytest_cache'}"]
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        for plugin in PLUGINS:
            args += ["-p", plugin]
    # ``--impl X`` as ``--impl=X``: inside HypoFuzz's pytest.main a separate path
    # word would be a usage error (conv_harness/plugin.py), and it is one word in any case
    return [*args, *joined_path_options(argv), str(SUITE_DIR)]


def command(argv: Sequence[str]) -> list[str]:
    """``python -m pytest`` with the installed suite's arguments."""
    return [sys.executable, "-m", "pytest", *pytest_args(argv)]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the installed suite; the exit status is pytest's.

    pytest runs as ``python -m pytest`` in this process's place, not through
    `pytest.main` here: this module's package is already imported by then,
    and pytest could not rewrite the asserts of the harness's plugins (it
    warns). ``-m`` also puts this folder on sys.path, as in a clone, so that
    ``--impl my_pkg.conv`` finds a package of the user's folder.
    """
    return run_in_place(command(sys.argv[1:] if argv is None else argv))


def run_in_place(args: list[str]) -> int:
    """Become the process ``args`` (its exit status is ours); elsewhere than POSIX, run it."""
    sys.stdout.flush()
    if os.name == "posix":
        os.execv(sys.executable, args)
    return subprocess.call(args)


if __name__ == "__main__":
    sys.exit(main())
