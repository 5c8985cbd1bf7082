"""The engine's user errors (``KBGraphError``: the message tells the user what to change) and the
"did you mean" hint its messages give for a misspelled name."""

from __future__ import annotations

import difflib
from collections.abc import Sequence


class KBGraphError(RuntimeError):
    """An operation cannot be done as asked; the message tells the user what to change."""


def did_you_mean(name: str, known: Sequence[str]) -> str:
    """' (did you mean 'X' or 'Y'?)' for the known names closest to a misspelled one, else ''."""
    by_fold = {k.casefold(): k for k in known}
    close = difflib.get_close_matches(name.casefold(), list(by_fold), n=3, cutoff=0.6)
    if not close:
        return ""
    return " (did you mean " + " or ".join(repr(by_fold[c]) for c in close) + "?)"
