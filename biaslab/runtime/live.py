"""DVCLive's ``Live`` with one race removed: stages that train seeds on two worker processes
(``biaslab.runtime.parallel.map_jobs``) each end a ``Live``, and ``dvclive.vscode.
cleanup_dvclive_step_completed`` checks that the VS Code signal file
``.dvc/tmp/exps/run/DVCLIVE_STEP_COMPLETED`` exists and then removes it: when both workers end
together, the second ``os.remove`` raised FileNotFoundError and failed the stage (seen once in
a fresh-clone ``dvc repro`` at ``train_classifier@oversample``). The file is only a signal to the
VS Code extension; a missing one is what the cleanup wants. Import ``Live`` from here."""
from __future__ import annotations

import dvclive.live as _live
from dvclive import Live
from dvclive.vscode import cleanup_dvclive_step_completed as _cleanup


def _tolerant_cleanup() -> None:
    """``cleanup_dvclive_step_completed`` that accepts a signal file another process removed."""
    try:
        _cleanup()
    except FileNotFoundError:
        pass


_live.cleanup_dvclive_step_completed = _tolerant_cleanup

__all__ = ["Live"]
