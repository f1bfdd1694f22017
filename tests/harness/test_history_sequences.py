"""History-dependent bugs rebuilt from the harness's own record of the calls it made.

``history.py:third_call_wrong`` is right on the first two calls of a problem
and wrong from the third on (a state built up over several calls). Alone, the
failing call passes; the same call made once before, or a call with other
values first, still passes (two calls). The run's record of its calls
(conv_harness/triage/history.py's `CallLog`, in the run's state) holds the calls it made
on that problem before the failing one; the shortest tail of them that shows the bug goes into
the case file's ``before``, and the script and ``--replay`` make those calls.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conv_harness.problem import ConvCase, ConvProblem
from conv_harness.triage.history import CallLog
from strategies.cases import noise
from tests.harness.test_triage import in_process, scripts_exit_1

HISTORY = Path(__file__).resolve().parent / "history.py"


def test_a_state_built_over_several_calls_is_rebuilt_from_the_run_record(run_pytest, tmp_path,
                                                                         monkeypatch):
    (bug,), failures, out = in_process(tmp_path, monkeypatch, f"{HISTORY}:third_call_wrong",
                                       ("forward",))
    assert bug["failure"] == "history" and bug["reproduces_alone"] is True, bug
    # met again by a further search: no region to exclude, so the searches end there
    assert ("a further search met conv2d's results that depend on earlier calls again, which "
            "no search can exclude: other bugs may remain") in out, out
    made = re.match(r"depends on earlier calls: wrong after the last (\d+) calls the run made "
                    r"before it \(its own record\)", bug["trigger"])
    assert made, bug["trigger"]
    record = json.loads((failures / bug["case_file"]).read_text())
    # two on its problem at least (the two the state needs), the shortest tail with them
    assert len(record["before"]) == int(made.group(1)) >= 2
    assert {call["function"] for call in record["before"]} == {"conv2d"}
    scripts_exit_1(failures, [bug])
    again = run_pytest("--replay", failures / bug["case_file"])
    assert again.returncode == 1 and "still fails" in again.stdout, again.stdout[-2000:]


@pytest.mark.long
def test_earlier_calls_on_other_problems_are_rebuilt_from_the_run_record(tmp_path,
                                                                          monkeypatch):
    """The state is keyed by the arrays' shapes: the calls that built it were on other
    problems (same shapes, another stride or dilation), as tinygrad's were."""
    (bug,), failures, _ = in_process(tmp_path, monkeypatch,
                                     f"{HISTORY}:third_call_of_shapes_wrong", ("forward",))
    assert bug["failure"] == "history" and bug["reproduces_alone"] is True, bug
    assert "calls the run made before it (its own record)" in bug["trigger"], bug["trigger"]
    scripts_exit_1(failures, [bug])


def _case(n: int, value: float) -> ConvCase:
    p = ConvProblem(op="conv1d", batch=1, in_channels=1, out_channels=1, input_size=(n,),
                    kernel_size=(1,), stride=(1,), padding=(0,), dilation=(1,), groups=1,
                    bias=False, dtype="float64")
    arrays = {name: None if shape is None else noise("floats", "float64", shape, 0) + value
              for name, shape in p.shapes().items()}
    return ConvCase(problem=p, layouts={}, **arrays)


def test_the_call_log_gives_the_calls_before_the_failing_one(tmp_path):
    log = CallLog(size=4)
    log(_case(1, 0), "conv1d")  # outside a test: not recorded
    log.spec = "mine"
    for i in range(6):
        log(_case(1 + i % 2, i), "conv1d")
    log.spec = "other"
    log(_case(1, 9), "conv1d")
    # only the last 4 calls are kept; another implementation's calls are not its history
    assert [c.case.x.flat[0] for c in log.before("mine", "conv1d", _case(2, 5))] == [
        c.x.flat[0] for c in (_case(2, 3), _case(1, 4))]
    assert log.before("mine", "conv1d", _case(2, 1)) == []  # no longer recorded
    kept = tmp_path / "case.json"
    log.keep(kept)
    log.spec = "mine"
    log(_case(1, 7), "conv1d")  # after the failure was saved: not in its record
    assert len(log.before("mine", "conv1d", _case(2, 5), kept)) == 2
