"""Our options that take a path, as words of a command line: which values pytest
misreads, and the one-word form that it does not.

Pure functions on argument lists, importing nothing of pytest or the harness:
the console script (conv_harness/cli.py) builds its command with them before it
replaces its process by pytest, and pays no import of the plugin for it.
"""

from __future__ import annotations

from pathlib import Path

#: the harness's options whose value is a path (conv_harness/plugin.py declares them)
PATH_OPTIONS = ("--impl", "--conv-failures", "--replay", "--conv-problem")


def path_options_read_as_test_paths(args: list[str],
                                    invocation_dir: Path) -> list[tuple[str, str]]:
    """Our path options given as separate words (``--impl X``) whose value pytest
    took for a test path when it chose the rootdir and config file: (option, value).

    pytest chooses them before any plugin option is known, from the existing
    paths among the free words: ``X`` is one of them. It can change the choice
    wherever X lies but in the folder pytest runs in itself: the search for a
    config file then starts from X's folder (outside, or a subfolder with a
    config file of its own), not from the folder pytest runs in.
    """
    out = []
    for option, value in zip(args, args[1:]):
        if option in PATH_OPTIONS and not value.startswith("-"):
            path = Path(invocation_dir, value)
            if path.exists() and path.resolve().parent != Path(invocation_dir).resolve():
                out.append((option, value))
    return out


def joined_path_options(args: list[str]) -> list[str]:
    """``args`` with each path option and its value as one word (``--impl=X``)."""
    out: list[str] = []
    words = iter(args)
    for word in words:
        value = next(words, None) if word in PATH_OPTIONS else None
        out.append(word if value is None else f"{word}={value}")
    return out
