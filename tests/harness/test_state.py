"""One conformance test's state (conv_harness/searching/state.py): explicit, per test, never shared.

The searches are called here in process, with a state of their own, as the
plugin calls them for each test.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import time
from pathlib import Path
from typing import Iterator

from hypothesis import settings

from conv_harness.searching import suite
from conv_harness.running.loader import load_implementation
from conv_harness.running.target import Target
from conv_harness.searching.state import Budget, TestState, current, running
from conv_harness.searching import search
from tests.harness.conftest import QUIET


def test_a_spent_budget_still_runs_one_example():
    """A budget spent before the first example (start-up took it all) still gives the
    test one example: a verdict with none behind it says nothing."""
    budget = Budget.starting_now(1e-9)
    time.sleep(0.001)
    assert not budget.spent()
    budget.examples = 1
    assert budget.spent()
    assert not Budget.starting_now(None).spent()


def test_each_test_has_its_own_state_and_outside_a_test_the_context_has_one():
    outside = current()
    assert current() is outside
    first, second = TestState(), TestState()
    with running(first):
        assert current() is first
        with running(second):
            assert current() is second
        assert current() is first
    assert current() is outside


def _target(spec: str, op: str, tmp_path) -> Target:
    return Target(load_implementation(spec), op, None, tmp_path)


@contextlib.contextmanager
def _profile(**changes):
    """Hypothesis's default settings changed for the block (the searches read them)."""
    before = settings._current_profile
    settings.register_profile("test-state", settings.default, **{**QUIET, **changes})
    settings.load_profile("test-state")
    try:
        yield
    finally:
        settings.load_profile(before)


def test_a_search_in_process_leaves_its_finding_in_its_state_only(tmp_path):
    """The tutorial's grad_input bug, found by one search called directly: the finding
    is in the state passed to it, nowhere else; a second state starts empty."""
    target = _target("conv_impl.tutorial", "conv2d", tmp_path)
    state, other = TestState(), TestState()
    with _profile(max_examples=60, derandomize=True):
        found, ended = search.follow_up(state, target, "grad_input", [])
    assert ended is None and len(found) == 1
    assert found[0].failure.check == "grad_input" and found[0].case_file is not None
    assert state.search.found == [] and state.budget.examples > 0
    assert other.search.found == [] and other.budget.examples == 0
    assert other.search.last_failing is None


def test_a_test_with_its_budget_spent_before_it_starts_gets_one_example(tmp_path, monkeypatch):
    """--conv-budget smaller than the start-up: one example, and the search ends, not
    drawing the rest of its ``max_examples``."""
    target = _target("conv_impl.einsum", "conv2d", tmp_path)
    state = TestState(budget=Budget.starting_now(1e-9))
    calls = []
    run = suite.run
    monkeypatch.setattr(suite, "run", lambda *args, **kw: calls.append(1) or run(*args, **kw))
    with _profile(max_examples=20, derandomize=True):
        found, ended = search.follow_up(state, target, "forward", [])
    assert (found, ended) == ([], None)
    assert state.budget.examples == 1 and len(calls) == 2


def test_the_draw_carries_its_archetype(tmp_path):
    """The archetype a problem's draw started from travels with the problem (no module
    global), and is no parameter of it."""
    from hypothesis import given

    from strategies import conv_problems

    seen = []

    @settings(max_examples=200, derandomize=True, **QUIET)
    @given(conv_problems("conv2d"))
    def draw(problem):
        seen.append(problem)

    draw()
    named = [p for p in seen if p.drawn_from is not None]
    assert named and any(p.drawn_from is None for p in seen)
    p = named[0]
    assert "drawn_from" not in p.params()
    assert p == type(p).from_params(p.op, p.params())
    assert suite.found_on(p, p.drawn_from, p) is not None


def test_one_rule_for_the_smaller_case():
    """Sightings and merged entries pick their case by one rule (`ConvProblem.size_rank`):
    fewer array elements first (with the padding's positions, then without), then the
    plainer kernel, dilation, padding and stride."""
    from conv_harness.problem import ConvProblem

    def problem(**changes):
        base = dict(op="conv2d", batch=1, in_channels=1, out_channels=1, input_size=(3, 1),
                    kernel_size=(2, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                    groups=1, bias=True, dtype="float64")
        return ConvProblem(**{**base, **changes})

    plain, dilated = problem(), problem(dilation=(2, 1), input_size=(3, 1))
    assert plain.size_rank() < dilated.size_rank()
    assert problem(input_size=(2, 1)).size_rank() < dilated.size_rank() < problem(
        batch=2).size_rank()
    # the padding counts as the input positions it adds (seen: a depthwise bug's entry
    # showed batch 2, a 2x2 input padded by 2, over its own batch 1, unpadded 3x3)
    assert problem(input_size=(3, 1)).size_rank() < problem(
        input_size=(2, 1), padding=(1, 0)).size_rank()
    depthwise = dict(in_channels=2, out_channels=2, groups=2, kernel_size=(3, 3))
    assert problem(**depthwise, input_size=(3, 3)).size_rank() < problem(
        **depthwise, batch=2, input_size=(2, 2), padding=(2, 2)).size_rank()


def test_a_failure_that_does_not_repeat_is_a_finding_not_the_end_of_a_search(tmp_path):
    """Issue 34: Hypothesis's FlakyFailure (it failed, then passed on replay) ended a
    further search "without a verdict"; it is the search's finding, marked as not
    repeating, for the triage to take as a bug of results that depend on the calls."""
    module = tmp_path / "first_call_wrong.py"
    module.write_text("from conv_impl import einsum\ncalls = []\n"
                      "def conv2d(x, weight, bias=None, **kw):\n"
                      "    calls.append(1)\n"
                      "    y = einsum.conv2d(x, weight, bias, **kw)\n"
                      "    return y + 1 if len(calls) == 1 else y\n")
    target = _target(str(module), "conv2d", tmp_path)
    with _profile(max_examples=20, derandomize=True):
        found, ended = search.follow_up(TestState(), target, "forward", [])
    assert ended is None, ended
    (finding,) = found
    assert finding.failure.check == "forward" and finding.repeats is False


def test_a_hang_shortens_the_limit_for_the_rest_of_its_run_only():
    """What a time-out teaches (the function hangs: its later calls get ten times its
    slowest call that returned) belongs to the run's `TimeLimit`, held by every
    target of the run, not to the process: another run starts at the full limit."""
    from conv_harness.running.calling import CheckFailure, TimeLimit, invoke

    def sometimes_hangs(seconds):
        time.sleep(seconds)
        return seconds

    run = TimeLimit(2.0)
    assert invoke(sometimes_hangs, "conv2d", (0.01,), {}, run) == 0.01
    assert run.for_call(sometimes_hangs) == 2.0
    with contextlib.suppress(CheckFailure):
        invoke(sometimes_hangs, "conv2d", (0.05,), {}, TimeLimit(0.02))  # another run
    assert run.for_call(sometimes_hangs) == 2.0
    try:
        invoke(sometimes_hangs, "conv2d", (3.0,), {}, run)
    except CheckFailure as failure:
        assert failure.check == "timeout" and "within 2 s (--conv-timeout)" in failure.message
    else:
        raise AssertionError("the hang was not stopped")
    assert run.for_call(sometimes_hangs) == 0.25  # ten times 0.01 s, at least 0.25 s
    assert TimeLimit(2.0).for_call(sometimes_hangs) == 2.0
    assert TimeLimit(None).for_call(sometimes_hangs) is None
    # the targets of one run share its limit; seconds alone make a fresh one
    assert Target(None, "conv2d", run, Path(".")).timeout is run
    assert Target(None, "conv2d", 2.0, Path(".")).timeout is not run


#: the module globals the harness rebinds, each a resource of the process, not state
#: of a test or a run: (file, name) -> why
PROCESS_GLOBALS = {
    ("conv_harness/running/isolate.py", "_isolation"): "the --isolate zygote: a child process, "
                                                  "started once per process",
    ("conv_harness/running/calling.py", "_call_observer"): "the hook the plugin installs into "
                                                      "every call of this process",
}


def modules(root: Path, folders: tuple[str, ...]) -> Iterator[tuple[str, ast.Module]]:
    """(file relative to ``root``, its syntax tree) of each module under ``folders``."""
    for folder in folders:
        for path in sorted((root / folder).rglob("*.py")):
            yield path.relative_to(root).as_posix(), ast.parse(path.read_text(), str(path))


def rebound_globals(root: Path, folders: tuple[str, ...]) -> set[tuple[str, str]]:
    """(file, name) of each ``global`` statement's names under ``folders`` of ``root``."""
    return {(file, name) for file, tree in modules(root, folders) for node in ast.walk(tree)
            if isinstance(node, ast.Global) for name in node.names}


def test_no_module_global_holds_the_state_of_a_test_or_a_run():
    """Issue 33: what one test or one run knows travels in `TestState` and `RunState`
    (and pytest's config.stash), never in a module global that a test must reset."""
    root = Path(__file__).resolve().parents[2]
    assert rebound_globals(root, ("conv_harness", "strategies")) == set(PROCESS_GLOBALS)


def test_a_rebound_global_is_found(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("_seen = None\n\ndef f():\n    global _seen\n"
                                           "    _seen = 1\n")
    assert rebound_globals(tmp_path, ("pkg",)) == {("pkg/m.py", "_seen")}


#: module-level containers the harness fills as it runs, each a cache or a resource
#: of the process, not state of a test or a run: (file, name) -> why
PROCESS_CONTAINERS = {
    ("conv_harness/checks/check.py", "REGISTRY"): "the checks, registered as their modules load",
    ("conv_harness/database.py", "_REDIS"): "one Redis client per server: Hypothesis's database "
                                       "compares equal only over the same client",
    ("conv_harness/triage/stored.py", "_NAMES"): "what a database object is called in messages",
}

#: constructors of an empty mutable container
_EMPTY = {"set", "dict", "list", "defaultdict", "OrderedDict", "Counter", "deque",
          "WeakKeyDictionary", "WeakValueDictionary"}


def empty_containers(root: Path, folders: tuple[str, ...]) -> set[tuple[str, str]]:
    """(file, name) of each module-level name bound to an empty mutable container (a
    constant table is written out full; an empty one is there to be filled)."""
    def empty(value: ast.expr) -> bool:
        if isinstance(value, ast.Dict):
            return not value.keys
        if isinstance(value, (ast.List, ast.Set)):
            return not value.elts
        if not isinstance(value, ast.Call) or value.args or value.keywords:
            return False
        name = getattr(value.func, "id", None) or getattr(value.func, "attr", None)
        return name in _EMPTY

    found = set()
    for file, tree in modules(root, folders):
        for node in tree.body:
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            if empty(value):
                found |= {(file, ast.unparse(target)) for target in targets}
    return found


def test_no_module_container_is_filled_with_the_state_of_a_test_or_a_run():
    root = Path(__file__).resolve().parents[2]
    assert empty_containers(root, ("conv_harness", "strategies")) == set(PROCESS_CONTAINERS)


def test_a_module_container_is_found(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("TABLE = {'a': 1}\n_seen: set[int] = set()\n"
                                           "_calls = []\n")
    assert empty_containers(tmp_path, ("pkg",)) == {("pkg/m.py", "_seen"),
                                                    ("pkg/m.py", "_calls")}


#: the ContextVars of the harness: (file, name) -> why each cannot be state in the
#: signatures (a callback whose caller cannot pass it)
CONTEXT_VARS = {
    ("conv_harness/searching/state.py", "_CURRENT"): "the test under way, for the hooks pytest calls",
}

_ENVIRON_WRITERS = {"update", "setdefault", "pop", "popitem", "clear", "__setitem__",
                    "__delitem__"}


def context_vars(root: Path, folders: tuple[str, ...]) -> set[tuple[str, str]]:
    """(file, name) of each module-level name bound to a ``ContextVar(...)``."""
    found = set()
    for file, tree in modules(root, folders):
        for node in tree.body:
            value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
            if isinstance(value, ast.Call) and (getattr(value.func, "id", None)
                                                or getattr(value.func, "attr", None)) \
                    == "ContextVar":
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                found |= {(file, ast.unparse(target)) for target in targets}
    return found


def environment_writes(root: Path, folders: tuple[str, ...]) -> set[tuple[str, int]]:
    """(file, line) of each write to the process environment in the code (not in the
    source text of a child process, which is a string): ``os.environ[k] = v``, ``del
    os.environ[k]``, ``os.environ.update(...)`` and the like, ``os.putenv``."""
    def environ(node: ast.expr) -> bool:
        return ast.unparse(node) in ("os.environ", "environ")

    found = set()
    for file, tree in modules(root, folders):
        for node in ast.walk(tree):
            targets = (node.targets if isinstance(node, ast.Assign) else
                       [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else
                       node.targets if isinstance(node, ast.Delete) else [])
            if any(isinstance(t, ast.Subscript) and environ(t.value) for t in targets):
                found.add((file, node.lineno))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                    (environ(node.func.value) and node.func.attr in _ENVIRON_WRITERS)
                    or ast.unparse(node.func) in ("os.putenv", "os.unsetenv")):
                found.add((file, node.lineno))
    return found


def test_no_state_travels_in_the_environment_or_in_unlisted_context_variables():
    """Issue 58: the run's id went from the xdist controller to its workers in
    ``$CONV_HARNESS_RUN`` (tests set and removed it); it goes in their ``workerinput``.
    No module writes the environment, and each ContextVar is listed with its reason."""
    root = Path(__file__).resolve().parents[2]
    assert environment_writes(root, ("conv_harness", "strategies")) == set()
    assert context_vars(root, ("conv_harness", "strategies")) == set(CONTEXT_VARS)


def test_an_environment_write_and_a_context_variable_are_found(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text(
        "import os\nfrom contextvars import ContextVar\n_v: ContextVar[int] = ContextVar('v')\n"
        "SOURCE = 'os.environ[\"A\"] = 1'\n"
        "def f():\n    os.environ['A'] = '1'\n    os.environ.update(B='2')\n"
        "    del os.environ['A']\n    os.environ.get('C')\n")
    assert environment_writes(tmp_path, ("pkg",)) == {("pkg/m.py", 6), ("pkg/m.py", 7),
                                                      ("pkg/m.py", 8)}
    assert context_vars(tmp_path, ("pkg",)) == {("pkg/m.py", "_v")}


def test_a_follow_up_counts_what_it_excluded_and_only_what_it_ran_as_tried(tmp_path):
    """A further search skips the problems in a known bug's region unrun: they are
    counted apart (what the triage says of a search cut short), and the coverage
    tally counts only the examples run, with their features."""
    from conv_harness.problem import ConvProblem
    from conv_harness.triage.catalog import Bug
    from conv_harness.triage.explain import Condition

    p = ConvProblem(op="conv2d", batch=2, in_channels=1, out_channels=1, input_size=(3, 3),
                    kernel_size=(1, 1), stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                    groups=1, bias=True, dtype="float64")
    batches = Bug(check="forward", failure="forward", function="conv2d", op="conv2d",
                  params=p.params(), layouts={}, trigger="batch >= 2",
                  conditions=[Condition("batch", ">=", 2, None)], explanation=[],
                  case_file=None)
    target = _target("conv_impl.einsum", "conv2d", tmp_path)
    state = TestState()
    tally = state.tally
    with _profile(max_examples=30, derandomize=True):
        assert search.follow_up(state, target, "forward", [batches]) == ([], None)
        ran, excluded = state.searched
        assert search._cut_short(ran, excluded) == ""  # it ran what its setting asks
        assert search._cut_short(29, 3350) == (
            ", but ran only 29 of its 30 examples (3350 of its 3379 draws lay in the "
            "regions of the bugs above): other bugs may remain")
    assert ran == state.budget.examples == tally.features["examples"] == 30
    assert excluded > 0
    assert tally.features["batch 1"] == ran  # every example run outside the region
    # a region that holds every problem: Hypothesis gives the search up, which says why
    every = dataclasses.replace(batches, conditions=[Condition("batch", ">=", 1, None)])
    state = TestState()
    tally = state.tally
    with _profile(max_examples=30, derandomize=True):
        found, ended = search.follow_up(state, target, "forward", [every])
    excluded = state.search.excluded
    assert found == [] and ended == (f"no draw could be run: {excluded} of them lay in "
                                     "the regions of the bugs above")
    assert excluded > 0 and tally.features["examples"] == 0


def test_a_further_search_that_found_nothing_says_what_it_did_not_run(monkeypatch, tmp_path):
    """The triage's stop line: a further search cut short by its exclusions, or by
    --conv-budget running out during it, says that other bugs may remain."""
    target = _target("conv_impl.einsum", "conv2d", tmp_path)

    def cut_short(state, *args, **kwargs):
        state.budget.examples += 29
        state.searched = (29, 3350)
        return [], None

    def out_of_time(state, *args, **kwargs):
        state.budget.examples += 1
        return [], None

    for follow_up, budget, tail in (
            (cut_short, None, ", but ran only 29 of its 100 examples (3350 of its 3379 draws "
                              "lay in the regions of the bugs above): other bugs may remain"),
            (out_of_time, 1e-9, " before --conv-budget ran out: other bugs may remain")):
        monkeypatch.setattr(search, "follow_up", follow_up)
        state = TestState(budget=Budget.starting_now(budget))
        with _profile(max_examples=100):
            assert search.triage(state, target, "forward", [], max_bugs=3) == (
                [], "a further search, with the bugs above not counted, found nothing else"
                + tail)
