"""LIBRA: model-agnostic gender-debiased image captioning (Hirota et al., CVPR 2023 = paper 003;
thesis ch. 3 = paper 002).

Modules (imported lazily, ``biaslab.libra.bcs`` etc.):

* ``t5``  -- T5 masked-word fine-tuning (supp. 1.2, Eq. 1) and batched sentinel filling (Eq. 5).
* ``bcs`` -- Biased Caption Synthesis: F_GW, f_g, F_PG, swap (Eqs. 1-4), T5 edits with the
  synonym and authenticity filters (Eq. 5, supp. 1.3), F_GF (Eqs. 6-7), Merged (Eq. 8) and the
  Table 1 mixes.
* ``dcg`` -- Debiasing Caption Generator (sec. 4, Eq. 9): ViLT encoder + GPT-2 decoder
  (``EncoderDecoderModel``), training, ``debias`` inference, save/load, image-file lookup.

Command line (registered with ``biaslab.cli.register_command`` when this package is imported;
``biaslab.cli.COMMAND_MODULES`` must list ``"biaslab.libra"`` for the console script)::

    biaslab libra debias --pred results.json --images DIR --model data/libra/dcg \
        --out debiased.json [--beams N] [--eta E] [--seed S] [--cache DIR]

reads a COCO results file (``[{"image_id", "caption"}]``), finds each image (COCO-layout dir or
a folder of images named by id), debiases every caption with a trained DCG and writes a COCO
results file. Exit code 2 with a message naming the file for bad input.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from biaslab.cli import register_command
from biaslab.io import InputError

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
        predictions: {image_id: caption} (``biaslab.cli.read_predictions``).
        images: a COCO-layout directory or a folder of images named by id
            (``dcg.image_files``).
        model: a ``dcg.DCG`` or the directory of a saved one.
        num_beams, eta, seed, batch_size: see ``dcg.debias``.
        cache_dir: feature cache (``biaslab.features.encode_cached``) for ``features`` DCGs.

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


def _positive_int(s: str) -> int:
    v = int(s)
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def _rate(s: str) -> float:
    v = float(s)
    if not 0.0 <= v < 1.0:
        raise argparse.ArgumentTypeError(f"must be in [0, 1), got {v}")
    return v


@register_command("libra", help="LIBRA (paper 003): debias any captioner's output with a "
                                "trained Debiasing Caption Generator.")
def _setup_libra(p: argparse.ArgumentParser):
    sub = p.add_subparsers(dest="libra_command", metavar="SUBCOMMAND", required=True)
    d = sub.add_parser("debias", help="debias a COCO results file with a trained DCG",
                       description="Mask 100*eta percent of the words of each caption and regenerate "
                                   "it from (masked caption, image) with a trained DCG "
                                   "(paper 003 sec. 4). Writes a COCO results file.")
    d.add_argument("--pred", required=True,
                   help="COCO results JSON: [{\"image_id\": int, \"caption\": str}, ...]")
    d.add_argument("--images", required=True,
                   help="COCO-layout directory (annotations/*.json + images/<split>/) or a "
                        "folder of images named by id (000000000139.jpg)")
    d.add_argument("--model", required=True, help="trained DCG directory (stage dcg_train: "
                                                  "data/libra/dcg)")
    d.add_argument("--out", required=True, help="output COCO results JSON")
    d.add_argument("--beams", type=_positive_int, default=None,
                   help="beam size (default: the model's, 1 = greedy)")
    d.add_argument("--eta", type=_rate, default=None,
                   help="fraction of input words masked (default: the model's eta, paper 0.2)")
    d.add_argument("--seed", type=int, default=0, help="masking seed")
    d.add_argument("--batch-size", type=_positive_int, default=64)
    d.add_argument("--threads", type=_positive_int, default=None, help="torch threads")
    d.add_argument("--cache", default=None,
                   help="image-feature cache directory (reused across runs)")
    d.set_defaults(_libra_handler=_run_debias)
    return lambda args: args._libra_handler(args)


def _run_debias(args: argparse.Namespace) -> int:
    from biaslab.cli import read_predictions
    from biaslab.io import write_json
    preds = read_predictions(args.pred)
    out = debias_results(preds, args.images, args.model, num_beams=args.beams, eta=args.eta,
                         seed=args.seed, batch_size=args.batch_size, cache_dir=args.cache,
                         num_threads=args.threads)
    write_json(args.out, [{"image_id": int(i), "caption": out[i]} for i in sorted(out)])
    from biaslab.libra.t5 import word_spans

    def words(t: str) -> list[str]:
        return [w.lower() for _, _, w in word_spans(t)]

    changed = sum(words(preds[i]) != words(out[i]) for i in out)
    print(f"biaslab libra debias: {len(out)} captions, {changed} changed -> {args.out}",
          file=sys.stderr)
    return 0
