"""LIBRA: model-agnostic gender-debiased image captioning (Hirota et al., CVPR 2023 = paper 003;
thesis ch. 3 = paper 002).

Modules (imported lazily, ``biaslab.libra.bcs`` etc.):

* ``t5``  -- T5 masked-word fine-tuning (supp. 1.2, Eq. 1) and batched sentinel filling (Eq. 5).
* ``bcs`` -- Biased Caption Synthesis: F_GW, f_g, F_PG, swap (Eqs. 1-4), T5 edits with the
  synonym and authenticity filters (Eq. 5, supp. 1.3), F_GF (Eqs. 6-7), Merged (Eq. 8) and the
  Table 1 mixes.
* ``dcg`` -- Debiasing Caption Generator (sec. 4, Eq. 9): ViLT encoder + GPT-2 decoder
  (``EncoderDecoderModel``), training, ``debias`` inference, save/load, image-file lookup.

Command line (``biaslab.cli``, which imports this package; this package does not import the
CLI)::

    biaslab libra debias --pred results.json --images DIR --model data/libra/dcg \
        --out debiased.json [--beams N] [--eta E] [--seed S] [--cache DIR]

reads a COCO results file (``[{"image_id", "caption"}]``), finds each image (COCO-layout dir or
a folder of images named by id), debiases every caption with a trained DCG and writes a COCO
results file. Exit code 2 with a message naming the file for bad input.
"""
from __future__ import annotations

import importlib


__all__ = ["bcs", "dcg", "t5", "debias_results"]


def __getattr__(name: str):
    if name in ("bcs", "dcg", "t5"):
        return importlib.import_module(f"biaslab.libra.{name}")
    raise AttributeError(f"module 'biaslab.libra' has no attribute {name!r}")


def debias_results(predictions: dict[int, str], images: str, model, num_beams: int | None = None,
                   eta: float | None = None, seed: int = 0, batch_size: int = 64,
                   cache_dir: str | None = None, num_threads: int | None = None) -> dict[int, str]:
    """Debias a captioner's output with a trained DCG (paper 003 sec. 4, "Inference").

    Args:
        predictions: {image_id: caption} (``biaslab.metrics.files.read_predictions``).
        images: a COCO-layout directory or a folder of images named by id
            (``dcg.image_files``).
        model: a ``dcg.DCG`` or the directory of a saved one.
        num_beams, eta, seed, batch_size: see ``dcg.debias``.
        cache_dir: feature cache (``biaslab.models.features.encode_cached``) for ``features`` DCGs.

    Returns:
        {image_id: debiased caption}, same ids.

    Raises:
        InputError: model directory or image files missing.
    """
    import pandas as pd

    from biaslab.libra import dcg as D
    if not isinstance(model, D.DCG):
        model = D.load(model, num_threads=num_threads)    # InputError naming file and problem
    ids = sorted(predictions)
    files = D.image_files(images, ids)
    if model.settings.image_input == D.FEATURES:
        table = pd.DataFrame({"image_id": ids, "path": [str(files[i]) for i in ids]})
        imgs = D.image_features(ids, model.settings, None, table, cache_dir, num_threads)
    else:
        imgs = [str(files[i]) for i in ids]
    out = D.debias(model, [predictions[i] for i in ids], imgs, num_beams=num_beams, eta=eta,
                   seed=seed, batch_size=batch_size, progress=None)   # stderr, auto
    return dict(zip(ids, out))
