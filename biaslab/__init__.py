"""biaslab: measurement and mitigation of societal (gender) bias in image captioning and
multi-label classification.

The library holds all logic; the DVC stages in ``stages/`` are thin wrappers around it.
Papers implemented (texts in ``../shared/papers``):

* Hirota et al., "Resampled Datasets Are Not Enough" (EMNLP 2024)      -> paper 000
* Smith et al., "Balancing the Picture" (GenSynth)                     -> paper 001
* Hirota, PhD thesis "Evaluating and Mitigating Societal Bias ..."    -> paper 002 (thesis)
* Hirota et al., "Model-Agnostic Gender Debiased Image Captioning"     -> paper 003 (LIBRA)
* Wang et al., "REVISE" (IJCV 2022)                                    -> paper 004
"""

__version__ = "0.1.0"

# Portable numerics: pin the CPU float paths before NumPy / torch load, so a result
# has the same bits on any x86-64 machine. The project's .venv already did this at start-up
# (biaslab_numerics.pth, scripts/setup.sh); this covers any other installation.
from biaslab.runtime import numerics as _numerics  # noqa: E402

_numerics.pin()

# No connection to the Hugging Face Hub unless the user allows it (BIASLAB_ALLOW_DOWNLOADS=1):
# every default is offline, and a missing checkpoint must fail at once, not after retries.
from biaslab.runtime import hub as _hub  # noqa: E402

_hub.pin_offline()

# One run at a time in a workspace: a second `dvc exp run` / `dvc repro` beside a
# running one is refused here, at interpreter start-up, before DVC writes anything.
from biaslab.runtime import guard as _guard  # noqa: E402

_guard.check_command()

# The modules this process imports, for the check that every stage lists them as deps (only
# with BIASLAB_IMPORT_LOG set: the end-to-end test).
import os as _os  # noqa: E402

if _os.environ.get("BIASLAB_IMPORT_LOG"):
    from biaslab.runtime.stagedeps import log_imports as _log_imports

    _log_imports()
