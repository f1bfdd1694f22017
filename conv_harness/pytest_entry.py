"""The harness's one ``pytest11`` entry point: options, and the suite's plugins on demand.

An entry-point plugin is loaded in every pytest run of an environment where
conv-harness is installed, so this one stays out of the way: it declares the options
(conv_harness/options.py) and imports nothing heavy. The modules that act on them
(conv_harness.plugin, replay, isolate_hooks, database, fuzz) are registered, before
any of pytest_configure runs, only in a run that asks for the suite (`asks_for_suite`):
the conformance suite's conftest is loaded (a clone's root conftest.py imports it;
the installed suite's is its rootdir's), or a harness option or environment variable
is given (``pytest --replay case.json`` from any folder). An unrelated project's run
imports neither NumPy, torch, Hypothesis's engine nor the harness's checks, and
prints nothing.

It is an entry point, not a conftest, because pytest chooses its rootdir, config
file and initial conftests from the command line *before* it reads any conftest: in
``pytest --impl /elsewhere/mine.py`` it first takes the path for a test path. An
entry-point plugin is loaded early enough to declare the options and put that right
(`_rerun_with_joined_path_options`).
"""

from __future__ import annotations

import importlib
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from conv_harness.options import ASKING_ENV, ASKING_OPTIONS, add_options
from conv_harness.path_options import joined_path_options, path_options_read_as_test_paths

#: the suite's plugins, in the order they were once entry points of their own
SUITE_PLUGINS = ("conv_harness.plugin", "conv_harness.replay", "conv_harness.isolate_hooks",
                 "conv_harness.database", "conv_harness.fuzz")
#: the conformance suite's conftest: loaded, the run is the suite's
SUITE_CONFTEST = "conv_harness.conformance.conftest"


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, args: list[str]):
    # a wrapper, first: around pytest's capture, which starts in this hook and would
    # hold the replaced process's output
    _join_file_values(args)
    _rerun_with_joined_path_options(early_config)
    result = yield
    if asks_for_suite(early_config):  # the initial conftests are loaded by now
        register_suite_plugins(early_config.pluginmanager)
    return result


def asks_for_suite(config: pytest.Config) -> bool:
    """Whether this run is one of the suite's: its conftest is loaded, or a harness
    option (`ASKING_OPTIONS`) or environment variable (`ASKING_ENV`) is given."""
    if SUITE_CONFTEST in sys.modules or any(
            _is_suite_conftest(getattr(plugin, "__file__", None))
            for plugin in config.pluginmanager.get_plugins()):
        return True
    if any(os.environ.get(name, "").strip() for name in ASKING_ENV):
        return True
    return any(str(word).startswith(ASKING_OPTIONS) for word in _command_words(config))


def _command_words(config: pytest.Config) -> list[str]:
    """The run's command-line words as pytest reads them: $PYTEST_ADDOPTS's first."""
    return (shlex.split(os.environ.get("PYTEST_ADDOPTS", ""))
            + list(config.invocation_params.args))


def _is_suite_conftest(path: str | None) -> bool:
    if not path:
        return False
    here = Path(__file__).resolve().parent / "conformance" / "conftest.py"
    return Path(path).resolve() == here


def register_suite_plugins(pluginmanager: pytest.PytestPluginManager) -> None:
    """Register `SUITE_PLUGINS`, each once (``-p conv_harness.plugin`` may have)."""
    for name in SUITE_PLUGINS:
        module = importlib.import_module(name)
        if not pluginmanager.is_registered(module) and pluginmanager.get_plugin(name) is None:
            pluginmanager.register(module, name)


def _join_file_values(args: list[str]) -> None:
    """``--conv-problem @FILE`` as one word: pytest's argument parser reads any
    word starting with ``@`` as a file of more arguments, which would make the
    file's first line the value and the others test paths."""
    i = 0
    while i < len(args) - 1:
        if args[i] == "--conv-problem" and args[i + 1].startswith("@"):
            args[i:i + 2] = [f"--conv-problem={args[i + 1]}"]
        i += 1


def same_choice_for_joined_words(config: pytest.Config) -> bool:
    """Whether pytest chose the rootdir and config file it would have chosen for the
    command with its path options as one word: then nothing was misread.

    pytest's choice (`determine_setup`, called as ``Config.parse`` calls it, with
    $PYTEST_ADDOPTS before the arguments) is made again for the free words the
    command has once every option is known. Where that cannot be done (pytest's
    internals moved), False: the caller then makes sure the other way.

    Why: most misread values change nothing. ``pytest --replay
    .conv-failures/x.json``, the command the docs give, starts pytest's search
    for a config file in .conv-failures, which has none, so it finds the
    project's own; replacing the process for it cost a second start.
    """
    try:
        from _pytest.config.findpaths import determine_setup

        params = config.invocation_params
        known = config._parser.parse_known_args(_command_words(config))
        rootpath, inipath, *_ = determine_setup(
            inifile=known.inifilename, override_ini=known.override_ini,
            args=known.file_or_dir, rootdir_cmd_arg=known.rootdir or None,
            invocation_dir=params.dir)
    except Exception:  # noqa: BLE001 - another pytest: not known to be the same
        return False
    return (rootpath, inipath) == (config.rootpath, config.inipath)


def _rerun_with_joined_path_options(config: pytest.Config) -> None:
    """Run pytest again with ``--impl=X`` where ``--impl X`` misled its choice of
    rootdir and config file (see `path_options_read_as_test_paths`; not where the
    choice is the same, `same_choice_for_joined_words`).

    pytest offers no hook before that choice and documents the one-word form as
    the way to give an option's value; so a command-line run becomes the same
    command with the one-word forms (the process is replaced: same exit status,
    same output), and a run inside another program (``pytest.main``), which
    cannot be replaced, is a usage error that says what to write.
    """
    params = config.invocation_params
    given = list(params.args)
    misread = path_options_read_as_test_paths(given, params.dir)
    if not misread or same_choice_for_joined_words(config):
        return
    if sys.argv[1:] != given:
        option, value = misread[0]
        raise pytest.UsageError(
            f"pytest reads {value} as a test path before it knows the option before "
            f"it, and chooses the wrong rootdir and config file: write the option and its "
            f"value as one word ({option}={value}, as for any path option)")
    command = [sys.executable, "-m", "pytest", *joined_path_options(given)]
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name == "posix":
        os.execv(sys.executable, command)
    raise SystemExit(subprocess.call(command, cwd=params.dir))


