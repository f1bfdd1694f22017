"""conv_impl.winograd's F(4,3) without its CAPABILITIES["algorithm"]: the harness then
bounds it as a direct sum, which F(4,3)'s rounding growth can exceed
(tests/harness/test_algorithms.py pins a case)."""

from __future__ import annotations

from types import SimpleNamespace

from conv_impl import winograd

winograd_f43 = SimpleNamespace(**{name: getattr(winograd, name) for name in winograd.__all__})
