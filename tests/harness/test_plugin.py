"""Contract section 1: pointing the suite at implementations, and bad specs."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap

import pytest

from conv_harness.path_options import joined_path_options, path_options_read_as_test_paths
from tests.harness.conftest import PROJECT_ROOT

FORWARD_2D = ("-k", "test_forward and conv2d]", "-rA")


def test_spec_forms_each_named_in_test_ids(run_pytest):
    result = run_pytest("--impl", "conv_impl/einsum.py", "--impl=conv_impl.tutorial:fixed",
                        "--impl", "conv_impl.direct", *FORWARD_2D)
    assert result.returncode == 0, result.stdout + result.stderr
    for name in ("einsum", "conv_impl.tutorial:fixed", "conv_impl.direct"):
        assert f"PASSED tests/conformance/test_conformance.py::test_forward[{name}-conv2d]" \
            in result.stdout


def test_conv_impl_environment_variable(run_pytest):
    result = run_pytest(*FORWARD_2D, env={"CONV_IMPL": "conv_impl.im2col"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "test_forward[conv_impl.im2col-conv2d]" in result.stdout


def test_default_is_the_shipped_einsum(run_pytest):
    result = run_pytest(*FORWARD_2D, env={"CONV_IMPL": ""})
    assert "PASSED tests/conformance/test_conformance.py::test_forward[conv_impl.einsum-conv2d]" \
        in result.stdout


@pytest.mark.parametrize("form", ["separate", "equals"])
def test_a_file_outside_the_project_uses_this_projects_tests_and_settings(
        run_pytest, tmp_path, form):
    """pytest first takes ``--impl /elsewhere/mine.py`` for a test path; the run must not."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "mine.py").write_text("from conv_impl.einsum import conv2d\n")
    # A project of the user's own, with pytest settings that must not be taken.
    (elsewhere / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '-x --bogus'\n")
    spec = str(elsewhere / "mine.py")
    args = ["--impl", spec] if form == "separate" else [f"--impl={spec}"]
    result = run_pytest(*args, *FORWARD_2D, "-v", words_as_given=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASSED tests/conformance/test_conformance.py::test_forward[mine-conv2d]" \
        in result.stdout
    assert f"rootdir: {PROJECT_ROOT}" in result.stdout
    assert "configfile: pyproject.toml" in result.stdout


def test_inside_pytest_main_a_misread_path_is_a_usage_error(tmp_path):
    """A run that cannot be replaced by the one-word command says what to write."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "mine.py").write_text("from conv_impl.einsum import conv2d\n")
    code = ("import sys, pytest; sys.exit(pytest.main(['-p', 'no:cacheprovider', "
            f"'--impl', {str(elsewhere / 'mine.py')!r}, '-k', 'test_forward and conv2d]']))")
    done = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 4, done.stdout + done.stderr
    assert (f"write the option and its value as one word (--impl={elsewhere / 'mine.py'}"
            in done.stderr)
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("folder, code", [
    ("plain", 0),  # no config file of its own: pytest finds the project's, as it should
    ("configured", 4),  # one of its own: pytest would take it, so the run cannot go on
])
def test_a_path_read_as_a_test_path_matters_only_where_it_changes_pytests_choice(
        tmp_path, folder, code):
    """``pytest --replay .conv-failures/x.json``, as the docs write it: pytest starts its
    search for a config file in the case file's folder. Where that finds the project's
    own, the run goes on in its process (inside `pytest.main`, which cannot be
    replaced, so a needed rerun is a usage error that says what to write)."""
    (tmp_path / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
    (tmp_path / "configured").mkdir()
    (tmp_path / "configured" / "pytest.ini").write_text("[pytest]\naddopts = --bogus\n")
    (tmp_path / "plain").mkdir()
    case = next((PROJECT_ROOT / "tests" / "regressions").glob("conv_impl.tutorial-*.json"))
    shutil.copy(case, tmp_path / folder / "case.json")
    code_line = ("import sys, pytest; sys.exit(pytest.main(['-p', 'no:cacheprovider', "
                 f"'--replay', {folder + '/case.json'!r}, '--impl', 'conv_impl.einsum']))")
    done = subprocess.run([sys.executable, "-c", code_line], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == code, done.stdout + done.stderr
    if code == 0:
        assert "1 passed" in done.stdout
    else:
        assert f"as one word (--replay={folder}/case.json" in done.stderr


@pytest.mark.parametrize("args, misread", [
    (["--impl", "conv_impl.einsum"], []),  # a dotted name: no path
    (["--impl", "setup.py"], []),  # in the folder itself: the same choice
    (["--impl", "conv_impl/einsum.py"], [("--impl", "conv_impl/einsum.py")]),
    (["--conv-failures", "no/such/folder"], []),  # pytest ignores paths that do not exist
    (["--conv-failures=/tmp", "-k", "/tmp"], []),
    (["--replay", "/tmp", "--impl", "x"], [("--replay", "/tmp")]),
])
def test_which_values_pytest_reads_as_test_paths(args, misread):
    assert path_options_read_as_test_paths(args, PROJECT_ROOT) == misread


def test_path_options_joined_to_one_word():
    assert joined_path_options(["-n", "2", "--impl", "a.py", "--impl=b", "--replay", "c",
                                "-k", "x"]) == [
        "-n", "2", "--impl=a.py", "--impl=b", "--replay=c", "-k", "x"]


@pytest.mark.long
def test_two_implementations_one_failing_one_passing(run_pytest):
    result = run_pytest("--impl", "conv_impl.tutorial", "--impl", "conv_impl.einsum",
                        "-k", "test_grad_input and conv2d]", "-rA")
    assert result.returncode == 1
    assert "PASSED tests/conformance/test_conformance.py::test_grad_input[conv_impl.einsum-conv2d]" \
        in result.stdout
    assert "FAILED tests/conformance/test_conformance.py::test_grad_input[conv_impl.tutorial-conv2d]" \
        in result.stdout
    # The run summary: one failing, one passing implementation, each with its coverage.
    summary = result.stdout.split("convolution harness summary")[1]
    assert "conv_impl.tutorial [conv_impl.tutorial]: FAILED: grad_input (conv2d)" in summary
    assert "conv_impl.einsum [conv_impl.einsum]: passed" in summary
    assert summary.count("examples tried:") == 2 and summary.count("features covered:") == 2
    assert "not generated (its CAPABILITIES): dilation > 1, groups > 1, bias=None" in summary
    assert summary.count("  never drawn (give such problems with --conv-problem): batch > 17, "
                         "channels per group > 129, forward and grad_input K > 4096, K > 512 in "
                         "float16\n") == 2


BAD_SPECS = {
    "no_such_file": ("missing/nowhere.py", "no such file"),
    "no_such_module": ("no_such_pkg.conv", "no module named 'no_such_pkg'"),
    "import_error": ("{dir}/raises.py", "importing"),
    "no_functions": ("{dir}/empty.py", "provides none of the contract's functions"),
    "bad_capabilities": ("{dir}/badcaps.py", "unknown CAPABILITIES key"),
    "no_such_attribute": ("conv_impl.einsum:nothing", "has no attribute 'nothing'"),
}


@pytest.mark.parametrize("case", sorted(BAD_SPECS))
def test_a_spec_that_cannot_be_loaded_is_a_usage_error(run_pytest, tmp_path, case):
    (tmp_path / "raises.py").write_text("raise RuntimeError('broken on import')\n")
    (tmp_path / "empty.py").write_text("x = 1\n")
    (tmp_path / "badcaps.py").write_text(textwrap.dedent("""
        from conv_impl.einsum import conv2d
        CAPABILITIES = {"dilations": False}
    """))
    spec, reason = BAD_SPECS[case]
    spec = spec.format(dir=tmp_path)
    result = run_pytest("--impl", spec)
    assert result.returncode == 4, result.stdout + result.stderr
    error = result.stderr.strip().splitlines()
    assert any(spec in line and reason in line for line in error), result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_the_entry_point_asks_for_the_suite_only_where_a_run_is_the_suites(monkeypatch,
                                                                           tmp_path):
    """The light entry point registers the suite's plugins where the conformance conftest
    is loaded, or a harness option or environment variable is given (``pytest --replay``
    from any folder); an unrelated run (tests/harness/test_installed.py runs one) gets
    none of them."""
    from pathlib import Path
    from types import SimpleNamespace

    from conv_harness import pytest_entry

    def config(*args, plugins=()):
        return SimpleNamespace(invocation_params=SimpleNamespace(args=args),
                               pluginmanager=SimpleNamespace(get_plugins=lambda: plugins))

    monkeypatch.delitem(sys.modules, pytest_entry.SUITE_CONFTEST, raising=False)
    for name in ("CONV_IMPL", "CONV_DB", "PYTEST_ADDOPTS"):
        monkeypatch.delenv(name, raising=False)
    assert not pytest_entry.asks_for_suite(config())
    assert not pytest_entry.asks_for_suite(config("tests", "-k", "impl"))
    for asking in (["--replay=case.json"], ["--impl", "x.py"], ["--isolate"],
                   ["--conv-budget", "5"]):
        assert pytest_entry.asks_for_suite(config(*asking)), asking
    suite_conftest = SimpleNamespace(
        __file__=str(Path(pytest_entry.__file__).parent / "conformance" / "conftest.py"))
    assert pytest_entry.asks_for_suite(config(plugins=(suite_conftest,)))
    other_conftest = SimpleNamespace(__file__=str(tmp_path / "conformance" / "conftest.py"))
    assert not pytest_entry.asks_for_suite(config(plugins=(other_conftest,)))
    monkeypatch.setenv("CONV_IMPL", "mine.py")
    assert pytest_entry.asks_for_suite(config())
    monkeypatch.delenv("CONV_IMPL")
    monkeypatch.setenv("PYTEST_ADDOPTS", "--conv-db=/tmp/db")
    assert pytest_entry.asks_for_suite(config())
