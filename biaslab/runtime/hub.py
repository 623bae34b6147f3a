"""Where Hugging Face checkpoints may come from: the local cache and directories only, unless
the user says otherwise.

Every default runs offline (its weights are in the repository or the local cache). A process
of the project therefore starts with ``HF_HUB_OFFLINE=1`` (:func:`pin_offline`, run at
start-up by :mod:`biaslab.runtime.startup`), so no ``from_pretrained`` anywhere attempts a
connection: a missing checkpoint fails at once instead of after retries.
``BIASLAB_ALLOW_DOWNLOADS=1`` (the paper tier's first run on a machine with network) lifts it,
and an ``HF_HUB_OFFLINE`` the user set is kept. A name read from a file someone else may have written (a saved DCG's ``dcg.json``)
is loaded from the local cache only, even then (:func:`local_files_only` with
``untrusted=True``).
"""
from __future__ import annotations

import os

#: the user's explicit consent to downloads from the Hugging Face Hub
ALLOW = "BIASLAB_ALLOW_DOWNLOADS"


def downloads_allowed() -> bool:
    """True when ``BIASLAB_ALLOW_DOWNLOADS`` is ``1`` / ``true`` / ``yes``."""
    return os.environ.get(ALLOW, "").strip().lower() in ("1", "true", "yes")


def local_files_only(untrusted: bool = False) -> bool:
    """The ``local_files_only`` of a ``from_pretrained`` call: True unless downloads are
    allowed and the name comes from the user's own params (``untrusted=False``)."""
    return untrusted or not downloads_allowed()


def pin_offline() -> None:
    """Set ``HF_HUB_OFFLINE=1`` for this process and its children unless downloads are
    allowed or the user set it. Before ``huggingface_hub`` is imported (it reads the variable
    once), which :mod:`biaslab.runtime.startup` at interpreter start-up guarantees."""
    if not downloads_allowed():
        os.environ.setdefault("HF_HUB_OFFLINE", "1")


def in_local_cache(name: str) -> bool:
    """True when ``name`` is a local directory or a Hub id whose ``config.json`` is in the
    local Hugging Face cache (nothing is downloaded)."""
    if os.path.isdir(name):
        return True
    try:
        from huggingface_hub import try_to_load_from_cache
        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:   # not a valid repo id, no cache: not available offline
        return False
