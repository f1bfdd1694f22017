"""Given problems instead of drawn ones: ``--conv-problem DESC`` (issue 22).

Given problems (`conv_problems`'s ``given``), `conv_problems` draws only those: every
check runs on exactly those problems and draws only their values, memory
layouts and whatever the check itself adds. A problem is used as given, with
two exceptions a check's own needs force:

- its dtype, if the implementation (or a check that fixes the dtype, such as
  the float64-only ones) does not take it: the first dtype it takes, where
  the problem's features are accepted (float16 only where its tolerance
  means something, see `problems.FLOAT16_MAX_TERMS`);
- a check that draws a kind of problem (1x1 kernels only; two images or
  more) uses the given problems of that kind; with none, it is skipped.

A problem the capabilities refuse in every dtype is not run (the summary's
"not generated" line says which features it refuses).
"""

from __future__ import annotations

import dataclasses
import unittest
from collections.abc import Callable, Iterable
from types import SimpleNamespace

from hypothesis import strategies as st

from conv_harness.problem import ConvProblem
from conv_harness.running.capabilities import Capabilities


def given_problems(problems: Iterable[ConvProblem]) -> tuple[ConvProblem, ...]:
    """``problems`` as `conv_problems`'s ``given`` takes them: each once, in order."""
    return tuple(dict.fromkeys(problems))


def ops_of(given: tuple[ConvProblem, ...] | None) -> frozenset[str] | None:
    """The operations of the given problems; None when none are given."""
    return None if given is None else frozenset(p.op for p in given)


def _fitted(problem: ConvProblem, caps: Capabilities, max_terms: int,
            float16_max_terms: int) -> ConvProblem | None:
    """``problem`` in a dtype ``caps`` accept with all its features, or None."""
    order = [problem.dtype] + [d for d in caps.dtypes if d != problem.dtype]
    for dtype in order:
        if dtype not in caps.dtypes or (dtype == "float16" and max_terms > float16_max_terms):
            continue
        candidate = dataclasses.replace(problem, dtype=dtype)
        if not caps.excludes(SimpleNamespace(problem=candidate, layouts={})):
            return candidate
    return None


def problems(given: tuple[ConvProblem, ...], op: str, caps: Capabilities, one_by_one: bool,
             where: Callable[[ConvProblem], bool] | None,
             max_terms: Callable[[ConvProblem], int],
             float16_max_terms: int) -> st.SearchStrategy[ConvProblem]:
    """The ``given`` problems of ``op`` that fit (see the module's docstring), drawn
    in the order given; a check that none fits is skipped."""
    fitting = []
    for problem in given:
        if problem.op != op or (one_by_one and set(problem.kernel_size) != {1}):
            continue
        fitted = _fitted(problem, caps, max_terms(problem), float16_max_terms)
        if fitted is not None and (where is None or where(fitted)):
            fitting.append(fitted)
    if fitting:
        return st.sampled_from(fitting)
    return st.just(op).map(_skip)


def _skip(op: str) -> ConvProblem:
    """Skips the test that draws it: Hypothesis re-raises a skip at once."""
    raise unittest.SkipTest(f"no --conv-problem of {op} fits this check")
