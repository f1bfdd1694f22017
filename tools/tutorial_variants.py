"""Variants of the known-buggy tutorial for seeding the regression corpus.

`conv_impl.tutorial` itself only ever shrinks to its smallest bug (the
backward padding one); this variant keeps only the stride bug but, like the
tutorial, declares square problems only, so that its shrunk case also runs
against the tutorial (whose CAPABILITIES would exclude a non-square case).
Used by tools/seed_regressions.py as ``--impl tools/tutorial_variants.py:stride_bug_square``.
"""

from conv_impl.tutorial import tutorial_impl

stride_bug_square = tutorial_impl({"stride_zeros"}, square=True)
