"""--conv-budget adapts sizes, not only the number of examples (issue 15).

``slow.py:by_size`` costs time in proportion to its work: an example of the
large tier about half a second, a small one about a millisecond. With the
default mix (about one example in five large) a 4 s budget would give some
40 examples; measured before the search, the budget drops the large tier for
that test (and says so in the summary), and the profile's 100 examples fit.
The choice is made once per test, so shrinking and the final replay see the
same strategy: the slow stride bug still gets its minimal case and its script
fails alone. ``slow.py:correct`` costs the same per call whatever the size (as
a compiler per shape does): its sizes stay.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.harness.runs import suite_in_process
from tests.harness.test_triage import scripts_exit_1

SLOW = Path(__file__).resolve().parent / "slow.py"
BUDGET = 4.0


def test_a_budget_too_small_for_large_examples_draws_small_ones(tmp_path):
    done = suite_in_process(f"{SLOW}:by_size", ("grad_input",), ("conv2d",), tmp_path / "f",
                            budget=BUDGET)
    assert done.passed, done.text[-3000:]
    chosen = re.search(r"noted \(not failures\): --conv-budget chose (no large sizes|small "
                       r"sizes) for conv2d grad_input(?:: no large tier[^(]*)? \(an example took "
                       r"([\d.e-]+) s tiny, ([\d.e-]+) s small, ([\d.e-]+) s large\)", done.text)
    assert chosen, done.text[-3000:]
    # The choice follows what it measured, one timing of each tier, whatever the machine's
    # load: large examples cost over twice small ones, so the large tier goes; the small
    # sizes are halved too only where 100 small examples did not fit the budget and they
    # cost over twice a tiny one (a load spike during the small timing does that).
    choice, *timings = chosen.groups()
    tiny, small, large = (float(t) for t in timings)
    if choice == "no large sizes":
        assert large > 2 * small, chosen.group(0)
        assert 100 * small <= BUDGET or small <= 2 * tiny, chosen.group(0)
    else:
        assert 100 * small > BUDGET - tiny - small - large and small > 2 * tiny, chosen.group(0)
        assert large >= small, chosen.group(0)
    summary = json.loads((tmp_path / "f" / "summary.json").read_text())
    # (on a loaded machine timing the three examples can spend the whole budget: none)
    examples = summary["implementations"][0]["examples"]
    assert examples <= 100
    # the tiny tier's sizes only, in whatever ran: the large tier reaches K in the thousands
    largest = re.search(r"reduction length K (\d+)", done.text)
    assert (largest is None and examples == 0) or (
        largest and int(largest.group(1)) <= 200), done.text[-2000:]
    # no archetype brings a large kernel back (a 7x7 stem is capped at the tiny bound)
    assert not re.search(r"large (batch|channels|kernel)", done.text), done.text[-2000:]


def test_sizes_chosen_once_keep_shrinking_and_replay_deterministic(tmp_path):
    failures = tmp_path / "failures"
    done = suite_in_process(f"{SLOW}:buggy_by_size", ("grad_input",), ("conv2d",), failures,
                            budget=8)
    out = done.text
    (bug,) = done.bugs()
    assert 3 in bug["params"]["stride"]  # the stride bug, shrunk
    # which of the two cuts it takes follows one timing of each tier (see above)
    assert re.search(r"--conv-budget chose (no large|small) sizes for conv2d grad_input", out)
    assert "Flaky" not in out and "Unreliable" not in out
    scripts_exit_1(failures, [bug])


def test_cost_per_call_keeps_every_size(tmp_path):
    done = suite_in_process(f"{SLOW}:correct", ("grad_input",), ("conv2d",), tmp_path / "f",
                            budget=2)
    assert done.passed, done.text[-3000:]
    assert re.search(r"--conv-budget kept every size for conv2d grad_input: cost does not "
                     r"grow with size", done.text), done.text[-3000:]
