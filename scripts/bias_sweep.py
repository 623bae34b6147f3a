"""Dose-response sweep: the bias metrics against the planted bias.

usage (after set-up, from the repository root):
    python scripts/bias_sweep.py --run --collect                # b in 0, 0.3, 0.6, 0.9
    python scripts/bias_sweep.py --run --biases 0,0.9 --seeds 0,1,2
    python scripts/bias_sweep.py --collect                      # redraw from finished runs
    python scripts/bias_sweep.py --run --controls --collect     # the control models only

--run queues one `dvc exp run --queue -S synthetic.bias=B -n sweep-bB` per bias (extra `-S`
overrides, e.g. `-S generate.backend=copy_paste`, go to every experiment; `--seeds` sets
`classifier.seeds` and `captioner.seeds`) and runs the queue (`dvc exp run --run-all`). Each
experiment is a whole pipeline on the synthetic default (about 15 min on 2 cores).

--collect reads every experiment's params and metrics (`dvc exp show --json`) and writes
plots/report/bias_sweep.md (one table per metric: variants x planted bias, mean ± 95 % CI),
plots/report/bias_sweep.png (one panel per metric, one line per variant) and
plots/report/bias_sweep.json (the points and the validity checks at b = 0, which the report
stage merges into metrics/validity.json when present).

--controls runs only the stages the control models need (`dvc exp run
--queue controls -n ctl-bB`: synthesize, prepare, label_gender, split, controls; about 40 s
per bias instead of 15 min) at b = 0, 0.3, 0.6, 0.8, 0.9 unless --biases says otherwise.
--collect then adds the section "Metric response (control models)" to bias_sweep.md: each
metric of each control against b, and which metrics' context-reader curves stay flat while the
planted bias grows (they cannot see it on this data). Controls-only experiments never count as
trained-model points (their other metrics files are the baseline's).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from biaslab import report as R  # noqa: E402
from biaslab.analysis import sweep as S  # noqa: E402
from biaslab.runtime.io import atomic_path, write_json  # noqa: E402


def _floats(text: str, name: str) -> list[float]:
    try:
        vals = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"bias_sweep: --{name}: expected comma-separated numbers, got {text!r}")
    if not vals:
        raise SystemExit(f"bias_sweep: --{name}: empty list")
    return vals


def run(biases: list[float], seeds: list[int] | None, overrides: list[str],
        controls: bool = False) -> None:
    for b in biases:
        if not 0.0 <= b <= 1.0:
            raise SystemExit(f"bias_sweep: --biases: {b} is outside [0, 1]")
    extra = []
    for o in overrides:
        extra += ["-S", o]
    if seeds is not None:
        s = "[" + ",".join(str(x) for x in seeds) + "]"
        extra += ["-S", f"classifier.seeds={s}", "-S", f"captioner.seeds={s}"]
    for b in biases:
        name = f"{S.CONTROLS_PREFIX}b{b:g}" if controls else f"sweep-b{b:g}"
        cmd = ["dvc", "exp", "run", "--queue", *(["controls"] if controls else []), "-n",
               name, "-S", f"synthetic.bias={b:g}", *extra]
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, cwd=ROOT, check=True)
    subprocess.run(["dvc", "exp", "run", "--run-all"], cwd=ROOT, check=True)


def collect(out_dir: Path) -> str:
    from biaslab.report.dvcview import exp_show
    shown = exp_show(ROOT)
    points = S.sweep_points(shown)
    ctl = S.control_points(shown)
    if not points and not ctl:
        raise SystemExit("bias_sweep: no experiment with synthetic.bias and metrics found "
                         "(run with --run first)")
    kept = 0
    old = out_dir / "bias_sweep.json"
    if old.is_file():   # trained-model points of biases not run here: kept from the last collect
        import json
        have = {p["bias"] for p in points}
        prev = [p for p in json.loads(old.read_text(encoding="utf-8")).get("points") or []
                if p["bias"] not in have]
        kept = len({p["bias"] for p in prev})
        points = sorted(points + prev, key=lambda p: (p["metric"], p["row"], p["bias"]))
    checks = S.bias0_checks(points)
    md = ["# Dose-response: bias metrics against the planted bias", "",
          "Each cell: mean ± 95 % CI over seeds (t), from one DVC experiment per planted bias b "
          "(`python scripts/bias_sweep.py --run --collect`). Unbiased values in the headings.",
          *([f"Trained-model points of {kept} planted bias(es) come from an earlier collect "
             "(kept in bias_sweep.json; their `experiment` names the run): re-run them with "
             "`--run` to refresh.", ""] if kept else []),
          "", S.sweep_markdown(points)]
    if checks:
        md += ["## Validity at b = 0", "",
               "Checked: Leakage and the probe sensitivities ≈ 0, Ratio r ≈ 1 (an infinite r "
               "fails). LIC, Error and BiasAmp are drawn above but not checked: Error counts "
               "wrong-gender captions (> 0 for any imperfect captioner at any bias) and nothing "
               "states LIC or BiasAmp vanish on a finite sample (biaslab.analysis.sweep.BIAS0_CHECKED).",
               "", "| check | measured [95 % CI] | verdict |", "|---|---|---|"]
        for c in checks:
            meas = f"∞ ({c['n_inf']}/{c['n']} seeds)" if c.get("n_inf") else \
                "–" if c["mean"] is None else (
                f"{c['mean']:.2f}" + (f" [{c['lo']:.2f}, {c['hi']:.2f}]"
                                      if c["lo"] is not None else ""))
            md.append(f"| {c['claim']} | {meas} | {c['verdict']} |")
        md.append("")
    if ctl:
        md += ["## Metric response (control models)", "",
               "The control models of stage `controls` (biaslab/analysis/controls.py: bias known by "
               "construction, no training) at each planted bias, through the same metric code "
               "as the trained models above (`python scripts/bias_sweep.py --run --controls "
               "--collect`; mean ± 95 % CI over the controls' replicates). Exact expectations "
               "and verdicts per bias: metrics/controls.json of each experiment.", "",
               S.control_markdown(ctl)]
    comp = None
    runs = S.control_runs(shown)
    if runs:
        from biaslab.report import metric_compare as MC
        comp = MC.sweep_comparison(runs)
        text = MC.sweep_markdown(comp)
        if text:
            md += ["## Which captioning metric sees the planted bias", "",
                   "The amplification metrics against the stereotype amplifier's known rate q "
                   "(the human caption is q = 0) at every planted bias b, and their dataset "
                   "terms against b; extra attacker encoders from `controls.attackers` "
                   "(`python scripts/bias_sweep.py --run --controls --collect -S "
                   "'controls.attackers=[bert_pre]'`).", "", text]
    prov = R.made_by("scripts/bias_sweep.py", ROOT)
    text = R.stamp("\n".join(md), prov)   # it outlives runs of other profiles
    out_dir.mkdir(parents=True, exist_ok=True)
    with atomic_path(out_dir / "bias_sweep.md") as tmp:
        tmp.write_text(text, encoding="utf-8")
    write_json(out_dir / "bias_sweep.json", {"points": points, "checks": checks,
                                             "controls": ctl, "made_by": prov,
                                             "metric_comparison": comp,
                                             "control_response": S.control_response(ctl)})
    if points:
        S.plot_sweep(points, out_dir / "bias_sweep.png")
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--run", action="store_true", help="queue and run one experiment per bias")
    ap.add_argument("--collect", action="store_true", help="write the sweep from dvc exp show")
    ap.add_argument("--biases", default=None,
                    help="planted biases in [0, 1] (default 0,0.3,0.6,0.9; with --controls "
                         "0,0.3,0.6,0.8,0.9)")
    ap.add_argument("--controls", action="store_true",
                    help="run only the control models' stages per bias (about 40 s each)")
    ap.add_argument("--seeds", default=None,
                    help="classifier and captioner seeds, e.g. 0,1,2 (default: params.yaml's)")
    ap.add_argument("-S", dest="overrides", action="append", default=[],
                    help="extra `dvc exp run -S` override for every experiment")
    ap.add_argument("--out-dir", default=str(ROOT / "plots" / "report"))
    a = ap.parse_args(argv)
    if not (a.run or a.collect):
        ap.error("give --run and/or --collect")
    if a.run:
        seeds = [int(x) for x in _floats(a.seeds, "seeds")] if a.seeds else None
        biases = a.biases or ("0,0.3,0.6,0.8,0.9" if a.controls else "0,0.3,0.6,0.9")
        run(_floats(biases, "biases"), seeds, a.overrides, a.controls)
    if a.collect:
        print(collect(Path(a.out_dir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
