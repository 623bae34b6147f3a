"""``biaslab`` command line: argparse on top of the library.

The CLI imports the library and nothing in the library imports the CLI. Its
commands are this module's own (``evaluate-captions``, ``libra debias``, ``plan``), each a
``setup(parser) -> handler(args) -> int`` function registered with ``@register_command``
below. A separate package adds a command without editing this repository through the entry
point group ``biaslab.commands`` (name = command, value = ``module:setup``; the setup's
docstring's first line is the help), loaded when the parser is built.

``biaslab --version`` prints the package version; every ``--help`` shows the defaults.

Exit codes: 0 success, 2 bad input (``InputError``/argparse usage: the message names the file
and the problem), other non-zero for unexpected failures.

``biaslab evaluate-captions`` computes the captioning bias and quality metrics of one results
file and prints and writes one JSON object (``biaslab.metrics.evaluate.evaluate_captions``).
Its LIC classifier uses the fast ``ci`` preset unless ``--paper`` / ``--preset paper`` is
given; its LIC progress bar (stderr) is on when stderr is a terminal unless ``--no-progress``
(``--progress`` forces it).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from biaslab.runtime.io import InputError, check_output_file, write_json
from biaslab.metrics.evaluate import DEFAULT_METRICS, METRIC_GROUPS, evaluate_captions
from biaslab.metrics.files import (ATTRIBUTES, jsonable, read_categories, read_group_labels,
                                   read_human_captions, read_predictions)

#: name -> (help, setup(parser) -> handler(args) -> int)
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], Callable]]] = {}
#: entry point group through which other packages add commands
ENTRY_POINT_GROUP = "biaslab.commands"



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


def plugin_commands() -> dict[str, tuple[str, Callable]]:
    """Commands of installed packages (entry point group :data:`ENTRY_POINT_GROUP`):
    ``{name: (help, setup)}``. A command name this module already has is not replaced."""
    from importlib.metadata import entry_points
    out = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in COMMANDS:
            continue
        setup = ep.load()
        out[ep.name] = ((setup.__doc__ or "").strip().split("\n")[0], setup)
    return out


def build_parser() -> argparse.ArgumentParser:
    """The ``biaslab`` parser with this module's commands and those of installed plug-ins
    (:func:`plugin_commands`)."""
    parser = _Parser(prog="biaslab", description="Societal-bias measurement "
                     "and mitigation for image captioning.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (hlp, setup) in sorted({**plugin_commands(), **COMMANDS}.items()):
        p = sub.add_parser(name, help=hlp, description=hlp)
        p.set_defaults(_handler=setup(p))
    _show_defaults(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The command line (the ``biaslab`` console script runs it after the start-up,
    :mod:`biaslab.__main__`); returns the exit code."""
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
# evaluate-captions


def _int_at_least(bound: int):
    """An argparse ``type``: the argument as an int >= ``bound``, else a usage error."""
    def parse(s: str) -> int:
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {s!r}") from None
        if v < bound:
            raise argparse.ArgumentTypeError(f"must be >= {bound}, got {v}")
        return v
    return parse


_positive_int = _int_at_least(1)
_non_negative_int = _int_at_least(0)


def _word_list_names() -> tuple[str, ...]:
    from biaslab.data.gender import WORD_LISTS
    return tuple(WORD_LISTS)


@register_command("evaluate-captions",
                  help="Bias (Ratio, Error, BiasAmp, LIC; DBAC with --metrics ... dbac) and "
                       "quality (BLEU-4, CIDEr, METEOR) of generated captions; prints and "
                       "writes one JSON object.")
def _setup_evaluate(p: argparse.ArgumentParser):
    p.add_argument("--pred", required=True, help="COCO results JSON: "
                   "[{\"image_id\": int, \"caption\": str}, ...], or JSON Lines with those "
                   "keys (*.jsonl; gzip allowed: the published captioners' *.jsonl.gz); a "
                   "regular file of at most 256 MiB")
    p.add_argument("--gender", "--labels", dest="gender", required=True,
                   help="CSV (or JSON Lines, such as the --pred file of a published "
                   "captioner) with image_id and the attribute's labels: gender or bb_gender "
                   "(Male/Female), or with --attribute skin, skin or bb_skin (Dark/Light; "
                   "Zhao et al. 2021's perceived_gender_skin.csv), with --attribute "
                   "gender_skin both; any case, other values ignored")
    p.add_argument("--attribute", choices=tuple(ATTRIBUTES), default="gender",
                   help="protected attribute (default gender). skin: the thesis' racial-bias "
                        "LIC (sec. 2.5.3) on unmasked captions, groups dark/light (unbiased: "
                        "LIC_M = 25, LIC = 0). gender_skin: the four gender x skin groups, "
                        "LIC with a 4-way classifier on gender-masked captions (chance: "
                        "LIC_M about 6.25) and Error per group with the worst-group gap. "
                        "Ratio, BiasAmp and DBAC count gender words over two groups and are "
                        "reported as skipped for both (Error too for skin)")
    p.add_argument("--human", help="COCO captions JSON (needed for LIC_D, LIC, "
                   "BLEU/CIDEr/METEOR; BiasAmp's reference when --train-captions is absent)")
    p.add_argument("--train-captions", metavar="CAPTIONS_JSON",
                   help="COCO captions JSON of the captioner's TRAINING set (e.g. "
                        "captions_train2017.json): BiasAmp's reference D (top 1,000 words, "
                        "b and the min-count filter from D, as the papers). Without it BiasAmp "
                        "uses the --human captions of the evaluated images and says so "
                        "(BiasAmp.reference = test_human)")
    p.add_argument("--metrics", nargs="+", choices=METRIC_GROUPS, default=list(DEFAULT_METRICS),
                   help="metric groups (default: all but dbac; dbac = directional bias "
                        "amplification, Nair et al. 2025, both directions, needs --human)")
    p.add_argument("--dbac-categories", metavar="INSTANCES_JSON",
                   help="DBAC's task list L: the category names of a COCO instances JSON "
                        "(default: the 80 MSCOCO categories)")
    p.add_argument("--dbac-seeds", type=_positive_int, default=None,
                   help="DBAC seeds (default: --seeds)")
    p.add_argument("--dbac-bayes", action=argparse.BooleanOptionalAction, default=True,
                   help="DBAC's prior correction P(z)/P(y) (the authors' default; "
                        "DBAC_direct is always reported beside it)")
    p.add_argument("--dbac-substitution", choices=("contextual", "constant", "none"),
                   default="contextual",
                   help="DBAC's vocabulary substitution: contextual = nearest word by MiniLM "
                        "word vectors (authors), constant = unknown token (LIC's)")
    p.add_argument("--dbac-threshold", type=float, default=0.5,
                   help="cosine threshold of the contextual substitution (authors: 0.5)")
    p.add_argument("--dbac-test-ratio", type=float, default=0.2,
                   help="DBAC's held-out share of the minority gender (authors: 0.2)")
    p.add_argument("--seeds", type=_positive_int, default=LIC_SEEDS,
                   help=f"LIC seeds (default {LIC_SEEDS}: under a minute on 10,000 captions "
                        f"with the ci preset on 2 cores; the papers' numbers use 10, as "
                        f"--seeds 10 --preset paper)")
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
    p.add_argument("--json", action="store_true",
                   help="print the JSON object on stdout (for machines; the summary then goes "
                        "to stderr). Default: the summary on stdout")
    return _run_evaluate


def progress_enabled(flag: bool | None) -> bool:
    """``--progress`` / ``--no-progress`` as given, else on when stderr is a terminal
    (``biaslab.runtime.progress.stderr_is_tty``)."""
    from biaslab.runtime.progress import stderr_is_tty
    return stderr_is_tty() if flag is None else bool(flag)


#: what an unbiased captioner reads on each metric of the gender reading: LIC_M is the
#: attacker's confidence-weighted accuracy x100, 25 at chance on two groups (thesis Eq. 2.9;
#: 0.5 x 0.5); LIC, Error and BiasAmp are 0
UNBIASED = {"LIC_M": 25.0, "LIC": 0.0, "Error": 0.0, "BiasAmp": 0.0}
#: default LIC seeds of evaluate-captions (``--seeds``)
LIC_SEEDS = 3


def gender_reading(predictions: dict[int, str], labels: dict[int, str], result: dict,
                   words: str) -> dict:
    """What a reader needs beside evaluate-captions' gender numbers: Ratio and Error with a
    percentile bootstrap 95 % CI over images (the published profile's,
    :func:`biaslab.data.published.ratio_error`, 2,000 resamples), the labels' own man : woman
    ratio (what a captioner that names every person as annotated reads), the captions that
    name both genders (in neither the man nor the woman count of Ratio), and each metric's
    unbiased value (:data:`UNBIASED`)."""
    import pandas as pd

    from biaslab.data.gender import caption_gender
    from biaslab.data.published import ratio_error
    ids = [i for i in predictions if i in labels]
    df = pd.DataFrame({"image_id": ids, "caption": [predictions[i] for i in ids],
                       "bb_gender": [labels[i] for i in ids]})
    re_ = ratio_error(df, words)
    n_m = sum(1 for i in ids if labels[i] == "male")
    n_f = len(ids) - n_m
    both = sum(1 for i in ids if caption_gender(predictions[i], words) == "both")
    return {"Ratio": re_["Ratio"], "Error": re_["Error"],
            "Ratio_labels": (n_m / n_f) if n_f else None,
            "n_captions_naming_both": both,
            "unbiased": {k: v for k, v in UNBIASED.items() if k in result}}


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) \
        and math.isfinite(float(v)) else None


def summary_lines(result: dict) -> str:
    """The human summary of an evaluate-captions result: the inputs counted, the gender
    reading (:func:`reading_lines`) or, for another attribute, its LIC and per-group Error,
    BiasAmp against the human captions' own value, DBAC, the caption quality, and where the
    full JSON is."""
    inp = result.get("inputs") or {}
    out = [f"biaslab evaluate-captions: {inp.get('n_predictions', '?')} captions, "
           f"{inp.get('n_labelled_predictions', '?')} with a label"
           + (f" ({inp['attribute']})" if inp.get("attribute") else "")]
    if "reading" in result:
        out += reading_lines(result).splitlines()[1:]
    else:
        for k in ("LIC_M", "LIC_D", "LIC"):
            v = _num(result.get(k))
            if v is not None:
                h, n = _num(result.get(f"{k}_ci95")), result.get(f"{k}_n")
                unb = {"LIC": 0.0}.get(k)
                out.append(f"  {k} {v:.1f}" + (f" ± {h:.1f}" if h is not None else "")
                           + (f" (n = {n} seeds)" if n else "")
                           + (f"; unbiased {unb:g}" if unb is not None else ""))
        err = result.get("Error")
        if isinstance(err, dict) and _num(err.get("gap")) is not None:
            out.append(f"  Error worst-group gap {float(err['gap']):.1f} points (per group in the "
                       f"JSON)")
    ba = result.get("BiasAmp")
    if isinstance(ba, dict) and "skipped" not in ba:
        v, null = _num(ba.get("ba")), _num((ba.get("human_null") or {}).get("ba"))
        out.append("  BiasAmp " + ("undefined (no word co-occurs often enough with each gender"
                                   f", min count {ba.get('min_count')})" if v is None else
                                   f"{v:.2f}")
                   + (f"; the human captions' own {null:.2f} (a captioner as biased as "
                      f"people reads this, not 0)" if null is not None else ""))
    dbac = result.get("DBAC")
    if isinstance(dbac, dict) and "skipped" not in dbac:
        vals = [f"{k} {float(v):+.3f}" for k, v in sorted(dbac.items())
                if k.startswith("DBAC") and _num(v) is not None]
        if vals:
            out.append("  " + ", ".join(vals) + "; unbiased 0")
    q = result.get("quality")
    if isinstance(q, dict) and "skipped" not in q:
        vals = [f"{k} {float(v):.1f}" for k, v in q.items()
                if _num(v) is not None and not k.startswith("n_")]
        if vals:
            out.append("  quality: " + ", ".join(vals))
    skipped: dict[str, list[str]] = {}
    for k, v in sorted(result.items()):
        if isinstance(v, dict) and "skipped" in v:
            skipped.setdefault(str(v["skipped"]), []).append(k)
    out += [f"  skipped {', '.join(ks)}: {why}" for why, ks in skipped.items()]
    out.append("  every number, its n and its settings: --json (stdout) or --out FILE")
    return "\n".join(out)


def reading_lines(result: dict) -> str:
    """The gender reading's lines: each headline number with its CI or seeds and what an
    unbiased captioner reads."""
    r = result["reading"]

    def ci(rec, d=2):
        if not rec or rec.get("mean") is None:
            return "n/a"
        lo, hi = rec.get("lo"), rec.get("hi")
        return f"{rec['mean']:.{d}f}" + (f" [{lo:.{d}f}, {hi:.{d}f}]" if lo is not None
                                         and hi is not None else "")
    out = ["biaslab evaluate-captions: reading (95 % CI over images, or over LIC seeds)"]
    lab = r.get("Ratio_labels")
    out.append(f"  Ratio (#man / #woman captions) {ci(r['Ratio'])}; the labels' own "
               f"{lab:.2f}" if lab else f"  Ratio {ci(r['Ratio'])}")
    out.append(f"  Error (% images captioned with the other gender) {ci(r['Error'], 1)}; "
               f"unbiased 0")
    for k in ("LIC_M", "LIC_D", "LIC"):
        if isinstance(result.get(k), (int, float)):
            h = result.get(f"{k}_ci95")
            n = result.get(f"{k}_n")
            unb = UNBIASED.get(k)
            out.append(f"  {k} {result[k]:.1f}" + (f" ± {h:.1f}" if h is not None else "")
                       + (f" (n = {n} seeds)" if n else "")
                       + (f"; unbiased {unb:g}" if unb is not None else ""))
    if r.get("n_captions_naming_both"):
        out.append(f"  {r['n_captions_naming_both']} captions name both genders: in neither "
                   f"count of Ratio, and no Error")
    return "\n".join(out)


def _check_bert_available(classifier: str, preset: str, bert_model: str | None) -> None:
    """Fail early (exit 2) when the BERT model cannot be loaded offline."""
    from biaslab.models import textclf
    cfg = textclf.default_config(classifier, preset)
    model = bert_model or cfg.model
    try:
        textclf.load_tokenizer(model, cfg.local_files_only)
    except (OSError, ValueError) as e:
        raise InputError(f"--classifier {classifier}",
                         f"BERT model {model!r} cannot be loaded: {e}") from e


def _run_evaluate(args: argparse.Namespace) -> int:
    predictions = read_predictions(args.pred)
    labels, label_info = read_group_labels(args.gender, args.attribute)
    pair = "/".join(ATTRIBUTES[args.attribute][1])
    if not labels:
        raise InputError(args.gender, f"no {pair} labels ({label_info['n_rows']} rows, "
                                      f"all other values)")
    human = read_human_captions(args.human) if args.human else None
    train_caps = None
    if args.train_captions:
        train_caps = [c for cs in read_human_captions(args.train_captions).values() for c in cs]
    if {"lic", "dbac"} & set(args.metrics) and args.classifier != "lstm":
        _check_bert_available(args.classifier, args.preset, args.bert_model)
    dbac_opts = None
    if "dbac" in args.metrics:
        if human is None:
            raise InputError("--metrics dbac", "DBAC compares the model's captions with the "
                                               "human ones: pass --human")
        if not 0.0 <= args.dbac_threshold <= 1.0:
            raise InputError("--dbac-threshold", f"must be in [0, 1], got {args.dbac_threshold}")
        if not 0.0 < args.dbac_test_ratio < 1.0:
            raise InputError("--dbac-test-ratio", f"must be in (0, 1), got "
                                                  f"{args.dbac_test_ratio}")
        dbac_opts = {"seeds": args.dbac_seeds, "bayes": args.dbac_bayes,
                     "test_ratio": args.dbac_test_ratio,
                     "substitution": args.dbac_substitution, "threshold": args.dbac_threshold,
                     "categories": (read_categories(args.dbac_categories)
                                    if args.dbac_categories else None)}
    unlabelled = sorted(i for i in predictions if i not in labels)
    n_lab = len(predictions) - len(unlabelled)
    if n_lab == 0:
        raise InputError(args.gender, f"none of the {len(predictions)} image ids of "
                                      f"{args.pred} has a {pair} label")
    if unlabelled:
        print(f"biaslab evaluate-captions: warning: {len(unlabelled)} of {len(predictions)} "
              f"predicted image ids have no {pair} label in {args.gender}; bias metrics "
              f"use the {n_lab} labelled ones", file=sys.stderr)
    inputs = {"pred": str(args.pred), "gender": str(args.gender),
              "human": str(args.human) if args.human else None,
              "n_predictions": len(predictions), "n_labelled_predictions": n_lab,
              "n_predictions_without_label": len(unlabelled),
              "predictions_without_label_sample": unlabelled[:10],
              "n_label_rows": label_info["n_rows"],
              "n_label_rows_ignored": label_info["n_ignored"],
              "gender_column": label_info["column"]}
    if args.attribute != "gender":        # the gender run's output keeps its keys unchanged
        inputs["attribute"] = args.attribute
        inputs["label_column"] = inputs.pop("gender_column")
        inputs["n_labelled_predictions_by_group"] = {
            g: sum(1 for i in predictions if labels.get(i) == g)
            for g in ATTRIBUTES[args.attribute][1]}
    if human is not None:
        inputs["n_predictions_without_human"] = sum(1 for i in predictions if i not in human)
    inputs["train_captions"] = str(args.train_captions) if args.train_captions else None
    if "biasamp" in args.metrics and args.attribute == "gender":
        inputs["biasamp_reference"] = (
            f"training captions {args.train_captions}" if train_caps is not None else
            f"human captions of the evaluated images ({args.human}); pass --train-captions "
            f"for the papers' training-set reference" if human is not None else None)
        if train_caps is None and human is not None:
            print("biaslab evaluate-captions: note: BiasAmp reference = the --human captions "
                  "of the evaluated images (no --train-captions)", file=sys.stderr)
    from biaslab.data.gender import caption_gender
    n_gendered = sum(caption_gender(c, args.words) in ("female", "male", "both")
                     for i, c in predictions.items() if i in labels)
    if args.attribute == "gender":
        inputs["n_labelled_predictions_mentioning_gender"] = n_gendered
    if n_gendered == 0 and args.attribute == "gender":
        print(f"biaslab evaluate-captions: warning: no caption of the {n_lab} labelled "
              f"predictions mentions a gender (word list {args.words!r}): Ratio is undefined "
              f"(nan) and Error counts no gender mistakes (0.0) because nothing was predicted",
              file=sys.stderr)
    partial = Path(f"{args.out}.partial") if args.out else None

    def write_partial(so_far: dict) -> None:
        write_json(partial, jsonable({"inputs": inputs, **so_far, "partial": True,
                                       "pending": ["LIC"]}))

    result = evaluate_captions(predictions, labels, human, tuple(args.metrics), args.words,
                               args.classifier, args.preset, args.seeds, args.num_threads,
                               progress_enabled(args.progress), args.biasamp_min_count, args.bert_model,
                               train_caps, on_partial=write_partial if partial else None,
                               max_human_captions=args.max_human_captions, dbac=dbac_opts,
                               attribute=args.attribute)
    if args.attribute == "gender":
        result["reading"] = gender_reading(predictions, labels, result, args.words)
        inputs["n_labelled_predictions_naming_both_genders"] = \
            result["reading"]["n_captions_naming_both"]
    result = jsonable({"inputs": inputs, **result})
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    print(summary_lines(result), file=sys.stderr if args.json else sys.stdout)
    if args.out:
        write_json(args.out, result)
        if partial is not None:
            partial.unlink(missing_ok=True)
    return 0


# --------------------------------------------------------------------------------------------
# libra debias (paper 003 sec. 4): the logic is biaslab.libra


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
                   help="COCO results JSON: [{\"image_id\": int, \"caption\": str}, ...]; a "
                        "regular file of at most 256 MiB")
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
    from biaslab.libra import debias_results
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


# --------------------------------------------------------------------------------------------
# plan: the logic is biaslab.runtime.plan; imported when the command runs


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
    from biaslab.runtime import plan as P
    result = P.plan(P.compose(args.overrides), gpus=args.gpus, gpu=args.gpu)
    print(json.dumps(jsonable(result), indent=2) if args.json else P.format_plan(result))
    return 0


@register_command("components", help="The registered components (biaslab.registry): training "
                  "sets, methods, caption post-processors, backends, captioner architectures, "
                  "built-in and from installed plug-ins, with their table labels.")
def _setup_components(p: argparse.ArgumentParser):
    from biaslab.registry import KINDS
    p.add_argument("--kind", choices=KINDS, help="list only this kind")
    p.add_argument("--json", action="store_true", help="print the entries as JSON")
    return _run_components


def _run_components(args: argparse.Namespace) -> int:
    from biaslab import registry
    out = {}
    for kind, reg in registry.REGISTRIES.items():
        if args.kind and kind != args.kind:
            continue
        out[kind] = [{"name": e.name, "row": e.row, "label": e.display, "order": e.order,
                      "package": reg.origin(e.name), "params": e.params,
                      "claims": dict(e.claims), "doc": e.doc} for e in reg]
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0
    for kind, rows in out.items():
        print(f"{kind}:")
        for r in rows:
            extra = f"  claims {r['claims']}" if r["claims"] else ""
            print(f"  {r['name']:<24} {r['label']:<36} [{r['package']}]{extra}")
    return 0


# --------------------------------------------------------------------------------------------
# reprocheck


@register_command("reprocheck",
                  help="Check this repository's run (its dvc.lock and metrics/) against the "
                       "record committed at a git revision: same bytes on the machine the "
                       "lock was made on, the data stages' bytes and every verdict and number "
                       "within its tolerance on any machine.")
def _setup_reprocheck(p: argparse.ArgumentParser):
    p.add_argument("--repo", default=".", help="the repository root (default: .)")
    p.add_argument("--rev", default="HEAD", help="the git revision whose dvc.lock, metrics/ "
                   "and lock machine are the reference (default: HEAD)")
    p.add_argument("--record-machine", action="store_true",
                   help="instead: write this CPU's identity as the lock's machine "
                        "(benchmarks/results/lock_machine.json), for whoever commits a "
                        "dvc.lock made here")
    p.add_argument("--json", action="store_true", help="print the whole result as JSON")
    return _run_reprocheck


def _run_reprocheck(args: argparse.Namespace) -> int:
    from biaslab.runtime import reprocheck
    root = Path(args.repo).resolve()
    if args.record_machine:
        out = root / reprocheck.LOCK_MACHINE_FILE
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(reprocheck.machine(), indent=1) + "\n")
        tmp.replace(out)
        print(f"biaslab reprocheck: wrote {out}")
        return 0
    if not (root / "dvc.lock").is_file():
        raise InputError(f"{root / 'dvc.lock'}: not found (run `dvc repro` first)")
    try:
        res = reprocheck.check_against_git(root, root, args.rev)
    except (FileNotFoundError, ValueError) as e:
        raise InputError(str(e)) from None
    if args.json:
        print(json.dumps({k: v for k, v in res.items() if k != "drifts"}
                         | {"max_drift": reprocheck.max_drift(res)}, indent=1, default=str))
    else:
        print(reprocheck.summarize(res))
        if not res["comparable"]:
            print(f"nothing compared: no stage has the code and params of {args.rev}'s "
                  f"dvc.lock (this run is of other code; compare with the revision it ran)")
        else:
            print("reproduced" if res["ok"] else "NOT reproduced")
    return 0 if res["ok"] and res["comparable"] else 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
