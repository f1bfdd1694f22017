"""Contract section 5: the installed suite, ``conv-harness``, from a wheel, in any folder.

A wheel is built from this checkout and installed (not editable) into a
fresh venv that sees the running interpreter's packages (so torch, numpy,
Hypothesis and pytest are not downloaded again): ``--system-site-packages``
gives the base interpreter's, and when the suite itself runs in a venv (the
README's set-up) a ``.pth`` file names that venv's site-packages too, which
``--system-site-packages`` alone does not see (issue 20); then
``conv-harness`` runs from an empty folder outside the project, as a user of
another project would run it.
"""

from __future__ import annotations

import json
import re
import os
import shutil
import site
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from tests.harness.conftest import PROJECT_ROOT

#: what a wheel is built from: the packaged folders and the corpus it carries
SOURCES = ("pyproject.toml", "setup.py", "README.md", "conv_impl", "strategies", "conv_harness",
           "tests/regressions")
QUICK = ("--hypothesis-profile", "harness-test", "-p", "no:randomly")
#: a profile of the user's own, as a plugin module in their folder (``-p quick_profile``):
#: the whole suite on few examples, to see every check run on a correct implementation
QUICK_PROFILE = """
from hypothesis import settings
from conv_harness.profiles import register
register()
settings.register_profile("quick", settings.get_profile("harness-test"), max_examples=20)
"""
CORRECT = "from conv_impl.einsum import conv2d, conv2d_backward\n"
BUGGY = "from conv_impl.tutorial import conv2d, conv2d_backward, CAPABILITIES\n"


class Installed:
    """A venv with the wheel installed, and how to run its ``conv-harness``."""

    def __init__(self, root: Path, wheel: Path, timings: dict[str, float]) -> None:
        self.root, self.wheel, self.timings = root, wheel, timings
        self.python = root / "bin" / "python"
        self.script = root / "bin" / "conv-harness"

    def run(self, *args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
        env = {k: v for k, v in os.environ.items()
               if k not in ("CONV_IMPL", "CONV_DB", "PYTHONPATH", "HYPOTHESIS_PROFILE",
                            "PYTEST_ADDOPTS")}
        return subprocess.run([str(self.script), *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=timeout)


def _ignore_caches(folder: str, names: list[str]) -> list[str]:
    return [n for n in names if n in ("__pycache__", "build") or n.endswith(".egg-info")]


def see_running_interpreters_packages(venv: Path) -> None:
    """Put this interpreter's site-packages on the venv's path (a ``.pth`` file).

    From inside a venv, ``sys.executable -m venv --system-site-packages`` sees
    the base interpreter's packages, not the running venv's, where torch and
    pytest-xdist are. Plain paths, after the venv's own site-packages: the
    wheel installed there comes first, and the outer folders' own ``.pth``
    files (an editable install of this project) are not run.
    """
    found = subprocess.run([str(venv / "bin" / "python"), "-c",
                            "import site; print(site.getsitepackages()[0])"],
                           check=True, capture_output=True, text=True).stdout.strip()
    outer = [path for path in site.getsitepackages() if Path(path).is_dir()]
    (Path(found) / "_conv_harness_outer_site.pth").write_text("\n".join(outer) + "\n")


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    """Build the wheel (from a copy of the sources: no build/ in the checkout) and install it."""
    base = tmp_path_factory.mktemp("installed")
    source = base / "source"
    for name in SOURCES:
        src = PROJECT_ROOT / name
        if src.is_dir():
            shutil.copytree(src, source / name, ignore=_ignore_caches)
        else:
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, source / name)
    timings = {}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", str(source), "-w", str(base / "dist")],
                   check=True, capture_output=True, text=True)
    timings["wheel"] = time.perf_counter() - start
    (wheel,) = (base / "dist").glob("conv_harness-*.whl")
    start = time.perf_counter()
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, capture_output=True, text=True)
    see_running_interpreters_packages(venv)
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps",
                    str(wheel)], check=True, capture_output=True, text=True)
    timings["venv+install"] = time.perf_counter() - start
    return Installed(venv, wheel, timings)


@pytest.fixture
def folder(tmp_path) -> Path:
    """An empty folder outside the project: a user's project."""
    user = tmp_path / "user-project"
    user.mkdir()
    return user


def test_the_wheel_carries_the_suite_its_settings_and_the_corpus(installed):
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    for module in ("test_conformance", "test_properties", "test_regressions", "conftest"):
        assert f"conv_harness/conformance/{module}.py" in names
    assert "conv_harness/conformance/pytest.ini" in names
    # one import package named after the distribution: no top-level name others hold
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(
        (".dist-info", ".data"))} == {"conv_harness", "conv_impl", "strategies"}, names
    # pyproject.toml lists the packages: a new subpackage must be listed there too
    for top in ("conv_impl", "strategies", "conv_harness"):
        for init in (PROJECT_ROOT / top).rglob("__init__.py"):
            assert init.relative_to(PROJECT_ROOT).as_posix() in names, \
                f"{init.parent} is not in the wheel: add it to pyproject.toml's packages"
    corpus = sorted(p.name for p in (PROJECT_ROOT / "tests" / "regressions").glob("*.json"))
    assert corpus and all(f"conv_harness/conformance/regressions/{n}" in names for n in corpus)
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    text = zipfile.ZipFile(installed.wheel).read(entry_points).decode()
    assert "conv-harness = conv_harness.cli:main" in text
    # The venv imports the installed copy, not this checkout.
    where = subprocess.run([str(installed.python), "-c",
                            "import conv_harness.conformance; print(conv_harness.conformance.__file__)"],
                           cwd=installed.root, capture_output=True, text=True, check=True)
    assert where.stdout.strip().startswith(str(installed.root))
    print("timings (s):", {k: round(v, 2) for k, v in installed.timings.items()})


def test_a_correct_implementation_passes_from_an_empty_folder(installed, folder):
    (folder / "mine.py").write_text(CORRECT)
    (folder / "quick_profile.py").write_text(QUICK_PROFILE)
    done = installed.run("--impl", "mine.py", "-n", "2", "-rA", "-p", "quick_profile",
                         "--hypothesis-profile", "quick", "--conv-regressions", "all",
                         cwd=folder)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    suite = installed.root / "lib"
    assert f"rootdir: {suite}" in done.stdout and "conv_harness/conformance" in done.stdout
    # every check of the installed suite ran on it, and so did the packaged corpus
    for check in ("forward", "grad_input", "grad_weight", "grad_bias", "repeatable", "adjoint",
                  "linearity", "finite_difference", "pointwise", "delta_kernel"):
        assert f"::test_{check}[mine-conv2d]" in done.stdout
    # (the tutorial's cases: replayed against mine.py only when asked to)
    assert "test_regressions.py::test_regression[mine-conv_impl.tutorial-conv2d" in done.stdout
    assert "mine [mine.py]: passed" in done.stdout
    # the user's profile: 20 examples per test, 11 tests
    assert re.search(r"forward\s+passed \(20\)", done.stdout), done.stdout[-3000:]
    assert int(re.search(r"examples tried: (\d+)", done.stdout).group(1)) >= 220
    summary = json.loads((folder / ".conv-failures" / "summary.json").read_text())
    assert [i["verdict"] for i in summary["implementations"]] == ["passed"]


def test_a_buggy_implementation_fails_with_its_case_file_in_that_folder(installed, folder):
    (folder / "buggy.py").write_text(BUGGY)
    done = installed.run("--impl", "buggy.py", "-k", "test_grad_input", *QUICK, cwd=folder)
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert "test_grad_input[buggy-conv2d]" in done.stdout
    cases = sorted((folder / ".conv-failures").glob("buggy-conv2d-grad_input-*.json"))
    assert cases, sorted((folder / ".conv-failures").iterdir())
    assert all(case.with_suffix(".py").is_file() for case in cases)
    summary = json.loads((folder / ".conv-failures" / "summary.json").read_text())
    assert [i["verdict"] for i in summary["implementations"]] == ["failed"]
    # ... and replays from there: still failing on it, passing on a correct one.
    again = installed.run("--replay", str(cases[0].relative_to(folder)), cwd=folder)
    assert again.returncode == 1 and "still fails" in again.stdout, again.stdout[-3000:]
    (folder / "fixed.py").write_text(CORRECT)
    fixed = installed.run("--replay", ".conv-failures", "--impl", "fixed.py", cwd=folder)
    assert fixed.returncode == 0, fixed.stdout[-3000:] + fixed.stderr[-3000:]


def test_the_users_own_pytest_files_do_not_change_the_run(installed, folder):
    """A conftest.py, pytest.ini, pyproject.toml, tox.ini and setup.cfg of the user's own."""
    (folder / "conftest.py").write_text("raise SystemExit('the user conftest was loaded')\n")
    (folder / "pytest.ini").write_text("[pytest]\naddopts = -x --bogus\ntestpaths = nowhere\n")
    (folder / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '--bogus'\n")
    (folder / "tox.ini").write_text("[pytest]\naddopts = --bogus\n")
    (folder / "setup.cfg").write_text("[tool:pytest]\naddopts = --bogus\n")
    package = folder / "my_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "conv.py").write_text(CORRECT)
    done = installed.run("--impl", "my_pkg.conv", "-k", "test_forward", "-rA", *QUICK,
                         cwd=folder)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "configfile: pytest.ini" in done.stdout and "user conftest" not in done.stdout
    assert "::test_forward[my_pkg.conv-conv2d]" in done.stdout
    assert "PASSED" in done.stdout
    # Hypothesis's own options pass through, with the project's profiles.
    unknown = installed.run("--impl", "my_pkg.conv", "--hypothesis-profile", "nosuch",
                            cwd=folder)
    assert unknown.returncode != 0 and "nosuch" in unknown.stdout + unknown.stderr
    # A spec that cannot be loaded is a usage error, as in a clone.
    missing = installed.run("--impl", "nowhere.py", cwd=folder)
    assert missing.returncode == 4 and "nowhere.py" in missing.stderr
    assert (folder / ".pytest_cache").is_dir()  # pytest's cache is the folder's own
    assert not list(installed.root.rglob("conv_harness/conformance/.pytest_cache"))


UNRELATED_TEST = '''
import sys

def test_nothing_of_the_suite_is_imported():
    heavy = [m for m in ("numpy", "torch", "hypothesis.core", "conv_harness.checks.registry",
                         "conv_harness.plugin") if m in sys.modules]
    assert not heavy, heavy
'''


def test_an_unrelated_pytest_run_imports_and_prints_nothing_of_the_suite(installed, folder):
    """The entry point is loaded in every pytest run of the venv: in a project of the
    user's own, with no conformance test, it declares the options and nothing more."""
    (folder / "test_unrelated.py").write_text(UNRELATED_TEST)
    env = {k: v for k, v in os.environ.items()
           if k not in ("CONV_IMPL", "CONV_DB", "PYTHONPATH", "PYTEST_ADDOPTS")}
    done = subprocess.run([str(installed.python), "-m", "pytest", "-p", "no:cacheprovider"],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    said = [line for line in done.stdout.splitlines()
            if "conv" in line.lower() and not line.startswith("plugins:")]
    assert not said, done.stdout  # pytest's own header lists it among the plugins, no more
    help_text = subprocess.run([str(installed.python), "-m", "pytest", "--help"], cwd=folder,
                               env=env, capture_output=True, text=True, timeout=300).stdout
    assert "--impl" in help_text and "--replay" in help_text and "--conv-db" in help_text
