"""Correct, but noisy: slow to import, and prints and warns at import and on every call."""
import sys
import time
import warnings

from conv_impl.einsum import conv2d as _conv2d

print("NOISY-IMPORT-STDOUT")
print("NOISY-IMPORT-STDERR", file=sys.stderr)
warnings.warn("NOISY-IMPORT-WARNING")
time.sleep(2)  # "takes minutes to import", in miniature; not counted against --conv-timeout


def conv2d(x, weight, bias, **kwargs):
    print("NOISY-CALL-STDOUT")
    print("NOISY-CALL-STDERR", file=sys.stderr)
    warnings.warn("NOISY-CALL-WARNING", DeprecationWarning)
    return _conv2d(x, weight, bias, **kwargs)
