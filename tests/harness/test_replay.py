"""``pytest --replay`` and the regression corpus (conv_harness/replay.py).

In process: the corpus fails for the tutorial and holds for the correct
implementations; skip reasons; every kind of bad input is a clear error
naming the file. In subprocesses: a folder replayed under xdist collects
only the replays, the corpus runs before the random search, and bad input
is exit status 4 with one message and no traceback.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conv_harness import replay
from conv_harness.checks.registry import run_check
from conv_harness.records.failures import CaseFileError, dump_record, load_case
from conv_harness.records.script import render_script
from conv_harness.running.calling import CheckFailure
from conv_harness.running.capabilities import Capabilities
from conv_harness.running.loader import load_implementation

CORPUS = replay.corpus_files()
CORRECT = ("conv_impl.einsum", "conv_impl.direct", "conv_impl.im2col")


def test_corpus_holds_the_tutorials_shrunk_cases():
    assert len(CORPUS) >= 2
    for path in CORPUS:
        record, case = load_case(path)
        assert "tutorial" in record["impl"] and record["run_check"] in {"grad_input"}
        assert case.x.size <= 16  # shrunk: small enough to read


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_corpus_fails_for_the_tutorial_and_holds_for_correct_implementations(path):
    record, case = load_case(path)
    with pytest.raises(CheckFailure):
        run_check(record["run_check"], load_implementation("conv_impl.tutorial"), case)
    for spec in CORRECT:
        run_check(record["run_check"], load_implementation(spec), case)


def test_skip_reasons_name_the_missing_function_or_the_capability():
    _, case = load_case(CORPUS[0])
    one_d = load_implementation("examples/conv1d_layer.py")
    assert "does not provide conv2d_backward" in replay.skip_reason(one_d, "grad_input", case)
    assert replay.skip_reason(load_implementation("conv_impl.einsum"), "grad_input", case) is None
    assert Capabilities(dtypes=("float32",)).excludes(case) == [
        "dtype float64 (accepts float32)"]
    case.layouts["x"] = "F"
    assert Capabilities(contiguous_only=True).excludes(case) == [
        "non-contiguous inputs"]


def test_bad_input_is_a_usage_error_or_case_file_error_naming_the_file(tmp_path):
    with pytest.raises(pytest.UsageError, match="missing.json: no such case file"):
        replay.case_files(["missing.json"], tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(pytest.UsageError, match="holds no case files"):
        replay.case_files(["empty"], tmp_path)
    record = json.loads(CORPUS[0].read_text())
    bad = {
        "truncated.json": (CORPUS[0].read_text()[:200], "truncated"),
        "v9.json": (dump_record({**record, "schema_version": 9}), "schema version 9"),
        "noimpl.json": (dump_record({**record, "impl": "no/such/impl.py"}),
                        "names an implementation that cannot be loaded"),
        "nocheck.json": (dump_record({**record, "run_check": "bogus"}), "check 'bogus'"),
    }
    for name, (text, message) in bad.items():
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(CaseFileError, match=message) as info:
            replay.load_replay(path, None)
        assert str(path) in str(info.value)
    # --impl replaces the recorded implementation, so that one need not load
    einsum = load_implementation("conv_impl.einsum")
    assert replay.load_replay(tmp_path / "noimpl.json", [einsum]).impls == [einsum]


def test_replay_of_a_folder_under_xdist_collects_only_the_replays(run_pytest):
    done = run_pytest("--replay", "tests/regressions", "-n", "2", "-v")
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    assert f"{len(CORPUS)} failed" in done.stdout and "passed" not in done.stdout.splitlines()[-1]
    assert "test_conformance" not in done.stdout and "test_regression" not in done.stdout
    for path in CORPUS:  # against the implementation each file names
        assert f"tests/regressions/{path.name}::" in done.stdout
    assert "still fails" in done.stdout and "largest error" in done.stdout


def test_corpus_cases_belong_to_the_implementation_that_recorded_them():
    """Default: a case only against its recorder, however its spec is written."""
    by_spec = {json.loads(p.read_text())["impl"]: p for p in CORPUS}
    tutorial = load_implementation("conv_impl.tutorial")
    as_file = load_implementation("conv_impl/tutorial.py")
    variant = load_implementation("tools/tutorial_variants.py:stride_bug_square")
    einsum = load_implementation("conv_impl.einsum")
    own = replay.corpus_cases([tutorial, as_file, variant, einsum], "own")
    assert (tutorial, by_spec["conv_impl.tutorial"]) in own
    assert (as_file, by_spec["conv_impl.tutorial"]) in own
    assert (variant, by_spec["tools/tutorial_variants.py:stride_bug_square"]) in own
    assert len(own) == 3 and not [impl for impl, _ in own if impl is einsum]
    assert len(replay.corpus_cases([tutorial, einsum], "all")) == 2 * len(CORPUS)
    assert replay.corpus_cases([tutorial], "none") == []
    # the same module, another attribute: another implementation
    fixed = load_implementation("conv_impl.tutorial:fixed")
    assert not replay.recorded_for("conv_impl.tutorial", fixed)
    assert replay.corpus_cases([fixed], "own") == []


def test_the_corpus_is_not_replayed_against_others_by_default(run_pytest):
    done = run_pytest("--impl", "conv_impl.einsum", "-k", "test_regression", "-rs")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test_regression[none]" in done.stdout or "1 skipped" in done.stdout
    assert "no case of the regression corpus was recorded for the implementations under " \
           "test" in done.stdout


def test_replayed_against_another_a_failure_is_its_own_bug_reported_once(run_pytest, tmp_path):
    """``--conv-regressions all``: the tutorial fails the stride variant's case in its own
    words (its spec, its trigger, its case file), once, and the bug is in its bug list.
    Once also on CI, where pytest's short summary would repeat each whole report."""
    done = run_pytest("--impl", "conv_impl.tutorial", "--conv-regressions", "all",
                      "-k", "test_regression", "--conv-failures", tmp_path / "f",
                      env={"CI": "true"})
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert f"{len(CORPUS)} failed" in out
    assert "During handling" not in out and "still fails" not in out
    assert "recorded: check" not in out and "failed for tools/" not in out
    assert "(recorded for tools/tutorial_variants.py:stride_bug_square)" in out
    assert out.count("conv_impl.tutorial conv2d: check 'grad_input' failed") == len(CORPUS)
    assert "trigger:   fails when stride >= 3" in out
    [record] = json.loads((tmp_path / "f" / "summary.json").read_text())["implementations"]
    assert record["verdict"] == "failed"
    assert len(record["bugs"]) == len(CORPUS)
    for bug in record["bugs"]:  # saved as the tutorial's own case files
        saved = json.loads((tmp_path / "f" / bug["case_file"]).read_text())
        assert saved["impl"] == "conv_impl.tutorial"
    assert {b["trigger"].split(";")[0] for b in record["bugs"]} == {
        "fails when padding >= 1", "fails when stride >= 3 and outputs >= 2"}


def test_regression_corpus_is_collected_before_the_random_search(run_pytest):
    done = run_pytest("--co", "--impl", "conv_impl.einsum", "--impl", "conv_impl.direct",
                      "--conv-regressions", "all")
    ids = [line for line in done.stdout.splitlines() if "::" in line]
    regressions = [i for i in ids if "test_regressions.py" in i]
    assert len(regressions) == 2 * len(CORPUS)
    assert ids[: len(regressions)] == regressions and len(ids) > len(regressions)


@pytest.mark.parametrize("bad", ["truncated", "impl"])
def test_bad_replay_input_is_exit_4_with_one_message(run_pytest, tmp_path, bad):
    path = tmp_path / "case.json"
    record = json.loads(CORPUS[0].read_text())
    if bad == "truncated":
        path.write_text(CORPUS[0].read_text()[:150])
        expected = "truncated"
    else:
        path.write_text(dump_record({**record, "impl": "no_such_module.conv"}))
        expected = "names an implementation that cannot be loaded"
    done = run_pytest("--replay", path)
    assert done.returncode == 4, done.stdout + done.stderr
    assert str(path) in done.stderr and expected in done.stderr
    assert "Traceback" not in done.stdout + done.stderr


EVERY_OTHER_CALL = '''
from conv_impl import einsum

CALLS = [0]


def conv2d(x, weight, bias, **kw):
    """Right on odd calls, off by one on even ones (a race, memory not initialised)."""
    CALLS[0] += 1
    y = einsum.conv2d(x, weight, bias, **kw)
    return y + 1.0 if CALLS[0] % 2 == 0 else y
'''


def test_a_case_that_comes_and_goes_is_replayed_and_scripted_as_often_as_it_records(
        tmp_path):
    """Issue 34: ``tries`` in a case file: the replay and the script call the
    implementation that many times (loading it once), failing when any call fails."""
    module = tmp_path / "every_other.py"
    module.write_text(EVERY_OTHER_CALL)
    record = json.loads(CORPUS[0].read_text())
    record.update(impl=str(module), check="forward", run_check="forward")
    for tries, fails in ((1, False), (2, True)):
        path = tmp_path / f"tries{tries}.json"
        path.write_text(dump_record({**record, "tries": tries}))
        case = replay.load_replay(path, None)
        impl = load_implementation(str(module))  # a fresh module: its first call is right
        assert case.tries == tries
        assert (replay.replayed_failure(impl, case, None) is not None) == fails
        script = tmp_path / f"tries{tries}.py"
        script.write_text(render_script(record | {"tries": tries}, name=script.name))
        done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == (1 if fails else 0), done.stdout + done.stderr
        if fails:
            assert "(call 2 of up to 2)" in done.stdout


def test_a_runs_isolated_implementation_is_not_the_next_runs(tmp_path):
    """A case's implementation is loaded once per run, not once per process: --isolate
    changes it in place, and a later run in the same process (pytest.main twice, a
    fuzz worker) must get it as it is, not isolated."""
    from conv_harness.running.isolate import IsolatedFunction, isolated
    path = tmp_path / "case.json"
    path.write_text(CORPUS[0].read_text())
    run: dict = {}
    first = replay.load_replay(path, None, run).impls[0]
    assert replay.load_replay(path, None, run).impls[0] is first  # once per run
    isolated(first)
    assert all(isinstance(f, IsolatedFunction) for f in first.functions.values())
    later = replay.load_replay(path, None, {}).impls[0]
    assert later is not first
    assert not any(isinstance(f, IsolatedFunction) for f in later.functions.values())
