"""The trilinear form of a convolution in NumPy float64: closed-form results and
the sums of |terms| the rounding bounds need, without torch.

conv_harness/checks/properties.py states the algebra (``Phi(lo, w, hi)``); the
property checks and conv_harness/checks/diagnosis.py both build on these pure
functions, so neither needs the other.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np

from conv_harness.problem import ConvCase, ConvProblem


def as_float64(a: np.ndarray | None) -> np.ndarray | None:
    return None if a is None else np.asarray(a, dtype=np.float64)


@dataclasses.dataclass(frozen=True)
class Bilinear:
    """Gathers and scatters of one problem's geometry (see the module doc)."""

    problem: ConvProblem

    @property
    def transposed(self) -> bool:
        return self.problem.spec.transposed

    @property
    def lo_size(self) -> tuple[int, ...]:
        p = self.problem
        return p.input_size if self.transposed else p.output_size

    @property
    def hi_size(self) -> tuple[int, ...]:
        p = self.problem
        return p.output_size if self.transposed else p.input_size

    def offsets(self) -> list[tuple[int, ...]]:
        return list(itertools.product(*(range(k) for k in self.problem.kernel_size)))

    def _slices(self, q: tuple[int, ...]) -> tuple[tuple[slice, ...], tuple[slice, ...]]:
        """Per axis: the lo positions j whose hi position t = j*s + q*d - p is in
        range (a run of consecutive j), and those t (every s-th position)."""
        p = self.problem
        los, his = [slice(None)] * 2, [slice(None)] * 2
        for m, n, qa, s, d, pad in zip(self.lo_size, self.hi_size, q, p.stride, p.dilation,
                                       p.padding):
            shift = qa * d - pad
            first = max(0, -(shift // s))  # smallest j with t >= 0
            last = min(m - 1, (n - 1 - shift) // s) if n - 1 - shift >= 0 else -1
            if last < first:
                return (), ()
            los.append(slice(first, last + 1))
            his.append(slice(first * s + shift, last * s + shift + 1, s))
        return tuple(los), tuple(his)

    def gather(self, hi: np.ndarray, q: tuple[int, ...]) -> np.ndarray:
        """hi (N, C, *hi_size) read at offset q: (N, C, *lo_size), zero where padding."""
        los, his = self._slices(q)
        out = np.zeros(hi.shape[:2] + self.lo_size)
        if los:
            out[los] = hi[his]
        return out

    def scatter(self, lo: np.ndarray, q: tuple[int, ...]) -> np.ndarray:
        """The adjoint of `gather`: lo (N, C, *lo_size) -> (N, C, *hi_size)."""
        los, his = self._slices(q)
        out = np.zeros(lo.shape[:2] + self.hi_size)
        if los:
            out[his] = lo[los]
        return out

    def _groups(self, a: np.ndarray) -> np.ndarray:
        g = self.problem.groups
        return a.reshape(a.shape[0], g, a.shape[1] // g, -1)

    def mix(self, w_q: np.ndarray, hi_q: np.ndarray) -> np.ndarray:
        """sum_b w_q[a, b] hi_q[n, b, j] within each group: (N, A, *lo)."""
        g = self.problem.groups
        w3 = w_q.reshape(g, w_q.shape[0] // g, w_q.shape[1])
        out = np.einsum("gab,ngbj->ngaj", w3, self._groups(hi_q))
        return out.reshape((hi_q.shape[0], w_q.shape[0]) + hi_q.shape[2:])

    def mix_t(self, w_q: np.ndarray, lo: np.ndarray) -> np.ndarray:
        """sum_a w_q[a, b] lo[n, a, j] within each group: (N, B, *lo)."""
        g = self.problem.groups
        w3 = w_q.reshape(g, w_q.shape[0] // g, w_q.shape[1])
        out = np.einsum("gab,ngaj->ngbj", w3, self._groups(lo))
        return out.reshape((lo.shape[0], g * w_q.shape[1]) + lo.shape[2:])

    def _used(self, w: np.ndarray) -> list[tuple[int, ...]]:
        """The kernel offsets where w is not all zero (one for a delta kernel)."""
        return [q for q in self.offsets() if np.any(w[(Ellipsis, *q)])] or [self.offsets()[0]]

    def lo_from_hi(self, hi: np.ndarray, w: np.ndarray) -> np.ndarray:
        return sum(self.mix(w[(Ellipsis, *q)], self.gather(hi, q)) for q in self._used(w))

    def hi_from_lo(self, lo: np.ndarray, w: np.ndarray) -> np.ndarray:
        return sum(self.scatter(self.mix_t(w[(Ellipsis, *q)], lo), q) for q in self._used(w))

    def weight_from(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        p = self.problem
        a_total, g = lo.shape[1], p.groups
        out = np.zeros((a_total, hi.shape[1] // g) + p.kernel_size)
        lo_g = self._groups(lo)
        for q in self.offsets():
            part = np.einsum("ngaj,ngbj->gab", lo_g, self._groups(self.gather(hi, q)))
            out[(Ellipsis, *q)] = part.reshape(a_total, -1)
        return out

    def results(self, x: np.ndarray, w: np.ndarray, b: np.ndarray | None,
                g: np.ndarray, forward_only: bool = False) -> dict[str, np.ndarray | None]:
        """Forward and gradients in float64, as shift-and-subsample sums."""
        axes = (0,) + tuple(range(2, g.ndim))
        gi = gw = None
        if self.transposed:
            y = self.hi_from_lo(x, w)
            if not forward_only:
                gi, gw = self.lo_from_hi(g, w), self.weight_from(x, g)
        else:
            y = self.lo_from_hi(x, w)
            if not forward_only:
                gi, gw = self.hi_from_lo(g, w), self.weight_from(g, x)
        if b is not None:
            y = y + b.reshape((1, -1) + (1,) * (y.ndim - 2))
        return {"y": y, "grad_input": gi, "grad_weight": gw,
                "grad_bias": None if b is None else g.sum(axis=axes)}


def closed_forms(case: ConvCase) -> dict[str, np.ndarray | None]:
    """The case's results by shift-and-subsample sums over its non-zero kernel offsets."""
    a = {k: as_float64(v) for k, v in case.arrays().items()}
    return Bilinear(case.problem).results(a["x"], a["weight"], a["bias"], a["grad_output"])


def magnitudes(case: ConvCase, forward_only: bool = False) -> dict[str, np.ndarray | None]:
    """Sums of |terms| per result element (what `conv_harness.checks.tolerance` needs), without torch."""
    a = {k: None if v is None else np.abs(as_float64(v)) for k, v in case.arrays().items()}
    return Bilinear(case.problem).results(a["x"], a["weight"], a["bias"], a["grad_output"],
                                          forward_only)
