"""Write examples/README.md's "Found in the wild" table from the findings' scripts.

One row per finding: the library and version it was found in, what is wrong,
the minimal case, and the command that reproduces it, a script under
examples/found_in_the_wild/ that needs NumPy and the library only. The rows
are `FINDINGS` below; the table is written between the markers

    <!-- found-in-the-wild:begin -->
    <!-- found-in-the-wild:end -->

(the only part of examples/README.md this tool writes).
tests/harness/test_found_in_the_wild.py checks that the table is current, that
every script is listed, and, where the library is installed, that each script
still shows its bug (exit status 1, or the signal that kills it).

    python tools/found_in_the_wild.py [--print]
    python tools/found_in_the_wild.py --verify   # run every script whose library is here
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

try:
    from tools.markers import between
except ImportError:  # run as a script: tools/ is on the path
    from markers import between

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "examples" / "README.md"
SCRIPTS = ROOT / "examples" / "found_in_the_wild"
BEGIN, END = "<!-- found-in-the-wild:begin -->", "<!-- found-in-the-wild:end -->"


@dataclass(frozen=True)
class Finding:
    """One bug in a real library, and how its script shows it."""

    library: str  # as the table names it, with the version it was found in
    module: str  # what must be importable to run the script
    dist: str  # the distribution whose installed version --verify reports
    what: str
    minimal: str
    script: str  # file name under examples/found_in_the_wild/
    verified: str  # how it was last seen reproducing
    shows: str = "exit 1"  # what the script does while the bug is there: exit 1, SIGABRT, ...
    #: the library picks its kernels by the CPU's instruction set, so a script that runs
    #: cleanly (exit 0) on another CPU says the bug does not show there, not that it is fixed
    cpu_dependent: bool = False

    @property
    def path(self) -> Path:
        return SCRIPTS / self.script

    def row(self) -> str:
        command = f"`python examples/found_in_the_wild/{self.script}`"
        return (f"| {self.library} | {self.what} | {self.minimal} | {command}: {self.shows} "
                f"| {self.verified} |")


TEST_FRAMEWORKS = ("script not run here (library not installed); the case is pinned in "
                   "tests/harness/test_frameworks.py")
HERE = "its script, run here with {}"

FINDINGS = [
    Finding("JAX, jaxlib 0.10.2", "jax", "jaxlib",
            "conv2d's (and conv3d's) input gradient aborts the process: XLA's \"Window "
            "dimensions do not match RHS shape\"",
            "input 4x1, kernel 2x2, stride 2x2, padding 1x1, 1 channel",
            "jax_conv2d_backward_aborts.py", TEST_FRAMEWORKS, "SIGABRT"),
    Finding("TensorFlow 2.21 (oneDNN)", "tensorflow", "tensorflow-cpu",
            "float32 Conv2D returns [2, 0, 2, 0] where every output is 2",
            "batch 2, input 2x3 of ones, kernel 1x2 of ones, stride 1x2",
            "tensorflow_onednn_conv2d_forward.py", TEST_FRAMEWORKS),
    Finding("TensorFlow 2.21 (oneDNN)", "tensorflow", "tensorflow-cpu",
            "float32 Conv3D drops an output: [0, 0, 0] for [0, 1, 0]",
            "input 1x1x1, padding 0x1x1, kernel 1x1x2, stride 1x1x2",
            "tensorflow_onednn_conv3d_drops_output.py", TEST_FRAMEWORKS),
    Finding("TensorFlow 2.21", "tensorflow", "tensorflow-cpu",
            "float32 Conv2DBackpropFilter corrupts the heap (glibc abort or segfault within "
            "a few calls)",
            "input 64x15, kernel 1x1, stride 4x3 (stride 1 is fine)",
            "tensorflow_conv2d_weight_gradient_heap.py", TEST_FRAMEWORKS, "SIGABRT or SIGSEGV"),
    Finding("tinygrad 0.14.0", "tinygrad", "tinygrad",
            "conv2d's backward raises \"bad reshape\" on a valid problem",
            "input 1x1, kernel 1x2, stride 3x1, padding 2x1",
            "tinygrad_conv2d_bad_reshape.py", TEST_FRAMEWORKS),
    Finding("tinygrad 0.14.0", "tinygrad", "tinygrad",
            "conv2d's input gradient is right alone, wrong after an earlier call with the "
            "same shapes",
            "input 1x2, kernel 2x2, padding 2x1, dilation 1x3; the same call twice",
            "tinygrad_conv2d_backward_history.py", TEST_FRAMEWORKS),
    Finding("MLX 0.32.4", "mlx", "mlx",
            "conv_transpose returns the wrong shape, or raises, when padding > "
            "dilation * (kernel - 1)",
            "1-d, input 4, kernel 3, stride 2, padding 3 (length 1 for 3); input 2, kernel 1, "
            "stride 3, padding 1 (ValueError)",
            "mlx_conv_transpose_padding.py", HERE.format("mlx 0.32.4: exit 1")),
    Finding("MLX 0.32.4", "mlx", "mlx",
            "the vjp of conv_transpose with output_padding returns an input cotangent one "
            "element short",
            "1-d, input 2, kernel 1, stride 2, output_padding 1 (cotangent of length 1)",
            "mlx_conv_transpose_vjp_output_padding.py", HERE.format("mlx 0.32.4: exit 1")),
    Finding("OpenVINO 2026.4.1 (CPU)", "openvino", "openvino",
            "a float64 Convolution (every kind: 1-d to 3-d, transposed, grouped) is computed "
            "in float32 and returned as float64",
            "1-d, one element: 1/3 * 1/3 off by 8e-9",
            "openvino_float64_convolution_in_float32.py",
            HERE.format("openvino 2026.4.1: exit 1")),
    Finding("PyTorch 2.13.0 (CPU)", "torch", "torch",
            "a float64 grouped conv2d's weight gradient is wrong when the input is "
            "Fortran-ordered and the weight a channel slice of a channels-last buffer "
            "(either layout alone, or float32, is right)",
            "2 groups, 4 -> 2 channels, input 1x2, kernel 1x1: [-2, -2, 13.5, 16] for "
            "[-1, -1, 13, 18]",
            "torch_float64_grouped_grad_weight_layouts.py",
            HERE.format("torch 2.13.0+cpu: exit 1; the harness's case is pinned in "
                        "tests/harness/test_native.py"), cpu_dependent=True),
]

#: findings reported elsewhere (issue 24) that this machine could not confirm: library,
#: the claim, what was tried here
NOT_REPRODUCED = [
    ("OpenVINO 2026.4.1", "3-d Convolution drops whole outputs with one inference thread "
     "under its default bf16 precision",
     "this CPU has no native bf16: the default inference precision is f32, and a 3-d "
     "Convolution compiled with `INFERENCE_PRECISION_HINT: bf16` and one thread still "
     "reports f32 and matches torch"),
    ("OpenVINO 2026.4.1", "its default inference precision is bf16 on CPUs with native bf16, "
     "even for float16 models", "needs a CPU with native bf16; this one reports f32"),
    ("OpenVINO 2026.4.1", "float64 Convolution segfaults",
     "no crash in 1,979 examples of forward and delta_kernel over the six operations under "
     "`--isolate` (examples/openvino_conv.py), nor by hand on small 1-d to 3-d problems; "
     "float64 is computed in float32 instead (above)"),
    ("OpenVINO 2026.4.1", "ConvTranspose ignores pads_begin with dilation 3 and "
     "output_padding 2", "the same run: float32 and float16 transposed forwards passed; six "
     "1-d cases with dilation 3 and output_padding 2 by hand matched torch"),
]


def table() -> str:
    head = ("| library | what is wrong | minimal case | reproduce: what it does while the bug "
            "is there | seen |\n|---|---|---|---|---|")
    rows = "\n".join(f.row() for f in FINDINGS)
    not_here = "\n".join(f"| {library} | {claim} | {tried} |"
                         for library, claim, tried in NOT_REPRODUCED)
    return (f"{head}\n{rows}\n\nReported, but not reproduced on this project's machine:\n\n"
            f"| library | claim | what was tried here |\n|---|---|---|\n{not_here}")


def outcome(result: subprocess.CompletedProcess) -> str:
    """What a script run did, in the words of `Finding.shows`."""
    if result.returncode < 0:
        return signal.Signals(-result.returncode).name
    return f"exit {result.returncode}"


def run(finding: Finding, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(finding.path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)


def verify() -> int:
    """Run every script whose library is installed; say whether it still shows its bug."""
    stale = 0
    for finding in FINDINGS:
        if importlib.util.find_spec(finding.module) is None:
            print(f"{finding.script}: {finding.module} not installed, not run")
            continue
        got = outcome(run(finding))
        version = importlib.metadata.version(finding.dist)
        still = got in finding.shows.split(" or ")
        elsewhere = not still and got == "exit 0" and finding.cpu_dependent
        stale += not still and not elsewhere
        said = ("reproduces" if still else "does not show on this CPU" if elsewhere
                else "does NOT reproduce: expected " + finding.shows)
        print(f"{finding.script}: {finding.dist} {version}: {got} ({said})")
    return 1 if stale else 0


def main(argv: list[str]) -> int:
    if "--verify" in argv:
        return verify()
    block = table()
    text = README.read_text(encoding="utf-8")
    new = None if "--print" in argv else between(text, BEGIN, END, block)
    if new is None:
        print(block)
        return 0
    README.write_text(new, encoding="utf-8")
    print(f"examples/README.md: found-in-the-wild table regenerated ({len(FINDINGS)} findings)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
