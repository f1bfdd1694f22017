"""Writing a generated part of a page between its two markers (the only part a tool writes)."""

from __future__ import annotations

import re


def between(text: str, begin: str, end: str, part: str) -> str | None:
    """``text`` with ``part`` between ``begin`` and ``end``, or None without the markers."""
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        return None
    return pattern.sub(lambda _: f"{begin}\n{part}\n{end}", text, count=1)
