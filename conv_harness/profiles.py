"""The project's Hypothesis profiles, registered once for every way the suite runs.

Both the clone's root conftest.py and the installed suite's
conv_harness/conformance/conftest.py call `register_and_load`, so that
``--hypothesis-profile NAME`` and ``$HYPOTHESIS_PROFILE`` name the same
profiles whether the suite runs from a clone (``pytest``) or installed
(``conv-harness``).

  dev       default: a quick, thorough-enough search on every run
  ci        CI (loaded when $CI is set): derandomised, prints the reproduction blob
  thorough  thousands of examples per property, for a release or a new implementation
  harness-test  the harness's own tests: fixed seed, no example database
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

# No deadline: the time limit that matters is the harness's own per-call limit
# (--conv-timeout), and a deadline would flake on the first torch call of a worker.
# No explain phase: our own report says where the error is, and the phase
# traces every line of the shrunk example again (seconds per failure).
COMMON = dict(deadline=None,
              phases=[p for p in Phase if p is not Phase.explain],
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def register() -> None:
    # derandomize=False said outright: when Hypothesis detects a CI machine its own
    # defaults, which these profiles inherit, are derandomised, and dev or thorough
    # would then ignore --hypothesis-seed there.
    settings.register_profile("dev", max_examples=100, derandomize=False, **COMMON)
    settings.register_profile("ci", max_examples=100, derandomize=True, print_blob=True,
                              **COMMON)
    settings.register_profile("thorough", max_examples=3000, derandomize=False, **COMMON)
    # For the harness's own tests that run the suite in a subprocess: a fixed
    # seed and no example database, so that what they find is the same every time.
    settings.register_profile("harness-test", max_examples=100, derandomize=True,
                              database=None, **COMMON)


def default_name() -> str:
    """$HYPOTHESIS_PROFILE, else ``ci`` when $CI is set, else ``dev``."""
    return os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")


def register_and_load() -> None:
    """Register the profiles and load the default one (``--hypothesis-profile`` overrides it)."""
    register()
    settings.load_profile(default_name())


def without_local_constants() -> bool:
    """Stop Hypothesis drawing the literals of this process's own modules; whether it
    could (False where its internals have moved: the harness's tests then say so).

    Hypothesis draws, for about one integer in 20 and one float in 7, a literal
    from the source of the local modules imported so far (not site-packages, not
    tests: here conv_harness/, strategies/ and conv_impl/). Derandomised, what a search
    finds then depends on which modules the process has imported by then (the
    tests an xdist worker happened to run before) and on every literal of the
    harness's code: the same test shrank wav2vec_frames' bug to kernel 2, stride 2
    in a whole run and to kernel 3, stride 3, padding 1 alone, and an unrelated
    edit moved pinned outcomes. The harness's own tests pin what a seed finds, so
    their in-process searches (tests/harness/conftest.py calls this in every xdist
    worker) draw without those constants; Hypothesis's own global constants stay,
    fixed by its version. A pytest run a test starts imports the same modules every
    time, so its draws are fixed for a given tree, and keep the constants, as a
    user's run does. There is no public setting for this; the pool is replaced by an
    empty one.
    """
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - Hypothesis moved its internals
        return False
    if not callable(getattr(providers, "_get_local_constants", None)) \
            or not hasattr(providers, "Constants"):
        return False
    empty = providers.Constants()
    providers._get_local_constants = lambda: empty
    cache = getattr(providers, "CONSTANTS_CACHE", None)
    if cache is not None:
        cache.cache.clear()  # pools already built from the modules' constants
    return True
