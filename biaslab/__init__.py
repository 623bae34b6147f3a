"""biaslab: measurement and mitigation of societal (gender) bias in image captioning and
multi-label classification.

The library holds all logic; the DVC stages in ``stages/`` are thin wrappers around it.
Papers implemented (texts in ``../shared/papers``):

* Hirota et al., "Resampled Datasets Are Not Enough" (EMNLP 2024)      -> paper 000
* Smith et al., "Balancing the Picture" (GenSynth)                     -> paper 001
* Hirota, PhD thesis "Evaluating and Mitigating Societal Bias ..."    -> paper 002 (thesis)
* Hirota et al., "Model-Agnostic Gender Debiased Image Captioning"     -> paper 003 (LIBRA)
* Wang et al., "REVISE" (IJCV 2022)                                    -> paper 004

Importing it changes nothing in the process: the numeric pins, the Hugging Face Hub's offline
mode and the one-run-per-workspace guard run at the entry points
(:mod:`biaslab.runtime.startup`: the project venv's start-up hook and the ``biaslab`` console
script).
"""

__version__ = "0.1.0"
