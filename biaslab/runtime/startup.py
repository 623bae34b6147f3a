"""What a process of this project does before its first import of NumPy or torch.

:func:`start` runs, once per process:

* :func:`biaslab.runtime.numerics.pin`: the mode's numeric paths, before the libraries that
  read them at load;
* :func:`biaslab.runtime.hub.pin_offline`: no connection to the Hugging Face Hub unless
  the user allows downloads, so a missing checkpoint fails at once;
* :func:`biaslab.runtime.guard.check_command`: one run at a time in a workspace, refused
  before DVC writes anything;
* :func:`biaslab.runtime.stagedeps.log_imports`: only with ``BIASLAB_IMPORT_LOG`` set (the
  end-to-end test's record of what each stage imported).

Where it runs (the entry points; ``import biaslab`` itself changes nothing in the process):

* every Python of the project's ``.venv``, at interpreter start-up: ``scripts/setup.sh``
  writes the hook ``biaslab_numerics.pth`` into its site-packages, so ``dvc``, each stage,
  pytest, a user's script and a Ray worker of that venv start pinned and guarded;
* the ``biaslab`` console script and ``python -m biaslab`` (:mod:`biaslab.__main__`), for an
  installation without that hook;
* a user's own script in another installation calls :func:`start` before importing NumPy
  or torch (after them, the pin names the libraries it came too late for).
"""
from __future__ import annotations

import os

_started = False


def start() -> None:
    """Pin the numeric paths and the Hub's offline mode, run the workspace guard and, with
    ``BIASLAB_IMPORT_LOG``, record the imports (module docstring). Idempotent: a second call
    does nothing.

    Raises:
        ValueError: a bad ``BIASLAB_NUMERICS`` (:func:`biaslab.runtime.numerics.mode`).
    """
    global _started
    if _started:
        return
    _started = True
    from biaslab.runtime import guard, hub, numerics
    numerics.pin()
    hub.pin_offline()
    guard.check_command()
    if os.environ.get("BIASLAB_IMPORT_LOG"):
        from biaslab.runtime.stagedeps import log_imports
        log_imports()


__all__ = ["start"]
