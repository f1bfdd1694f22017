"""The standalone reproduction script (conv_harness/records/script.py).

Scripts for many generated cases are loaded in process and compared with the
harness: the same values bit for bit, the same memory layouts, the same
elementwise tolerance, the same verdict. Two are run as a user would, with
``python``, from a folder outside the project, against a file spec with a
class whose functions are methods.
"""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conv_harness.checks import oracle
from conv_harness.checks.registry import run_check
from conv_harness.checks.tolerance import Arithmetic, summed_in_float32, tolerance
from conv_harness.problem import OPS, make_layout
from conv_harness.replay import corpus_files
from conv_harness.records.failures import case_record, load_case
from conv_harness.records.script import render_script
from conv_harness.running.calling import CheckFailure
from conv_harness.running.capabilities import Capabilities
from conv_harness.running.loader import load_implementation
from strategies import catalogue, conv_cases

ALLOWED_IMPORTS = {"importlib", "importlib.util", "inspect", "math", "os", "sys", "threading",
                   "traceback", "numpy", "torch"}


def load_script(text: str, folder: Path):
    path = folder / f"repro_{abs(hash(text))}.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    saved = list(sys.path)
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path[:] = saved
    return module


def run_main(module) -> str | None:
    """The script's verdict: None when it passes, else its failure text."""
    saved = list(sys.path)
    try:
        module.main(module.implementation())
    except module.Failed as failure:
        return str(failure)
    finally:
        sys.path[:] = saved
    return None


@settings(max_examples=40, derandomize=True, database=None, deadline=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data(), check=st.sampled_from(["forward", "grad_input", "grad_weight",
                                              "grad_bias"]))
def test_script_restates_values_layouts_and_tolerance_exactly(data, check):
    op = data.draw(st.sampled_from(sorted(OPS)))
    case = data.draw(conv_cases(op))
    record = case_record("conv_impl.einsum", case, check, "m")
    with tempfile.TemporaryDirectory() as tmp:
        module = load_script(render_script(record, case), Path(tmp))
    for name, original in case.arrays().items():
        literal = getattr(module, name)
        if original is None:
            assert literal is None
            continue
        assert literal.dtype == original.dtype and literal.tobytes() == original.tobytes()
        layout = case.layouts.get(name, "C")
        assert module.layout(literal, layout).strides == make_layout(original, layout).strides
    references, magnitude = oracle.evaluate(case)
    expected = module.torch_results()
    for name, reference in vars(references).items():
        if reference is None:
            continue
        assert np.array_equal(expected[name], reference)
        assert np.array_equal(module.allowed(name, magnitude[name]),
                              tolerance(case, name, magnitude, Arithmetic()).bound), name
    assert run_main(module) is None  # einsum is correct: the script passes


@pytest.mark.parametrize("accumulation", ["float32", "float16"])
def test_a_long_float16_sum_is_bounded_as_declared_in_the_script_too(accumulation, tmp_path):
    """A float16 result of more than FLOAT16_MAX_TERMS products is judged as summed in
    float32 and rounded once, unless float16 sums are declared (then float16's own
    gamma(K), as at 512 products and fewer); the script's bound is the harness's."""
    visit = catalogue.long_float16_visits("conv2d", Capabilities())[0]
    case = visit.case()
    record = case_record("conv_impl.einsum", case, "forward", "m")
    if accumulation == "float16":
        record["float16_accumulation"] = "float16"
    module = load_script(render_script(record, case), tmp_path)
    _, magnitude = oracle.evaluate(case)
    ours = tolerance(case, "y", magnitude, Arithmetic(float16_accumulation=accumulation))
    assert np.array_equal(module.allowed("y", magnitude["y"]), ours.bound)
    assert ours.summed_in_float32 == (accumulation == "float32")
    assert [summed_in_float32("float16", k, Arithmetic()) for k in (512, 513)] == [False, True]
    assert run_main(module) is None  # einsum sums float16 in float32: the script passes
    declared = Capabilities.from_mapping({"float16_accumulation": "float16"})
    assert catalogue.long_float16_visits("conv2d", declared) == ()
    assert catalogue.long_float16_visits("conv_transpose2d", Capabilities()) == ()


def test_script_imports_only_numpy_torch_and_the_standard_library():
    record, case = load_case(corpus_files()[0])
    tree = ast.parse(render_script(record, case))
    imported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module)
    assert imported <= ALLOWED_IMPORTS, imported


@pytest.mark.parametrize("path", corpus_files(), ids=lambda p: p.stem)
def test_corpus_scripts_fail_like_the_harness(path, tmp_path):
    record, case = load_case(path)
    with pytest.raises(CheckFailure) as info:
        run_check(record["run_check"], load_implementation("conv_impl.tutorial"), case)
    record = {**record, "impl": "conv_impl.tutorial"}
    failure = run_main(load_script(render_script(record, case), tmp_path))
    assert failure is not None
    # the same first line as the harness's report: count, largest error, index, values
    harness_line = info.value.message.splitlines()[0]
    assert failure.splitlines()[0].startswith(harness_line.split(" (allowed")[0])


def test_repeatable_and_other_checks(tmp_path):
    record, case = load_case(corpus_files()[0])
    noisy = tmp_path / "noisy.py"
    noisy.write_text(textwrap.dedent("""\
        import numpy as np
        from conv_impl import einsum
        _calls = [0]
        def conv2d(x, weight, bias, **kw):
            _calls[0] += 1
            return einsum.conv2d(x, weight, bias, **kw) + _calls[0] * 1e-3
        """))
    text = render_script({**record, "impl": str(noisy), "run_check": "repeatable"}, case)
    assert "repeatable: conv2d gave a different y" in run_main(load_script(text, tmp_path))
    other = render_script({**record, "impl": "conv_impl.einsum", "run_check": "scaling"}, case)
    assert "check 'scaling' is not restated here" in other
    assert run_main(load_script(other, tmp_path)) is None


def test_script_runs_standalone_against_a_file_spec_class(tmp_path):
    """As a user runs it: ``python script.py``, from another folder."""
    record, case = load_case(corpus_files()[0])
    impl = tmp_path / "impl" / "mine.py"
    impl.parent.mkdir()
    impl.write_text(textwrap.dedent("""\
        from conv_impl import einsum
        class Impl:
            def __init__(self):
                self.offset = OFFSET
            def conv2d_backward(self, *args, **kw):
                gi, gw, gb = einsum.conv2d_backward(*args, **kw)
                return gi + self.offset, gw, gb
        """))
    scripts = {}
    for offset, name in ((0.0, "good"), (0.5, "bad")):
        file = tmp_path / "impl" / f"{name}.py"
        file.write_text(impl.read_text().replace("OFFSET", repr(offset)))
        text = render_script({**record, "impl": f"{file}:Impl"}, case, name=f"{name}_repro.py")
        scripts[name] = tmp_path / f"{name}_repro.py"
        scripts[name].write_text(text)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    runs = {name: subprocess.Popen([sys.executable, str(path)], cwd=elsewhere, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            for name, path in scripts.items()}
    good_out, good_err = runs["good"].communicate(timeout=300)
    bad_out, bad_err = runs["bad"].communicate(timeout=300)
    assert runs["good"].returncode == 0, good_out + good_err
    assert good_out.startswith("OK: check grad_input holds")
    assert runs["bad"].returncode == 1, bad_out + bad_err
    assert "grad_input: " in bad_out and "largest error 0.5 at index" in bad_out
    assert "expected grad_input:" in bad_out and "actual grad_input:" in bad_out


# ------------------------------------------------ scripts that travel (issue 20)

BUGGY = """\
from conv_impl import einsum
def conv2d_backward(*args, **kw):
    gi, gw, gb = einsum.conv2d_backward(*args, **kw)
    return gi + 0.5, gw, gb
"""
FIXED = "from conv_impl.einsum import conv2d_backward\n"


def _run(script: Path, *args: str, cwd: Path, env: dict | None = None):
    import os
    full = {k: v for k, v in os.environ.items() if k != "CONV_IMPL"}
    return subprocess.run([sys.executable, str(script), *args], cwd=cwd, text=True,
                          capture_output=True, timeout=300, env={**full, **(env or {})})


@pytest.mark.long
def test_a_script_copied_beside_the_users_file_runs_there(tmp_path):
    """Recorded on another machine (its path does not exist here): the script finds the
    file of that name beside itself; an argument or $CONV_IMPL names another."""
    record, case = load_case(corpus_files()[0])
    record = {**record, "impl": "/home/someone/project/mine.py",
              "impl_file": "/home/someone/project/mine.py"}
    report = tmp_path / "bug-report"
    report.mkdir()
    (report / "mine.py").write_text(BUGGY)
    (tmp_path / "fixed.py").write_text(FIXED)
    script = report / "repro.py"
    script.write_text(render_script(record, case, name="repro.py"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = _run(script, cwd=elsewhere)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "largest error 0.5 at index" in done.stdout
    assert _run(script, str(tmp_path / "fixed.py"), cwd=elsewhere).returncode == 0
    assert _run(script, cwd=elsewhere, env={"CONV_IMPL": str(tmp_path / "fixed.py")}) \
        .returncode == 0
    (report / "mine.py").unlink()  # nowhere to be found: one clear line, not a traceback
    lost = _run(script, cwd=elsewhere)
    assert lost.returncode == 1 and "cannot find mine.py beside this script" in lost.stderr
    assert "Traceback" not in lost.stderr


def test_a_relative_spec_is_found_from_the_current_folder_and_a_module_by_name(tmp_path):
    record, case = load_case(corpus_files()[0])
    (tmp_path / "pkgdir").mkdir()
    (tmp_path / "pkgdir" / "fixed_mod.py").write_text(FIXED)
    script = tmp_path / "repro.py"
    script.write_text(render_script({**record, "impl": "pkgdir/fixed_mod.py"}, case))
    assert _run(script, cwd=tmp_path).returncode == 0
    script.write_text(render_script({**record, "impl": "fixed_mod"}, case))
    assert _run(script, cwd=tmp_path / "pkgdir").returncode == 0


def test_the_time_limit_is_read_from_the_recorded_failure():
    from conv_harness.records.script import recorded_time_limit
    from conv_harness.running.calling import timeout_failure

    full = timeout_failure("conv2d", 0.5, 0.5).message
    shorter = timeout_failure("conv2d", 0.25, 10.0).message
    assert recorded_time_limit({"check": "timeout", "message": full}) == 0.5
    assert recorded_time_limit({"check": "timeout", "message": shorter}) == 0.25
    assert recorded_time_limit({"check": "timeout", "message": full, "time_limit": 2}) == 2.0
    assert recorded_time_limit({"check": "grad_input", "message": full}) is None


def test_a_timeout_script_stops_at_its_recorded_limit_and_says_so(tmp_path):
    from conv_harness.running.calling import timeout_failure

    _, case = load_case(corpus_files()[1])  # stride 3: tests/harness/broken/hangs.py loops
    assert case.problem.stride != (1, 1)
    hangs = Path(__file__).parent / "broken" / "hangs.py"
    message = timeout_failure("conv2d", 0.5, 0.5).message
    record = case_record(str(hangs), case, "timeout", message, run_check="forward")
    script = tmp_path / "repro.py"
    script.write_text(render_script(record, case))
    done = _run(script, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "did not return within 0.5 s (the time limit this case was recorded with)" \
        in done.stdout


def test_a_crash_scripts_call_runs_in_a_child_whose_death_is_its_failure(tmp_path):
    """A crash case's script (exit 1 where the call kills the child it runs in); an
    implementation that cannot be imported there is an exception, as in any script,
    not a crash."""
    from tests.harness.test_triage import constant_case, problem

    case = constant_case(problem(padding=(1, 0)))
    segfault = Path(__file__).parent / "broken" / "segfault.py"
    record = case_record(str(segfault), case, "crashed", "conv2d crashed", run_check="forward")
    script = tmp_path / "repro.py"
    script.write_text(render_script(record, case))
    done = _run(script, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the call crashed the process it ran in (signal 11), as recorded" in done.stdout
    broken = tmp_path / "broken_import.py"
    broken.write_text("raise RuntimeError('cannot be imported')\n")
    done = _run(script, str(broken), cwd=tmp_path)
    assert done.returncode == 1 and "RuntimeError: cannot be imported" in done.stderr
    assert "crashed" not in done.stdout, done.stdout
