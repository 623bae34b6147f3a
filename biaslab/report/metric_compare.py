"""Which captioning bias metric sees the planted bias, from the control models
of stage ``controls`` (``metrics/controls.json``), on one run and over the bias sweep.

The controls' known answers give two doses:

* **amplification q** (model side): the stereotype amplifier ``amplifier@q`` adds a known
  amount of gender-context bias to the person oracle's captions at rate q (the same captions,
  drawn from the same stream: :func:`biaslab.analysis.controls.captioner_captions`), so the
  oracle (``person_oracle``) is q = 0. An amplification metric (LIC, BiasAmp, DBA_O, DBAC) should rise with q
  and read its null at q = 0: 0, except BiasAmp, whose null is the test images' own human
  captions' value (``controls.json`` ``biasamp_null``, :func:`biaslab.metrics.biasamp.human_null`).
* **data bias b** (dataset side, over the sweep): the synthetic generator's planted
  context -> gender bias. A metric's dataset term (LIC_D, DBAC's lambda_D) should rise with b.

Definitions (our choices; the papers define the metrics, not this comparison):

* slope d/dq: least squares of the metric's replicate means on q over ``person_oracle``
  (q = 0) and every ``amplifier@q``; where the amplifiers are judged paired with the oracle
  (``controls.json`` ``paired``: the per-replicate differences), over 0 at q = 0 and those
  differences, each dose's CI treated as independent of the others'; its 95 % CI from the replicates' noise: Var = sum w_i^2 se_i^2 with
  w_i = (q_i - mean q) / S_qq and se_i = ci95_i / t_{0.975, n_i - 1}, Student's t with
  Welch-Satterthwaite degrees of freedom (a zero-width CI when every point is exact).
* q detectable: the power section's minimum detectable effect (two rows of n replicates, 5 %
  two-sided, 80 % power; ``controls.json`` "power") divided by the slope: the smallest
  amplification rate that shifts the metric by one MDE, with the interval MDE / (slope's CI
  bounds). None when the slope's CI does not lie above 0 (the metric does not see the
  amplifier at all).
* Over the sweep: the slope per b, then mean ± t CI over the b's; sign agreement = amplifier
  points (b x q) whose verdict "matches" (CI above 0) / all; null false alarms = points of the
  controls expected ~ 0 (``human``, ``person_oracle``) whose verdict "does not match" / all;
  smallest q detected = the smallest q whose amplifier matches at every b.
* Dataset term over b (``person_oracle``'s record: all non-human controls share the human
  references and seeds): least-squares slope on b with the same CI; smallest b detected = the
  smallest b > min b whose CI lies above the smallest b's CI (no overlap).
* Encoders: a metric recomputed with another attacker (``controls.attackers``) has the key
  ``<metric>@<encoder>``; the spread across encoders is the range of their slopes.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from biaslab.runtime import stats

#: (key in controls.json's captioner section, label): the amplification metrics compared
AMPLIFICATION_METRICS = (("LIC", "LIC (thesis Eq. 2.11)"), ("BiasAmp", "BiasAmp"),
                         ("DBA_O", "DBA_O"), ("DBAC_T_to_A", "DBAC T→A (prior)"),
                         ("DBAC_A_to_T", "DBAC A→T (prior)"),
                         ("DBAC_direct_T_to_A", "DBAC T→A (direct)"),
                         ("DBAC_direct_A_to_T", "DBAC A→T (direct)"))
#: the metrics' dataset terms (the attacker on the human captions), compared over the sweep
DATASET_TERMS = (("LIC_D", "LIC_D (LIC's data leakage, %)"),
                 ("DBAC_lambda_D_T_to_A", "DBAC λ_D T→A (direct)"),
                 ("DBAC_lambda_D_A_to_T", "DBAC λ_D A→T (direct)"))
#: controls whose amplification is known to be 0
NULL_CONTROLS = ("human", "person_oracle")
DASH = "–"


def _amplifiers(cap: Mapping[str, Any]) -> list[tuple[float, str]]:
    return sorted((float(n.split("@", 1)[1]), n) for n in cap if n.startswith("amplifier@"))


def _measured(cap: Mapping[str, Any], control: str, key: str,
              field: str = "measured") -> Mapping[str, Any] | None:
    r = (cap.get(control) or {}).get(key)
    m = (r or {}).get(field) if isinstance(r, Mapping) else None
    if not m or m.get("mean") is None or not math.isfinite(float(m["mean"])):
        return None
    return m


def weighted_slope(points: Sequence[tuple[float, Mapping[str, Any]]]) -> dict | None:
    """Least-squares slope of replicate means on a dose, with a 95 % CI from the replicates.

    Args:
        points: ``[(dose, {"mean", "ci95", "n"})]``; ``ci95`` is the t half-width over ``n``
            replicates (``None`` or 0: an exact value). At least two distinct doses.

    Returns:
        ``{"slope", "ci95", "df", "n_points"}`` (``df`` None when every point is exact), or
        None with fewer than two distinct doses.
    """
    from scipy.stats import t
    pts = [(float(x), m) for x, m in points if m is not None and m.get("mean") is not None]
    xs = [x for x, _ in pts]
    if len(set(xs)) < 2:
        return None
    xbar = sum(xs) / len(xs)
    sxx = sum((x - xbar) ** 2 for x in xs)
    w = [(x - xbar) / sxx for x in xs]
    slope = sum(wi * float(m["mean"]) for wi, (_, m) in zip(w, pts))
    terms, dfs = [], []
    for wi, (_, m) in zip(w, pts):
        n, h = int(m.get("n") or 0), m.get("ci95")
        if n >= 2 and h is not None and float(h) > 0:
            se = float(h) / float(t.ppf(0.975, n - 1))
            terms.append(wi * wi * se * se)
            dfs.append(n - 1)
    var = sum(terms)
    if var <= 0:
        return {"slope": slope, "ci95": 0.0, "df": None, "n_points": len(pts)}
    df = var * var / sum(a * a / d for a, d in zip(terms, dfs))
    return {"slope": slope, "ci95": float(t.ppf(0.975, df)) * math.sqrt(var), "df": df,
            "n_points": len(pts)}


def amplification_response(controls: Mapping[str, Any], key: str) -> dict | None:
    """One run's response of captioner metric ``key`` to the amplifier's rate q.

    Returns:
        ``{"slope": weighted_slope(...), "q_detectable": float | None, "q_detectable_ci":
        [lo, hi] | None (MDE over the slope's upper and lower CI bound), "mde": float | None,
        "amplifiers": {"matches", "does not match", "inconclusive", "n"}, "nulls": {...}}``,
        or None when the metric is absent or has fewer than two doses.
    """
    cap = (controls or {}).get("captioner") or {}
    amps = _amplifiers(cap)
    paired = [_measured(cap, n, key, "paired") for _, n in amps]
    if amps and all(paired):
        # paired with the oracle (controls_eval.judge_paired): q = 0 is exactly 0 and each
        # dose the per-replicate difference from the oracle
        pts = [(0.0, {"mean": 0.0, "ci95": 0.0, "n": paired[0].get("n")})] + \
            [(q, m) for (q, _), m in zip(amps, paired)]
    else:
        # q = 0 is the person oracle: the amplifier's captions before it adds the stereotype
        pts = [(0.0, _measured(cap, "person_oracle", key))] + \
            [(q, _measured(cap, n, key)) for q, n in amps]
    sl = weighted_slope([(q, m) for q, m in pts if m is not None])
    if sl is None:
        return None
    mde = ((((controls.get("power") or {}).get("captioner") or {}).get(key)) or {}).get("mde")
    lo = sl["slope"] - sl["ci95"]
    seen = mde is not None and lo > 0
    qd = float(mde) / sl["slope"] if seen else None
    qci = [float(mde) / (sl["slope"] + sl["ci95"]), float(mde) / lo] if seen else None
    return {"slope": sl, "mde": mde, "q_detectable": qd, "q_detectable_ci": qci,
            "amplifiers": _verdicts(cap, [n for _, n in _amplifiers(cap)], key),
            "nulls": _verdicts(cap, NULL_CONTROLS, key)}


def _verdicts(cap: Mapping[str, Any], controls: Sequence[str], key: str) -> dict:
    v = [((cap.get(c) or {}).get(key) or {}).get("verdict") for c in controls]
    v = [x for x in v if x]
    return {"matches": v.count("matches"), "does not match": v.count("does not match"),
            "inconclusive": v.count("inconclusive"), "n": len(v)}


def metric_keys(controls: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """``[(key, label, encoder)]`` of the amplification metrics present in the captioner
    controls, each with its extra encoders (``<key>@<encoder>``) right after it."""
    cap = (controls or {}).get("captioner") or {}
    present = set().union(*[set(ms) for ms in cap.values()]) if cap else set()
    first = ((controls or {}).get("attackers") or ["lstm"])[0]
    out = []
    for key, label in AMPLIFICATION_METRICS:
        if key in present:
            out.append((key, label, first if _is_attacker(key) else DASH))
        out += [(k, label, k.split("@", 1)[1]) for k in sorted(present)
                if k.startswith(key + "@")]
    return out


def _is_attacker(key: str) -> bool:
    return key.startswith(("LIC", "DBAC"))


def _fmt(x: float | None, digits: int) -> str:
    return DASH if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def _slope_cell(sl: Mapping[str, Any] | None, digits: int) -> str:
    if not sl:
        return DASH
    return f"{sl['slope']:.{digits}f} ± {sl['ci95']:.{digits}f}"


def run_markdown(controls: Mapping[str, Any] | None, digits: int = 2) -> str:
    """The default run's table "which captioning metric sees the planted bias": per metric
    and attacker encoder, the controls matched / missed / undecided, the value on the
    strongest amplifier and on the human caption (mean ± 95 % CI over replicates), the slope
    d/dq with its CI and the smallest detectable q (see the module docstring). Empty string
    without captioner controls."""
    cap = (controls or {}).get("captioner") or {}
    if not cap:
        return ""
    amps = _amplifiers(cap)
    top = amps[-1][1] if amps else None
    lines = ["| metric | encoder | controls matched | missed | undecided | "
             f"{top or 'amplifier'} − oracle (paired; expect > 0) | human (expect ≈ null) | "
             "slope d/dq | "
             "q detectable (MDE / slope) [95 % CI] |", "|---|---|---|---|---|---|---|---|---|"]
    for key, label, enc in metric_keys(controls):
        rs = [ms[key] for ms in cap.values() if isinstance(ms.get(key), Mapping)
              and "verdict" in ms[key]]
        if not rs:
            continue
        v = [r["verdict"] for r in rs]
        resp = amplification_response(controls, key) or {}

        def cell(name, field="measured"):
            r = (cap.get(name) or {}).get(key)
            return stats.format_cell(r[field], digits) if isinstance(r, Mapping) and \
                field in r else DASH
        qd, qci = resp.get("q_detectable"), resp.get("q_detectable_ci")
        qcell = ("not seen" if resp and qd is None else _fmt(qd, 2) if qci is None else
                 f"{qd:.2f} [{qci[0]:.2f}, {qci[1]:.2f}]")
        lines.append(f"| {label} | {enc} | {v.count('matches')} | {v.count('does not match')} "
                     f"| {v.count('inconclusive')} | {cell(top, 'paired')} | {cell('human')} | "
                     f"{_slope_cell(resp.get('slope'), digits + 1)} | "
                     f"{qcell} |")
    return "\n".join(lines) if len(lines) > 2 else ""


def sweep_comparison(runs: Mapping[float, Mapping[str, Any]]) -> dict:
    """The comparison over the bias sweep.

    Args:
        runs: planted bias b -> that experiment's ``metrics/controls.json``.

    Returns:
        ``{"amplification": [{"key", "label", "encoder", "slope": {"mean", "ci95", "n"} (over
        b), "sign": {"matches", "n", "wrong"}, "nulls": {"false_alarms", "n"},
        "q_min_detected": float | None, "q_detectable": {"mean", "ci95", "n"}}],
        "dataset": [{"key", "label", "encoder", "slope": weighted_slope over b,
        "b_min_detected": float | None, "values": {b: measured}}],
        "spread": [{"key", "label", "slopes": {encoder: mean slope}, "range"}], "biases"}``.
    """
    bs = sorted(runs)
    keys: dict[str, tuple[str, str]] = {}
    for b in bs:
        for k, label, enc in metric_keys(runs[b]):
            keys.setdefault(k, (label, enc))
    amp = []
    for k, (label, enc) in keys.items():
        per = {b: amplification_response(runs[b], k) for b in bs}
        per = {b: r for b, r in per.items() if r}
        if not per:
            continue
        slopes = [r["slope"]["slope"] for r in per.values()]
        cap_by_b = {b: (runs[b].get("captioner") or {}) for b in per}
        qs = sorted({q for b in per for q, _ in _amplifiers(cap_by_b[b])})
        detected = [q for q in qs if all(
            (((cap_by_b[b].get(f"amplifier@{q:g}") or {}).get(k) or {}).get("verdict")
             == "matches") for b in per)]
        qd = [r["q_detectable"] for r in per.values() if r["q_detectable"] is not None]
        amp.append({
            "key": k, "label": label, "encoder": enc, "biases": sorted(per),
            "slope": stats.record(slopes),
            "sign": {"matches": sum(r["amplifiers"]["matches"] for r in per.values()),
                     "wrong": sum(r["amplifiers"]["does not match"] for r in per.values()),
                     "n": sum(r["amplifiers"]["n"] for r in per.values())},
            "nulls": {"false_alarms": sum(r["nulls"]["does not match"] for r in per.values()),
                      "n": sum(r["nulls"]["n"] for r in per.values())},
            "q_min_detected": detected[0] if detected else None,
            "q_detectable": stats.record(qd) if len(qd) == len(per) else None})
    data = []
    encs = sorted({e for b in bs for e in ((runs[b].get("attackers")) or ["lstm"])})
    first = ((runs[bs[0]].get("attackers") or ["lstm"])[0]) if bs else "lstm"
    for base, label in DATASET_TERMS:
        for enc in [first] + [e for e in encs if e != first]:
            k = base if enc == first else f"{base}@{enc}"
            vals = {b: _measured(runs[b].get("captioner") or {}, "person_oracle", k)
                    for b in bs}
            vals = {b: m for b, m in vals.items() if m is not None}
            sl = weighted_slope(sorted(vals.items()))
            if sl is None:
                continue
            b0 = min(vals)
            top0 = vals[b0]["mean"] + (vals[b0].get("ci95") or 0.0)
            hit = [b for b in sorted(vals) if b > b0 and
                   vals[b]["mean"] - (vals[b].get("ci95") or 0.0) > top0]
            data.append({"key": k, "label": label, "encoder": enc, "slope": sl,
                         "b_min_detected": hit[0] if hit else None,
                         "values": {f"{b:g}": dict(vals[b]) for b in sorted(vals)}})
    spread = []
    for base, label in AMPLIFICATION_METRICS:
        rows = [r for r in amp if r["key"] == base or r["key"].startswith(base + "@")]
        if len(rows) >= 2:
            sl = {r["encoder"]: r["slope"]["mean"] for r in rows}
            spread.append({"key": base, "label": label, "slopes": sl,
                           "slope_records": {r["encoder"]: r["slope"] for r in rows},
                           "range": max(sl.values()) - min(sl.values())})
    return {"amplification": amp, "dataset": data, "spread": spread, "biases": bs}


def sweep_markdown(comp: Mapping[str, Any], digits: int = 3) -> str:
    """Markdown of :func:`sweep_comparison`: the amplification table, the dataset-term table
    and the encoder spread. Empty string when nothing was compared."""
    amp, data = comp.get("amplification") or [], comp.get("dataset") or []
    if not amp and not data:
        return ""
    bs = ", ".join(f"{b:g}" for b in comp.get("biases") or [])
    out = [f"Planted biases b = {bs}. Slopes: least squares over the controls' replicate "
           "means, mean ± 95 % CI (t) over the b's; definitions in "
           "`biaslab/report/metric_compare.py`.", ""]
    if amp:
        out += ["**Amplification (model side): the stereotype amplifier's rate q, human "
                "caption = 0**", "",
                "| metric | encoder | slope d/dq | amplifiers above 0 (b × q) | wrong sign | "
                "null false alarms | smallest q seen at every b | q detectable (MDE / slope) |",
                "|---|---|---|---|---|---|---|---|"]
        for r in amp:
            qd = r["q_detectable"]
            out.append(
                f"| {r['label']} | {r['encoder']} | {stats.format_cell(r['slope'], digits)} | "
                f"{r['sign']['matches']} / {r['sign']['n']} | {r['sign']['wrong']} | "
                f"{r['nulls']['false_alarms']} / {r['nulls']['n']} | "
                f"{DASH if r['q_min_detected'] is None else format(r['q_min_detected'], 'g')}"
                f" | {'not seen at every b' if qd is None else stats.format_cell(qd, 2)} |")
        out.append("")
    if data:
        out += ["**Dataset term: the planted data bias b (person_oracle's record: the human "
                "references)**", "",
                "| term | encoder | slope d/db | smallest b above b = "
                f"{min(comp['biases']):g} | values over b |", "|---|---|---|---|---|"]
        for r in data:
            vals = ", ".join(f"{stats.format_cell(v, 2)}" for v in r["values"].values())
            bmin = DASH if r["b_min_detected"] is None else f"{r['b_min_detected']:g}"
            out.append(f"| {r['label']} | {r['encoder']} | {_slope_cell(r['slope'], digits)}"
                       f" | {bmin} | {vals} |")
        out.append("")
    if comp.get("spread"):
        out += ["**Spread across attacker encoders** (range of the mean slopes d/dq; each "
                "slope mean ± 95 % CI over the b's)", "",
                "| metric | slopes | range |", "|---|---|---|"]
        for r in comp["spread"]:
            sl = ", ".join(f"{e} {stats.format_cell(v, digits)}"
                           for e, v in r["slope_records"].items())
            out.append(f"| {r['label']} | {sl} | {r['range']:.{digits}f} |")
        out.append("")
    return "\n".join(out)
