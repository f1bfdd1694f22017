"""Never returns from a "C call" for any stride other than 1.

Stands for a C extension stuck in a loop: the time limit's signal (SIGALRM)
is blocked, so only a process that can be killed (--isolate) gets out of it.
Never run it without --isolate.
"""
import signal
import time

from conv_impl.einsum import conv2d as _conv2d


def conv2d(x, weight, bias, *, stride, padding, dilation, groups):
    if any(s != 1 for s in stride):
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM})
        while True:
            time.sleep(60)
    return _conv2d(x, weight, bias, stride=stride, padding=padding, dilation=dilation,
                   groups=groups)
