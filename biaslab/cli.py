"""``biaslab`` command line: argparse with a registry of subcommands.

Subcommands register themselves with ``@register_command(name, help)`` on a function that gets
its ``argparse.ArgumentParser`` and returns the handler ``fn(args) -> int``. Every module that
adds commands (e.g. ``biaslab libra debias``) is listed in the static ``COMMAND_MODULES`` and
imported by ``build_parser``, so the console script sees every command whatever was imported
before (a test runs each README command through the installed console script). Extensions may
still call ``register_command`` themselves before ``main`` runs.

``biaslab --version`` prints the package version; every ``--help`` shows the defaults.

Exit codes: 0 success, 2 bad input (``InputError``/argparse usage: the message names the file
and the problem), other non-zero for unexpected failures.

``biaslab evaluate-captions`` computes the captioning bias and quality metrics of one results
file and prints and writes one JSON object (see ``evaluate_captions``). Its LIC classifier
uses the fast ``ci`` preset unless ``--paper`` / ``--preset paper`` is given; its LIC progress
bar (stderr) is on when stderr is a terminal unless ``--no-progress`` (``--progress`` forces
it).
"""
from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from biaslab.io import InputError, check_input_file, check_output_file, read_json, write_json

#: name -> (help, setup(parser) -> handler(args) -> int)
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], Callable]]] = {}
#: modules imported by ``build_parser`` so that their ``register_command`` calls run
#: (a static list: the console script imports nothing else before building the parser).
COMMAND_MODULES: tuple[str, ...] = ("biaslab.libra",)

METRIC_GROUPS = ("ratio", "error", "biasamp", "lic", "quality")


def register_command(name: str, help: str = ""):
    """Decorator: register ``setup(parser) -> handler`` as subcommand ``name``."""
    def deco(setup):
        COMMANDS[name] = (help, setup)
        return setup
    return deco


def version() -> str:
    """The installed distribution's version, else ``biaslab.__version__`` (source tree)."""
    try:
        from importlib.metadata import PackageNotFoundError, version as _v
        return _v("biaslab")
    except (ImportError, PackageNotFoundError):   # pragma: no cover - not installed
        import biaslab
        return biaslab.__version__


class _DefaultsFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``ArgumentDefaultsHelpFormatter`` that leaves alone a help text which already explains its
    default and an option whose default is None (nothing to show)."""

    def _get_help_string(self, action):
        h = action.help or ""
        if "default" in h or action.default is None or action.default is False:
            return h
        return super()._get_help_string(action)


def _show_defaults(parser: argparse.ArgumentParser) -> None:
    """Give ``parser`` and every nested subparser (also those a command module adds itself)
    a defaults-showing formatter, so ``--help`` shows each option's default."""
    parser.formatter_class = _DefaultsFormatter
    for action in parser._actions:
        if (action.help is None and action.option_strings
                and action.default not in (None, False, argparse.SUPPRESS)):
            action.help = "(default: %(default)s)"
        if isinstance(action, argparse._SubParsersAction):
            for p in action.choices.values():
                _show_defaults(p)


class _Parser(argparse.ArgumentParser):
    """Usage errors print ``biaslab <command>: error: <problem>`` as the first line (then the
    usage), like the input errors of the handlers; exit code 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n{self.format_usage()}")


def build_parser() -> argparse.ArgumentParser:
    """The ``biaslab`` parser with every registered subcommand (imports ``COMMAND_MODULES``)."""
    for mod in COMMAND_MODULES:
        importlib.import_module(mod)
    parser = _Parser(prog="biaslab", description="Societal-bias measurement "
                     "and mitigation for image captioning.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (hlp, setup) in sorted(COMMANDS.items()):
        p = sub.add_parser(name, help=hlp, description=hlp)
        p.set_defaults(_handler=setup(p))
    _show_defaults(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``biaslab`` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if getattr(args, "out", None):
            check_output_file(args.out)          # before any long computation
        return int(args._handler(args) or 0)
    except InputError as e:
        print(f"biaslab {args.command}: error: {e}", file=sys.stderr)
        return 2
    except Exception as e:
        if type(e).__name__ != "SafetensorError":
            raise
        where = _corrupt_weights(args) or "model weights"
        print(f"biaslab {args.command}: error: {where}: truncated or corrupt safetensors file "
              f"({e})", file=sys.stderr)
        return 2


def _corrupt_weights(args: argparse.Namespace) -> str | None:
    """The first ``*.safetensors`` under the model paths of ``args`` (``--model``,
    ``--bert-model``) that safetensors cannot open, to name it in the error message."""
    from safetensors import safe_open
    for attr in ("model", "bert_model"):
        p = getattr(args, attr, None)
        if not p or not Path(p).exists():
            continue
        files = [Path(p)] if Path(p).is_file() else sorted(Path(p).rglob("*.safetensors"))
        for f in files:
            try:
                with safe_open(str(f), framework="numpy"):
                    pass
            except Exception:
                return str(f)
    return None


# --------------------------------------------------------------------------------------------
# input readers (errors name the file)


def read_predictions(path: str | Path) -> dict[int, str]:
    """COCO results file ``[{"image_id": int, "caption": str}, ...]`` -> {image_id: caption}.

    Raises:
        InputError: missing/empty/invalid JSON, not a list, an entry without an int
            ``image_id`` or a string ``caption``, duplicate image ids, no entries.
    """
    data = read_json(path)
    if not isinstance(data, list):
        raise InputError(path, f"expected a JSON list of {{\"image_id\", \"caption\"}} objects "
                               f"(COCO results format), got {type(data).__name__}")
    if not data:
        raise InputError(path, "no predictions (empty list)")
    out: dict[int, str] = {}
    dups = []
    for n, item in enumerate(data):
        if not isinstance(item, dict) or "image_id" not in item or "caption" not in item:
            raise InputError(path, f"entry {n} is not an object with keys 'image_id' and "
                                   f"'caption': {str(item)[:80]}")
        iid, cap = item["image_id"], item["caption"]
        if isinstance(iid, bool) or not isinstance(iid, int):
            if isinstance(iid, str) and iid.strip().isdigit():
                iid = int(iid)
            else:
                raise InputError(path, f"entry {n}: image_id {iid!r} is not an integer")
        if not isinstance(cap, str):
            raise InputError(path, f"entry {n} (image_id {iid}): caption is not a string")
        if iid in out:
            dups.append(iid)
        out[iid] = cap
    if dups:
        raise InputError(path, f"{len(dups)} duplicate image_id(s), e.g. {sorted(set(dups))[:5]}; "
                               f"one caption per image expected")
    return out


def read_gender_labels(path: str | Path) -> tuple[dict[int, str], dict]:
    """Labels CSV -> ({image_id: "female"/"male"}, info).

    Columns: ``image_id`` and ``gender`` or ``bb_gender`` (``gender`` wins when both exist).
    Values are matched case-insensitively; anything but female/male (``Unsure``, ``Both``,
    empty) is ignored and counted in ``info["n_ignored"]``.

    Raises:
        InputError: missing/unreadable file, missing columns, non-integer ids, conflicting
            labels for one id, no rows.
    """
    import pandas as pd
    path = check_input_file(path)
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError as e:
        raise InputError(path, "file is empty") from e
    except (pd.errors.ParserError, UnicodeDecodeError) as e:
        raise InputError(path, f"not a readable CSV file ({e})") from e
    except OSError as e:
        raise InputError(path, f"cannot read it ({e.strerror or e})") from e
    cols = {c.strip().lower(): c for c in df.columns}
    if "image_id" not in cols:
        raise InputError(path, f"missing column 'image_id'; has {list(df.columns)}")
    gcol = cols.get("gender") or cols.get("bb_gender")
    if gcol is None:
        raise InputError(path, f"missing column 'gender' or 'bb_gender'; has {list(df.columns)}")
    if df.empty:
        raise InputError(path, "no rows")
    out: dict[int, str] = {}
    n_ignored = 0
    conflicts = []
    for row, (raw_id, raw_g) in enumerate(zip(df[cols["image_id"]], df[gcol]), start=2):
        s = str(raw_id).strip()
        try:
            iid = int(float(s)) if s and float(s).is_integer() else None
        except ValueError:
            iid = None
        if iid is None:
            raise InputError(path, f"line {row}: image_id {raw_id!r} is not an integer")
        g = str(raw_g).strip().lower()
        if g not in ("female", "male"):
            n_ignored += 1
            continue
        if out.get(iid, g) != g:
            conflicts.append(iid)
        out[iid] = g
    if conflicts:
        raise InputError(path, f"conflicting female/male labels for {len(set(conflicts))} "
                               f"image id(s), e.g. {sorted(set(conflicts))[:5]}")
    return out, {"n_rows": int(len(df)), "n_ignored": n_ignored, "gender_column": gcol}


def read_human_captions(path: str | Path) -> dict[int, list[str]]:
    """COCO captions file (``{"annotations": [{"image_id", "caption", "id"}, ...]}``) ->
    {image_id: captions ordered by annotation id (file order when ids are absent)}.

    Raises:
        InputError: missing/invalid JSON, no ``annotations`` list, malformed entries, no
            captions.
    """
    data = read_json(path)
    if not isinstance(data, dict) or not isinstance(data.get("annotations"), list):
        raise InputError(path, "expected a COCO captions file: a JSON object with an "
                               "'annotations' list")
    rows = []
    for n, a in enumerate(data["annotations"]):
        if (not isinstance(a, dict) or not isinstance(a.get("image_id"), int)
                or not isinstance(a.get("caption"), str)):
            raise InputError(path, f"annotation {n} lacks an integer 'image_id' or a string "
                                   f"'caption': {str(a)[:80]}")
        aid = a.get("id")
        rows.append((a["image_id"], aid if isinstance(aid, int) else n, n, a["caption"]))
    if not rows:
        raise InputError(path, "no captions (empty 'annotations')")
    out: dict[int, list[str]] = {}
    for iid, _, _, cap in sorted(rows, key=lambda r: (r[0], r[1], r[2])):
        out.setdefault(iid, []).append(cap)
    return out


# --------------------------------------------------------------------------------------------
# evaluate-captions


def _jsonable(x: Any) -> Any:
    """Non-finite floats -> "inf"/"-inf"/"nan" strings (strict JSON); numpy scalars -> Python."""
    try:
        import numpy as np
        if isinstance(x, np.generic):
            x = x.item()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(x, float) and not math.isfinite(x):
        return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, Mapping):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


def _unavailable(module: str, e: Exception) -> dict:
    return {"skipped": f"{module} not available ({type(e).__name__}: {e})"}


def evaluate_captions(predictions: dict[int, str], genders: dict[int, str],
                      human: dict[int, list[str]] | None = None,
                      metrics: tuple[str, ...] = METRIC_GROUPS, words: str = "lic",
                      classifier: str = "lstm", preset: str = "paper", seeds: int = 10,
                      num_threads: int | None = None, progress: bool = False,
                      biasamp_min_count: int = 100, bert_model: str | None = None,
                      train_captions: Sequence[str] | None = None,
                      on_partial: Callable[[dict], None] | None = None,
                      max_human_captions: int | None = None) -> dict:
    """All requested metrics in one dict. Bias metrics use the predictions of images labelled
    female/male; quality metrics use every prediction that has human references.

    BiasAmp (thesis Eqs. 2.2-2.3, :func:`biaslab.metrics.biasamp.bias_amplification`): the
    reference ``D`` (vocabulary = top 1,000 words of D, ``b`` from D, ``min_count`` filter in
    D) is ``train_captions`` when given -- the human captions of the captioner's TRAINING set,
    as the papers do -- and otherwise the human captions of the evaluated images (``human``);
    ``BiasAmp["reference"]`` says which (``"train"`` / ``"test_human"``) and
    ``n_reference_captions`` how many captions it has. The model side is every labelled
    prediction (with the test reference: every labelled prediction with human captions).

    Args:
        predictions: image id -> generated caption.
        genders: image id -> "female"/"male" (others are not bias-evaluated).
        human: image id -> human captions (references), or None.
        metrics: metric groups of :data:`METRIC_GROUPS`.
        words, classifier, preset, seeds, num_threads, progress, bert_model: LIC / word-list
            settings (see :func:`biaslab.metrics.lic.lic`).
        biasamp_min_count: BiasAmp min co-occurrences with each gender in D (papers: 100).
        train_captions: flat sequence of the training set's human captions (BiasAmp's D).
        max_human_captions: LIC_D averages over the first ``max_human_captions`` human-caption
            indices (None: every index, the paper's 5 on COCO; see :func:`biaslab.metrics.lic.lic`).
        on_partial: when given, gets a copy of the metrics computed so far just before the
            slow LIC step and again after every LIC seed (``LIC_seeds_done``); the CLI writes
            it to ``<out>.partial`` so a crash keeps them.

    Returns:
        ``{"Ratio", "Error", "BiasAmp", "quality", "LIC_M", "LIC_D", "LIC", "LIC_*_std",
        "LIC_details"}`` (the requested groups); a metric whose inputs are missing is
        reported as ``{"skipped": reason}``.
    """
    ids = sorted(i for i in predictions if i in genders)
    caps = {i: predictions[i] for i in ids}
    gen = {i: genders[i] for i in ids}
    out: dict[str, Any] = {}
    need_h = "needs --human"

    if "ratio" in metrics:
        try:
            from biaslab.metrics.captions import ratio
            out["Ratio"] = ratio(caps, gen, words)
        except ImportError as e:
            out["Ratio"] = _unavailable("biaslab.metrics.captions", e)
    if "error" in metrics:
        try:
            from biaslab.metrics.captions import error
            out["Error"] = error(caps, gen, words)
        except ImportError as e:
            out["Error"] = _unavailable("biaslab.metrics.captions", e)
    if "biasamp" in metrics:
        if human is None and train_captions is None:
            out["BiasAmp"] = {"skipped": "needs --train-captions (or --human)"}
        else:
            try:
                from biaslab.metrics.biasamp import bias_amplification
                if train_captions is not None:
                    ref_name, hid = "train", ids
                    ref, ref_g = [str(c) for c in train_captions], None
                else:
                    ref_name = "test_human"
                    hid = [i for i in ids if human.get(i)]
                    ref, ref_g = [human[i] for i in hid], [gen[i] for i in hid]
                res = bias_amplification([caps[i] for i in hid], ref,
                                         [gen[i] for i in hid], ref_g,
                                         words=words, min_count=biasamp_min_count)
                out["BiasAmp"] = {"ba": res["ba"], "n_words": res["n_words"],
                                  "n_undefined": res["n_undefined"],
                                  "min_count": biasamp_min_count, "reference": ref_name,
                                  "n_reference_captions": sum(
                                      1 if isinstance(r, str) else len(r) for r in ref),
                                  "n_human_captions": res["n_human_captions"],
                                  "n_model_captions": res["n_model_captions"]}
            except ImportError as e:
                out["BiasAmp"] = _unavailable("biaslab.metrics.biasamp", e)
    if "quality" in metrics:
        if human is None:
            out["quality"] = {"skipped": need_h}
        else:
            qid = [i for i in sorted(predictions) if human.get(i)]
            if not qid:
                out["quality"] = {"skipped": "no prediction has human references"}
            else:
                try:
                    from biaslab.metrics.quality import coco_caption_scores
                    out["quality"] = {**coco_caption_scores(
                        {i: predictions[i] for i in qid}, {i: human[i] for i in qid}),
                        "n_images": len(qid)}
                except ImportError as e:
                    out["quality"] = _unavailable("biaslab.metrics.quality", e)
                except RuntimeError as e:   # Java missing for pycocoevalcap
                    out["quality"] = {"skipped": str(e)}
    if on_partial is not None and "lic" in metrics:
        on_partial(dict(out))
    if "lic" in metrics:
        from biaslab import textclf
        from biaslab.metrics.lic import lic
        cfg = textclf.default_config(classifier, preset, progress=False)
        if num_threads:
            cfg = dataclasses.replace(cfg, num_threads=num_threads)
        if bert_model and classifier != "lstm":
            cfg = dataclasses.replace(cfg, model=bert_model)
        done: list[dict] = []

        def seed_done(rec: dict) -> None:   # the partial file grows seed by seed
            done.append(rec)
            on_partial({**out, "LIC_seeds_done": list(done)})
        try:
            res = lic(caps, human, gen, classifier=classifier, seeds=seeds, config=cfg,
                      words=words, progress=progress, max_human_captions=max_human_captions,
                      on_seed=seed_done if on_partial is not None else None)
        except ValueError as e:   # e.g. too few images per gender
            out["LIC_M"] = out["LIC_D"] = out["LIC"] = {"skipped": str(e)}
        else:
            for k in ("LIC_M", "LIC_D", "LIC"):
                if res[k] is None:
                    out[k] = {"skipped": need_h}
                else:
                    out[k] = res[k]
                    out[f"{k}_std"] = res[f"{k}_std"]
            out["LIC_details"] = {k: v for k, v in res.items()
                                  if k not in ("LIC_M", "LIC_M_std", "LIC_D", "LIC_D_std",
                                               "LIC", "LIC_std")}
            out["LIC_details"]["preset"] = preset
    return out


def _positive_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {s!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def _non_negative_int(s: str) -> int:
    try:
        v = int(s)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {s!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {v}")
    return v


def _word_list_names() -> tuple[str, ...]:
    from biaslab.gender import WORD_LISTS
    return tuple(WORD_LISTS)


@register_command("evaluate-captions",
                  help="Bias (Ratio, Error, BiasAmp, LIC) and quality (BLEU-4, CIDEr, METEOR) "
                       "of generated captions; prints and writes one JSON object.")
def _setup_evaluate(p: argparse.ArgumentParser):
    p.add_argument("--pred", required=True, help="COCO results JSON: "
                   "[{\"image_id\": int, \"caption\": str}, ...]")
    p.add_argument("--gender", required=True, help="CSV with image_id and gender or bb_gender "
                   "(Male/Female, any case; other values ignored)")
    p.add_argument("--human", help="COCO captions JSON (needed for LIC_D, LIC, "
                   "BLEU/CIDEr/METEOR; BiasAmp's reference when --train-captions is absent)")
    p.add_argument("--train-captions", metavar="CAPTIONS_JSON",
                   help="COCO captions JSON of the captioner's TRAINING set (e.g. "
                        "captions_train2017.json): BiasAmp's reference D (top 1,000 words, "
                        "b and the min-count filter from D, as the papers). Without it BiasAmp "
                        "uses the --human captions of the evaluated images and says so "
                        "(BiasAmp.reference = test_human)")
    p.add_argument("--metrics", nargs="+", choices=METRIC_GROUPS, default=list(METRIC_GROUPS),
                   help="metric groups")
    p.add_argument("--seeds", type=_positive_int, default=10, help="LIC seeds (paper: 10)")
    p.add_argument("--classifier", choices=("lstm", "bert_ft", "bert_pre"), default="lstm",
                   help="LIC classifier (paper main results: lstm)")
    p.add_argument("--preset", choices=("ci", "paper"), default="ci",
                   help="LIC classifier hyper-parameters: ci = fast settings (default), "
                        "paper = thesis 2.8.1 (about an hour for 10 seeds on a CPU)")
    p.add_argument("--paper", dest="preset", action="store_const", const="paper",
                   help="the paper preset: same as --preset paper")
    p.add_argument("--bert-model", default=None, metavar="NAME_OR_DIR",
                   help="BERT for bert_ft/bert_pre: a local directory, 'minilm' (packaged "
                        "MiniLM), or a cached hub name (default: bert-base-uncased for "
                        "--preset paper, minilm for ci)")
    p.add_argument("--words", default="lic", choices=_word_list_names(),
                   help="gender word list")
    p.add_argument("--max-human-captions", type=_positive_int, default=None, metavar="K",
                   help="LIC_D: average over the first K human-caption indices (default: "
                        "all of them, the paper's 5 on COCO)")
    p.add_argument("--biasamp-min-count", type=_non_negative_int, default=100,
                   help="BiasAmp: min co-occurrences with each gender (papers: 100)")
    p.add_argument("--num-threads", type=_positive_int, default=None,
                   help="torch threads for LIC (default: the preset's; on a CPU shared with other "
                        "jobs 1 is often fastest)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="LIC progress bar on stderr (default: on when stderr is a terminal; "
                        "--no-progress turns it off)")
    p.add_argument("--out", help="write the JSON object here too (atomically; checked before "
                   "any computation; the metrics before LIC go to <out>.partial meanwhile)")
    return _run_evaluate


def progress_enabled(flag: bool | None) -> bool:
    """``--progress`` / ``--no-progress`` as given, else on when stderr is a terminal
    (``biaslab.progress.stderr_is_tty``)."""
    from biaslab.progress import stderr_is_tty
    return stderr_is_tty() if flag is None else bool(flag)


def _check_bert_available(classifier: str, preset: str, bert_model: str | None) -> None:
    """Fail early (exit 2) when the BERT model cannot be loaded offline."""
    from biaslab import textclf
    cfg = textclf.default_config(classifier, preset)
    model = bert_model or cfg.model
    try:
        textclf.load_tokenizer(model, cfg.local_files_only)
    except (OSError, ValueError) as e:
        raise InputError(f"--classifier {classifier}",
                         f"BERT model {model!r} cannot be loaded: {e}") from e


def _run_evaluate(args: argparse.Namespace) -> int:
    predictions = read_predictions(args.pred)
    labels, label_info = read_gender_labels(args.gender)
    if not labels:
        raise InputError(args.gender, f"no female/male labels ({label_info['n_rows']} rows, "
                                      f"all other values)")
    human = read_human_captions(args.human) if args.human else None
    train_caps = None
    if args.train_captions:
        train_caps = [c for cs in read_human_captions(args.train_captions).values() for c in cs]
    if "lic" in args.metrics and args.classifier != "lstm":
        _check_bert_available(args.classifier, args.preset, args.bert_model)
    unlabelled = sorted(i for i in predictions if i not in labels)
    n_lab = len(predictions) - len(unlabelled)
    if n_lab == 0:
        raise InputError(args.gender, f"none of the {len(predictions)} image ids of "
                                      f"{args.pred} has a female/male label")
    if unlabelled:
        print(f"biaslab evaluate-captions: warning: {len(unlabelled)} of {len(predictions)} "
              f"predicted image ids have no female/male label in {args.gender}; bias metrics "
              f"use the {n_lab} labelled ones", file=sys.stderr)
    inputs = {"pred": str(args.pred), "gender": str(args.gender),
              "human": str(args.human) if args.human else None,
              "n_predictions": len(predictions), "n_labelled_predictions": n_lab,
              "n_predictions_without_label": len(unlabelled),
              "predictions_without_label_sample": unlabelled[:10],
              "n_label_rows": label_info["n_rows"],
              "n_label_rows_ignored": label_info["n_ignored"],
              "gender_column": label_info["gender_column"]}
    if human is not None:
        inputs["n_predictions_without_human"] = sum(1 for i in predictions if i not in human)
    inputs["train_captions"] = str(args.train_captions) if args.train_captions else None
    if "biasamp" in args.metrics:
        inputs["biasamp_reference"] = (
            f"training captions {args.train_captions}" if train_caps is not None else
            f"human captions of the evaluated images ({args.human}); pass --train-captions "
            f"for the papers' training-set reference" if human is not None else None)
        if train_caps is None and human is not None:
            print(f"biaslab evaluate-captions: note: BiasAmp reference = the --human captions "
                  f"of the evaluated images (no --train-captions)", file=sys.stderr)
    from biaslab.gender import caption_gender
    n_gendered = sum(caption_gender(c, args.words) in ("female", "male", "both")
                     for i, c in predictions.items() if i in labels)
    inputs["n_labelled_predictions_mentioning_gender"] = n_gendered
    if n_gendered == 0:
        print(f"biaslab evaluate-captions: warning: no caption of the {n_lab} labelled "
              f"predictions mentions a gender (word list {args.words!r}): Ratio is undefined "
              f"(nan) and Error counts no gender mistakes (0.0) because nothing was predicted",
              file=sys.stderr)
    partial = Path(f"{args.out}.partial") if args.out else None

    def write_partial(so_far: dict) -> None:
        write_json(partial, _jsonable({"inputs": inputs, **so_far, "partial": True,
                                       "pending": ["LIC"]}))

    result = evaluate_captions(predictions, labels, human, tuple(args.metrics), args.words,
                               args.classifier, args.preset, args.seeds, args.num_threads,
                               progress_enabled(args.progress), args.biasamp_min_count, args.bert_model,
                               train_caps, on_partial=write_partial if partial else None,
                               max_human_captions=args.max_human_captions)
    result = _jsonable({"inputs": inputs, **result})
    print(json.dumps(result, indent=2, sort_keys=True))
    if args.out:
        write_json(args.out, result)
        if partial is not None:
            partial.unlink(missing_ok=True)
    return 0


# --------------------------------------------------------------------------------------------
# plan (issue 16.4): the logic is biaslab.plan; imported when the command runs


@register_command("plan", help="Cost model of a run: per heavy stage the work (images, "
                  "candidates, captions, models), the per-item rate with its source and the "
                  "expected wall time on N GPUs and on this CPU.")
def _setup_plan(p: argparse.ArgumentParser):
    p.add_argument("-S", "--set", dest="overrides", action="append", default=[],
                   metavar="KEY=VALUE", help="Hydra override of conf/, as dvc exp run -S "
                   "(e.g. -S data=coco -S scale=full -S models=paper); repeatable")
    p.add_argument("--gpus", type=_positive_int, default=1, help="number of GPUs")
    p.add_argument("--gpu", default="a100", choices=("a100", "h100", "h200", "v100", "l4"),
                   help="GPU kind (rates scaled from A100 by peak FP16 TFLOPS unless "
                        "measured)")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    return _run_plan


def _run_plan(args: argparse.Namespace) -> int:
    from biaslab import plan as P
    result = P.plan(P.compose(args.overrides), gpus=args.gpus, gpu=args.gpu)
    print(json.dumps(_jsonable(result), indent=2) if args.json else P.format_plan(result))
    return 0


if __name__ == "__main__":  # pragma: no cover
    # ``python -m biaslab.cli`` runs this file as ``__main__``; command modules register into
    # the importable ``biaslab.cli``, so run that module's ``main``.
    from biaslab import cli as _cli
    sys.exit(_cli.main())
