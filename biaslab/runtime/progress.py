"""Progress bars for long loops ("silent for minutes"): one place that decides whether
and how a tqdm bar is drawn, always on stderr (stdout and every output file stay unchanged).

``progress`` argument of :func:`bar` (and of the library functions that pass it through):

* ``True``: show the bar; ``False``: never.
* ``None`` (auto, tqdm's ``disable=None`` idea): on a terminal, an ordinary bar; when stderr is
  not a terminal (a DVC or CI log file), a *log* bar that only appears for a loop running longer
  than :data:`LOG_DELAY` seconds and then writes one plain line at most every
  :data:`LOG_INTERVAL` seconds, so a log gets a few lines per stage, never thousands.
* The environment variable ``BIASLAB_PROGRESS`` overrides auto: ``0`` = never, ``1`` = always.

Log bars (stderr not a terminal, whatever ``progress`` is) write each refresh as its own line
(tqdm's ``\\r`` rewrites are turned into newlines) and keep their last state (``leave=True``).
"""
from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import Any

from tqdm import tqdm

#: environment variable overriding ``progress=None`` (``0`` off, ``1`` on)
ENV = "BIASLAB_PROGRESS"
#: seconds a loop must run before an auto bar appears in a log (non-terminal stderr)
LOG_DELAY = 10.0
#: seconds between two lines of a bar in a log
LOG_INTERVAL = 30.0


def stderr_is_tty() -> bool:
    """True when ``sys.stderr`` (looked up now) is an interactive terminal."""
    try:
        return bool(sys.stderr.isatty())
    except (AttributeError, ValueError):   # closed or replaced by an object without isatty
        return False


def resolve(progress: bool | None) -> bool:
    """Whether a bar is shown: ``progress`` itself when it is a bool; for ``None`` the
    :data:`ENV` override (``0``/``1``; other values are ignored) and otherwise True (auto bars
    are drawn; in a log they are throttled by :func:`bar`)."""
    if progress is not None:
        return bool(progress)
    env = os.environ.get(ENV, "").strip()
    if env in ("0", "1"):
        return env == "1"
    return True


class _Lines:
    """File-like wrapper for a non-terminal stream: each tqdm refresh (``"\\r" + status``)
    becomes one newline-terminated line; blank clears are dropped."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, s: str) -> None:
        text = s.replace("\r", "").rstrip()
        if text:
            self.stream.write(text + "\n")

    def flush(self) -> None:
        getattr(self.stream, "flush", lambda: None)()


def bar(iterable: Iterable | None = None, *, desc: str | None = None, total: int | None = None,
        unit: str = "it", progress: bool | None = None, leave: bool = False,
        **kwargs: Any) -> tqdm:
    """A tqdm bar on stderr following the module's rules (see the module docstring).

    Args:
        iterable: what to wrap (or None and call ``update``).
        desc, total, unit: as tqdm.
        progress: True / False / None (auto; module docstring).
        leave: keep the finished bar on a terminal (in a log the last line always stays).
        **kwargs: more tqdm arguments (``mininterval``, ``delay``, ... override the log
            defaults).

    Returns:
        a ``tqdm`` (disabled when not shown: iterating it and ``update``/``set_postfix`` work
        and print nothing).
    """
    show = resolve(progress)
    stream = sys.stderr
    opts: dict[str, Any] = {"desc": desc, "total": total, "unit": unit, "disable": not show,
                            "leave": leave, "file": stream, "dynamic_ncols": True}
    if show and not stderr_is_tty():
        opts.update(file=_Lines(stream), leave=True, dynamic_ncols=False, ncols=100,
                    mininterval=LOG_INTERVAL, maxinterval=max(LOG_INTERVAL, 60.0))
        if progress is None:
            opts["delay"] = LOG_DELAY
    opts.update(kwargs)
    return tqdm(iterable, **opts)
