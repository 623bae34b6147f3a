"""The reproducibility check: what a fresh run must share with the committed record.

What a user needs from a re-run is the same conclusions, and what DVC needs is the same bytes
where it caches. The default numeric mode (``standard``, :mod:`biaslab.runtime.numerics`)
runs torch at native speed, so the promise is in three parts:

1. **Same machine, same bytes.** On a machine whose CPU identity (:func:`machine`: vendor,
   model, the ISA extensions the numeric libraries dispatch on, cache sizes) equals the one
   the committed ``dvc.lock`` was made on (:data:`LOCK_MACHINE_FILE`), every stage whose
   inputs equal the lock's must give byte-identical outs.
2. **Any machine, same bytes for the data stages** (:data:`EXACT_STAGES`): they run NumPy,
   PIL and OpenCV on the pinned paths only, so given equal inputs their outs are identical
   on any x86-64 CPU with AVX2 + FMA.
3. **Any machine, same conclusions**: every ``verdict`` of ``metrics/*.json`` identical (any
   string without digits must be equal), and every number of every metrics file within the
   tolerance of :func:`tolerance` of the committed value. The one exception is a *fragile*
   verdict (:func:`fragile_verdicts`): a check whose CI bound lay within the tolerance of its
   threshold in the record may flip when its numbers move within their tolerance; the check
   reports it (``fragile_flips``) instead of failing, since the record never decided it
   beyond last-bit noise. A check record is flat (``lo``, ``hi``, ``reference``;
   ``metrics/validity.json``) or nested (``expected.reference``, ``measured`` or ``paired``
   with ``mean``, ``ci95``, ``std``, ``n``, an equivalence ``margin``;
   ``metrics/controls.json``, whose 90 % bounds are recomputed from ``std`` and ``n``). What
   follows from such a flip is not a new conclusion either: a list of names (a metric's
   inconclusive controls) may change by the names whose verdicts flipped fragilely.

Which stages are compared. A stage is *comparable* when its own code deps (files no stage
writes: ``biaslab/``, ``stages/``, ``requirements.lock``, raw data) and params equal the
reference lock's, and so are those of every stage upstream of it; its data deps may differ
(another CPU's last bits). A working tree ahead of its lock therefore compares only what its
changes cannot have moved.

The tolerance, in one place (:data:`TOLERANCE`), in units of the uncertainty each number
carries:

* a mean or bound of a record with a 95 % CI (``ci95``, or ``lo`` / ``hi``): at most
  ``TOLERANCE["ci_fraction"]`` of the reference's CI half-width; a number ``X`` with its own
  ``X_lo`` / ``X_hi`` (a relative change ``pct`` beside the absolute ``delta``) by its own
  half-width, since its units are not the record's;
* an equivalence margin's ``delta`` as a bound of the CI it is compared with, and its
  ``effect`` as that divided by ``fraction``: the effect is the mean of another record,
  checked there with its own CI, and here only sets where the verdict changes;
* a value of one training seed (a record with a ``seed`` key): at most
  ``TOLERANCE["seed_fraction"]`` of the standard deviation of the same key over the
  reference's seeds of that list;
* a number in a text (``"Δ-9.7±1.2"``, a verdict's reason): as its record would be, and at
  least one unit of the last digit printed;
* any other number: ``max(TOLERANCE["abs"], TOLERANCE["rel"] * |reference|)``.

Why these values: ``benchmarks/results/reprocheck_drift.json`` records the largest drift of
each kind measured between machines (simulated ISA caps, 1 vs 2 workers, portable vs
standard numerics) and the tolerances are set above it and below each metric's noise floor
(``docs/reproducibility.md``).
"""
from __future__ import annotations

import json
import math
import re
import subprocess
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from biaslab.runtime import lockcheck, stats

#: Stages whose outs must be byte-identical on any x86-64 AVX2 + FMA CPU given equal inputs:
#: they compute on NumPy, PIL and OpenCV only, whose float paths the ``standard`` mode pins.
#: Every other stage runs torch at native speed and is checked by its numbers.
EXACT_STAGES: tuple[str, ...] = ("synthesize", "prepare", "label_gender", "split", "masks",
                                 "generate")

#: The declared tolerances (module docstring; the measured drift they rest on is in
#: ``benchmarks/results/reprocheck_drift.json``).
TOLERANCE: dict[str, float] = {
    "ci_fraction": 0.5,
    "seed_fraction": 1.0,
    "rel": 0.05,
    "abs": 1e-6,
}

#: The CPU identity of the machine the committed ``dvc.lock`` was made on (repository-relative).
LOCK_MACHINE_FILE = "benchmarks/results/lock_machine.json"

#: CPU flags that decide the numeric libraries' dispatch (ATen, oneDNN, MKL, OpenBLAS, NumPy).
_DISPATCH_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl",
                   "avx512dq", "avx512cd", "avx512_vnni", "avx512_bf16", "avx512_fp16",
                   "avx512vbmi", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8")

_NUM = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def machine(cpuinfo: str | None = None, cache_dir: str | Path = "/sys/devices/system/cpu/cpu0/cache"
            ) -> dict:
    """This CPU's identity for the same-machine promise: ``vendor``, ``model``, the dispatch
    flags it has (sorted) and its cache sizes (oneDNN blocks by them).

    Args:
        cpuinfo: the text of ``/proc/cpuinfo`` (read when None).
        cache_dir: sysfs directory of cpu0's caches.

    Returns:
        ``{"vendor": str, "model": str, "flags": [str], "caches": [str]}`` (empty values where
        the system does not say)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            cpuinfo = ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            fields.setdefault(k.strip(), v.strip())
    flags = set(fields.get("flags", "").split())
    caches = []
    for d in sorted(Path(cache_dir).glob("index*")):
        try:
            caches.append(f"L{(d / 'level').read_text().strip()}"
                          f"{(d / 'type').read_text().strip()[0]}:"
                          f"{(d / 'size').read_text().strip()}")
        except OSError:
            continue
    return {"vendor": fields.get("vendor_id", ""), "model": fields.get("model name", ""),
            "flags": sorted(flags & set(_DISPATCH_FLAGS)), "caches": caches}


def tolerance(reference: float, *, half_width: float | None = None,
              seed_std: float | None = None, digits: int | None = None) -> float:
    """The largest difference allowed between a fresh number and its reference.

    Args:
        reference: the committed value.
        half_width: the reference record's 95 % CI half-width, when the number is its mean or
            a bound.
        seed_std: the standard deviation of this key over the reference's seeds, when the
            number is one seed's value.
        digits: decimals printed, when the number was read from a text (rounding moves it by
            up to one unit of the last digit).

    Returns:
        The tolerance (>= 0), from :data:`TOLERANCE` (module docstring)."""
    if half_width is not None and math.isfinite(half_width) and half_width > 0:
        tol = TOLERANCE["ci_fraction"] * half_width
    elif seed_std is not None and math.isfinite(seed_std) and seed_std > 0:
        tol = TOLERANCE["seed_fraction"] * seed_std
    else:
        tol = max(TOLERANCE["abs"], TOLERANCE["rel"] * abs(reference))
    if digits is not None:
        tol = max(tol, 10.0 ** -digits)
    return tol


def _half_width(rec: Mapping) -> float | None:
    v = rec.get("ci95")
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return float(v)
    lo, hi = rec.get("lo"), rec.get("hi")
    if isinstance(lo, (int, float)) and isinstance(hi, (int, float)):
        return (float(hi) - float(lo)) / 2
    return None


def _seed_stds(items: list) -> dict[str, float]:
    """Std over a list of per-seed records, per numeric key."""
    recs = [r for r in items if isinstance(r, Mapping) and "seed" in r]
    if len(recs) < 2:
        return {}
    out = {}
    for k in recs[0]:
        vals = [r.get(k) for r in recs]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
               for v in vals):
            m = sum(vals) / len(vals)
            out[k] = math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1))
    return out


_PM = re.compile(r"(?P<a>" + _NUM.pattern + r")\s*±\s*(?P<b>" + _NUM.pattern + r")")
_BRACKET = re.compile(r"\[\s*(?P<a>" + _NUM.pattern + r")\s*,\s*(?P<b>" + _NUM.pattern
                      + r")\s*\]")


def _text_numbers(s: str) -> tuple[str, list[tuple[float, int, float | None]]]:
    """The text with every number replaced by ``#``, and the numbers as ``(value, decimals
    printed, CI half-width it carries or None)``: ``x±h`` carries ``h`` (for ``x`` and ``h``),
    ``[lo, hi]`` carries ``(hi - lo) / 2``."""
    carried: dict[int, float] = {}
    for m in _PM.finditer(s):
        h = abs(float(m.group("b")))
        carried[m.start("a")] = carried[m.start("b")] = h
    for m in _BRACKET.finditer(s):
        h = abs(float(m.group("b")) - float(m.group("a"))) / 2
        carried[m.start("a")] = carried[m.start("b")] = h
    nums = []
    for m in _NUM.finditer(s):
        t = m.group(0)
        frac = t.split("e")[0].split("E")[0]
        nums.append((float(t), len(frac.split(".")[1]) if "." in frac else 0,
                     carried.get(m.start())))
    return _NUM.sub("#", s), nums


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


#: The level of the one-sided tests an equivalence verdict is decided by (the 90 % CI of
#: ``biaslab.analysis.equivalence.EQUIVALENCE_LEVEL``).
_EQUIVALENCE_LEVEL = 0.90


def _judged(rec: Mapping) -> Mapping | None:
    """The CI record a nested check record (``{"expected": {"reference", ...}, "measured":
    {"mean", "ci95", "std", "n"}, "paired"?, "margin"?}``, ``metrics/controls.json``) is
    decided on: ``paired`` where present (a control judged against its base), else
    ``measured``; None for any other record."""
    e = rec.get("expected")
    if not isinstance(e, Mapping) or not _finite(e.get("reference")):
        return None
    m = rec.get("paired") if isinstance(rec.get("paired"), Mapping) else rec.get("measured")
    if not isinstance(m, Mapping) or not (_finite(m.get("mean")) and _finite(m.get("ci95"))):
        return None
    return m


def _check_bounds(rec: Mapping) -> tuple[float, float, list[float], float] | None:
    """``(lo, hi, 90 % bounds, reference)`` of a check record: flat (``lo``, ``hi``,
    ``lo90``/``hi90``, ``reference``; ``metrics/validity.json``) or nested (:func:`_judged`:
    the mean -+ ``ci95``, and the 90 % t interval from its ``std`` and ``n``, as
    ``controls_eval`` decides it); None for any other record."""
    lo, hi, ref = rec.get("lo"), rec.get("hi"), rec.get("reference")
    if all(_finite(v) for v in (lo, hi, ref)):
        return lo, hi, [rec[k] for k in ("lo90", "hi90") if _finite(rec.get(k))], ref
    m = _judged(rec)
    if m is None:
        return None
    mean, hw = float(m["mean"]), float(m["ci95"])
    inner = []
    if _finite(m.get("std")) and isinstance(m.get("n"), int):
        h90 = stats.t_halfwidth(float(m["std"]), m["n"], _EQUIVALENCE_LEVEL)
        if h90 is not None:
            inner = [mean - h90, mean + h90]
    return mean - hw, mean + hw, inner, float(rec["expected"]["reference"])


def _decision_distance(rec: Mapping) -> tuple[float, float] | None:
    """``(distance, half_width)`` of a check record (:func:`_check_bounds`): the distance of
    the nearest CI bound (the 95 % and, where present, the 90 % one) to the nearest point
    where its verdict changes (the reference and, with an equivalence ``margin``,
    ``reference -+ margin.delta``; ``biaslab.analysis.equivalence.decide``) and the 95 % CI's
    half-width; None for any other record."""
    cb = _check_bounds(rec)
    if cb is None or cb[1] < cb[0]:
        return None
    lo, hi, inner, ref = cb
    bounds = [lo, hi] + inner
    points = [ref]
    delta = (rec.get("margin") or {}).get("delta") if isinstance(rec.get("margin"), Mapping) \
        else None
    if _finite(delta):
        points += [ref - delta, ref + delta]
    return min(abs(b - p) for b in bounds for p in points), (hi - lo) / 2


def _own_half_widths(rec: Mapping) -> dict[str, float]:
    """``{key: half-width}`` for the numbers of a record that carry a CI of their own: ``X``,
    ``X_lo`` and ``X_hi`` where all three are numbers (e.g. a relative change ``pct`` beside
    the absolute ``delta`` whose ``lo`` / ``hi`` the record's other numbers share): their
    units are not the record's, so neither is their tolerance."""
    out = {}
    for k, v in rec.items():
        if not isinstance(k, str) or not _finite(v):
            continue
        lo, hi = rec.get(f"{k}_lo"), rec.get(f"{k}_hi")
        if _finite(lo) and _finite(hi) and hi >= lo:
            out[k] = out[f"{k}_lo"] = out[f"{k}_hi"] = (hi - lo) / 2
    return out


def _delta_drift(a: Mapping, b: Mapping) -> float:
    """How far a check record's equivalence ``margin.delta`` moved between the reference
    ``a`` and the fresh ``b`` (0 without one)."""
    da = (a.get("margin") or {}).get("delta") if isinstance(a.get("margin"), Mapping) else None
    db = (b.get("margin") or {}).get("delta") if isinstance(b.get("margin"), Mapping) else None
    return abs(db - da) if _finite(da) and _finite(db) else 0.0


def _fragile_margin(rec: Mapping) -> tuple[float, float] | None:
    """``(margin, tolerance)`` of a check record (:func:`_decision_distance`): the distance
    of its nearest CI bound to a point where its verdict changes, and the tolerance of a
    bound; None for any other record."""
    d = _decision_distance(rec)
    return None if d is None else (d[0], TOLERANCE["ci_fraction"] * d[1])


def compare_numbers(reference, fresh, path: str = "") -> tuple[list[dict], list[dict]]:
    """Walk two metrics documents side by side.

    A changed ``verdict`` fails, except a *fragile* one: in a check record with ``lo``,
    ``hi`` and a numeric ``reference`` threshold whose nearest bound lies within the bound's
    tolerance of the threshold (so a drift the tolerance allows can cross it), and whose
    numbers all stay within their tolerance. Such a flip is recorded as a drift of kind
    ``verdict`` (``drift``: the reference's margin, ``tolerance``: the bound's tolerance).
    The ``sign`` of a CI record's mean is judged the same way: it may flip only where the
    reference mean lay within the mean's tolerance of 0.

    Returns:
        ``(failures, drifts)``: each failure ``{"key", "reference", "fresh", "tolerance",
        "why"}`` (a number beyond its tolerance, a changed text or verdict, a key or list
        item on one side only, a type change); each drift ``{"key", "reference", "fresh",
        "drift", "tolerance", "kind"}`` for every number compared (``kind``: ``ci``,
        ``seed``, ``other``; ``verdict`` for a fragile flip), for the record of measured
        drift."""
    fails: list[dict] = []
    drifts: list[dict] = []
    context: dict[int, list[str]] = {}   # id(list of names) -> its record's string fields

    def margin_numbers(a, b, key, check_hw):
        # a margin copies a fraction of an effect that its own record reports with its CI
        # (checked there); here it only sets the decision points, so a drift of ``delta``
        # is judged as a drift of the bound it is compared with (the check's CI), and one of
        # ``effect`` as that divided by ``fraction``
        f = a.get("fraction")
        for k in sorted(set(a) | set(b), key=str):
            sub = f"{key}.{k}"
            if k not in a or k not in b:
                fails.append({"key": sub, "reference": a.get(k), "fresh": b.get(k),
                              "tolerance": None, "why": "on one side only"})
            elif k == "delta":
                walk(a[k], b[k], sub, hw=check_hw, kind="ci")
            elif k == "effect" and _finite(f) and f > 0:
                walk(a[k], b[k], sub, hw=check_hw / f, kind="ci")
            else:
                walk(a[k], b[k], sub)

    def num(key, a, b, *, hw=None, sd=None, digits=None, kind="other"):
        tol = tolerance(a, half_width=hw, seed_std=sd, digits=digits)
        if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
            return
        if a == b:
            drifts.append({"key": key, "reference": a, "fresh": b, "drift": 0.0,
                           "tolerance": tol, "kind": kind})
            return
        d = abs(b - a) if math.isfinite(a) and math.isfinite(b) else math.inf
        drifts.append({"key": key, "reference": a, "fresh": b, "drift": d, "tolerance": tol,
                       "kind": kind})
        if not d <= tol:
            fails.append({"key": key, "reference": a, "fresh": b, "tolerance": tol,
                          "why": "number beyond its tolerance"})

    def walk(a, b, key, hw=None, sd=None, kind="other"):
        if isinstance(a, bool) or isinstance(b, bool):
            if a != b:
                fails.append({"key": key, "reference": a, "fresh": b, "tolerance": None,
                              "why": "changed"})
            return
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            num(key, float(a), float(b), hw=hw, sd=sd, kind=kind)
            return
        if isinstance(a, str) and isinstance(b, str):
            sa, na = _text_numbers(a)
            sb, nb = _text_numbers(b)
            if sa != sb or len(na) != len(nb):
                fails.append({"key": key, "reference": a, "fresh": b, "tolerance": None,
                              "why": "verdict changed" if key.endswith("verdict")
                              else "text changed"})
                return
            for i, ((x, dx, hx), (y, _, _)) in enumerate(zip(na, nb)):
                if hx is not None:
                    num(f"{key}#{i}", x, y, hw=hx, digits=dx, kind="ci")
                else:
                    num(f"{key}#{i}", x, y, hw=hw, sd=sd, digits=dx, kind=kind)
            return
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            h = _half_width(a)
            names = [v for v in a.values() if isinstance(v, str)]
            for v in a.values():
                if isinstance(v, list):
                    context[id(v)] = names
            va, vb = a.get("verdict"), b.get("verdict")
            if isinstance(va, str) and isinstance(vb, str) and va != vb:
                # a flip is forgiven only where the record's own numbers stay within their
                # tolerance and the reference's bound lay within that tolerance of the threshold
                inner_f, inner_d = compare_numbers({k: v for k, v in a.items() if k != "verdict"},
                                                   {k: v for k, v in b.items() if k != "verdict"},
                                                   key)
                margin = _fragile_margin(a)
                if margin is not None:
                    # a margin that moved (within its tolerance) moves the decision points too
                    margin = (margin[0], margin[1] + _delta_drift(a, b))
                vkey = f"{key}.verdict" if key else "verdict"
                if not inner_f and margin is not None and margin[0] <= margin[1]:
                    drifts.extend(inner_d)
                    drifts.append({"key": vkey, "reference": va, "fresh": vb,
                                   "drift": margin[0], "tolerance": margin[1],
                                   "kind": "verdict"})
                else:
                    fails.extend(inner_f)
                    drifts.extend(inner_d)
                    fails.append({"key": vkey, "reference": va, "fresh": vb,
                                  "tolerance": None, "why": "verdict changed"})
                return
            own = _own_half_widths(a)
            judged = _judged(a)
            for k in sorted(set(a) | set(b), key=str):
                sub = f"{key}.{k}" if key else str(k)
                if k not in a or k not in b:
                    fails.append({"key": sub, "reference": a.get(k), "fresh": b.get(k),
                                  "tolerance": None, "why": "on one side only"})
                    continue
                if k in own:
                    walk(a[k], b[k], sub, hw=own[k], kind="ci")
                elif (k == "margin" and judged is not None and isinstance(a[k], Mapping)
                        and isinstance(b[k], Mapping)):
                    margin_numbers(a[k], b[k], sub, float(judged["ci95"]))
                elif h is not None and k == "sign" and a[k] != b[k]:
                    # the sign of a mean is as decided as the mean: a flip is fragile where
                    # the reference mean lay within its own tolerance of 0
                    m, tol = a.get("mean"), TOLERANCE["ci_fraction"] * h
                    if isinstance(m, (int, float)) and abs(m) <= tol:
                        drifts.append({"key": sub, "reference": a[k], "fresh": b[k],
                                       "drift": abs(m), "tolerance": tol, "kind": "verdict"})
                    else:
                        fails.append({"key": sub, "reference": a[k], "fresh": b[k],
                                      "tolerance": None, "why": "sign changed"})
                elif h is not None and k not in ("n", "n_boot", "n_seeds", "n_pairs", "seed"):
                    walk(a[k], b[k], sub, hw=h, kind="ci")
                elif isinstance(sd, Mapping) and k in sd:
                    walk(a[k], b[k], sub, sd=sd[k], kind="seed")
                else:
                    walk(a[k], b[k], sub)
            return
        if isinstance(a, list) and isinstance(b, list):
            if (a != b and all(isinstance(x, str) for x in a + b)
                    and sorted(_text_numbers(x)[0] for x in a)
                    != sorted(_text_numbers(x)[0] for x in b)):
                # a list of names (e.g. the inconclusive controls): judged by name in check()
                fails.append({"key": key, "reference": a, "fresh": b, "tolerance": None,
                              "why": "items changed", "items": sorted(set(a) ^ set(b)),
                              "context": context.get(id(a), [])})
                return
            if len(a) != len(b):
                fails.append({"key": key, "reference": f"{len(a)} items",
                              "fresh": f"{len(b)} items", "tolerance": None,
                              "why": "list length changed"})
                return
            stds = _seed_stds(a)
            for i, (x, y) in enumerate(zip(a, b)):
                walk(x, y, f"{key}[{i}]", sd=stds or None)
            return
        if a is None and b is None:
            return
        if a != b:
            fails.append({"key": key, "reference": a, "fresh": b, "tolerance": None,
                          "why": "type changed"})

    walk(reference, fresh, path)
    return fails, drifts


def _deps(st: Mapping) -> dict:
    return {d["path"]: d.get("md5") for d in st.get("deps", [])}


def _written(lock: Mapping) -> list[str]:
    return [o["path"].rstrip("/") for st in lock.values() for o in st.get("outs", [])]


def _is_data(path: str, written: Iterable[str]) -> bool:
    p = path.rstrip("/")
    return any(p == w or p.startswith(w + "/") or w.startswith(p + "/") for w in written)


def comparable(fresh: Mapping, reference: Mapping, ignore_params: Iterable[str] = ()
               ) -> tuple[list[str], list[str]]:
    """Stages whose code deps and params, and those of every stage upstream, equal the
    reference lock's (module docstring).

    Args:
        fresh, reference: ``{stage: lock entry}`` (:func:`biaslab.runtime.lockcheck.stages`).
        ignore_params: parameter names left out (``workers``: never changes an out).

    Returns:
        ``(comparable, skipped)`` stage names, in ``fresh``'s order."""
    ignore = frozenset(ignore_params)
    written = _written(fresh)
    producer = {}
    for name, st in fresh.items():
        for o in st.get("outs", []):
            producer[o["path"].rstrip("/")] = name

    def own_inputs(st):
        code = {p: m for p, m in _deps(st).items() if not _is_data(p, written)}
        return code, lockcheck.drop(st.get("params") or {}, ignore)

    own_ok = {n: (n in reference and own_inputs(st) == own_inputs(reference[n]))
              for n, st in fresh.items()}
    memo: dict[str, bool] = {}

    def ok(n, seen=()):
        if n in memo:
            return memo[n]
        if n in seen:
            return own_ok.get(n, False)
        good = own_ok.get(n, False)
        if good:
            for p in _deps(fresh[n]):
                p = p.rstrip("/")
                ups = {producer[w] for w in producer
                       if p == w or p.startswith(w + "/") or w.startswith(p + "/")}
                if any(u != n and not ok(u, seen + (n,)) for u in ups):
                    good = False
                    break
        memo[n] = good
        return good

    yes = [n for n in fresh if ok(n)]
    return yes, [n for n in fresh if n not in yes]


def _metric_files(st: Mapping) -> list[str]:
    return [o["path"] for o in st.get("outs", [])
            if o["path"].startswith("metrics/") and o["path"].endswith(".json")]


def check(fresh_lock: Mapping, reference_lock: Mapping, read_fresh: Callable[[str], str],
          read_reference: Callable[[str], str], same_machine: bool,
          ignore_params: Iterable[str] = ("workers",)) -> dict:
    """The three promises of the module docstring for one fresh run.

    Args:
        fresh_lock, reference_lock: ``{stage: lock entry}``.
        read_fresh, read_reference: the text of a repository-relative file in the fresh run /
            the reference (e.g. ``git show HEAD:<path>``); they raise ``FileNotFoundError``.
        same_machine: the fresh run's :func:`machine` equals the lock's.

    Returns:
        ``{"same_machine", "comparable", "skipped", "bytes_compared", "bytes_differ",
        "files_compared", "failures", "drifts", "fragile_flips", "ok"}``: ``bytes_differ`` lists
        ``"stage: path"`` outs that should be identical and are not; ``failures`` the numbers,
        verdicts and texts of comparable stages' metrics files beyond :func:`tolerance`, each
        with the file, key, both values and the tolerance."""
    ok_stages, skipped = comparable(fresh_lock, reference_lock, ignore_params)
    exact = lockcheck.compare({n: fresh_lock[n] for n in ok_stages}, reference_lock,
                              ignore_params)
    must = [n for n in exact["compared"] if same_machine or n.split("@")[0] in EXACT_STAGES]
    differ = [d for d in exact["differ"] if d.split(":")[0] in must]
    failures: list[dict] = []
    drifts: list[dict] = []
    files = []
    for n in ok_stages:
        for f in _metric_files(fresh_lock[n]):
            try:
                ref = json.loads(read_reference(f))
            except FileNotFoundError:
                continue
            try:
                new = json.loads(read_fresh(f))
            except FileNotFoundError:
                failures.append({"file": f, "key": "", "reference": "present",
                                 "fresh": "missing", "tolerance": None, "why": "missing"})
                continue
            files.append(f)
            fl, dr = compare_numbers(ref, new)
            failures += [{"file": f, "stage": n, **x} for x in fl]
            drifts += [{"file": f, "stage": n, **x} for x in dr]
    failures, forgiven = _names_of_fragile_flips(failures, drifts)
    drifts += forgiven
    return {"same_machine": same_machine, "comparable": ok_stages, "skipped": skipped,
            "bytes_compared": must, "bytes_differ": differ, "files_compared": files,
            "failures": failures, "drifts": drifts,
            "fragile_flips": [d for d in drifts if d["kind"] == "verdict"],
            "ok": not differ and not failures}


def _names_of_fragile_flips(failures: list[dict], drifts: list[dict]
                            ) -> tuple[list[dict], list[dict]]:
    """A list of names that changed (``why`` "items changed", e.g. validity's inconclusive
    controls of one metric) is a consequence, not a new conclusion, where every name that
    came or went is one whose verdict flipped fragilely in any metrics file: a flip whose
    key holds the name and every string field of the list's record (its task and metric).
    Such a change becomes a drift of kind ``verdict``; the rest stay failures.

    Returns:
        ``(failures, forgiven drifts)``."""
    flips = [set(d["key"].split(".")) for d in drifts if d["kind"] == "verdict"]
    keep, forgiven = [], []
    for f in failures:
        if f.get("why") == "items changed" and all(
                any({x, *f.get("context", [])} <= parts for parts in flips)
                for x in f.get("items", [])):
            forgiven.append({k: f[k] for k in ("file", "stage", "key", "reference", "fresh")}
                            | {"drift": 0.0, "tolerance": 0.0, "kind": "verdict",
                               "why": "the names of fragile flips"})
        else:
            keep.append(f)
    return keep, forgiven


def check_against_git(run_dir: str | Path, repo: str | Path, rev: str = "HEAD",
                      same_machine: bool | None = None) -> dict:
    """:func:`check` of the run in ``run_dir`` against the lock, metrics and lock machine
    committed at ``rev`` in the git repository ``repo``; ``same_machine`` overrides the
    comparison of :func:`machine` with the lock's (False for a simulated other CPU)."""
    run_dir, repo = Path(run_dir), Path(repo)

    def read_fresh(p):
        f = run_dir / p
        if not f.is_file():
            raise FileNotFoundError(p)
        return f.read_text()

    def read_reference(p):
        r = subprocess.run(["git", "show", f"{rev}:{p}"], cwd=repo, capture_output=True,
                           text=True)
        if r.returncode != 0:
            raise FileNotFoundError(p)
        return r.stdout

    try:
        lock_machine = json.loads(read_reference(LOCK_MACHINE_FILE))
    except FileNotFoundError:
        lock_machine = None
    same = lock_machine == machine() if same_machine is None else same_machine
    return check(lockcheck.stages(run_dir / "dvc.lock"), lockcheck.committed(repo, rev),
                 read_fresh, read_reference, same_machine=same)


def summarize(res: Mapping, limit: int = 20) -> str:
    """Lines for a test failure or a log: what was compared and each failure with the file,
    key, both values and the tolerance."""
    lines = [f"same machine as the lock: {res['same_machine']}; comparable stages "
             f"{len(res['comparable'])}, byte-compared {len(res['bytes_compared'])}, "
             f"metrics files {len(res['files_compared'])}"]
    lines += [f"bytes differ: {d}" for d in res["bytes_differ"][:limit]]
    lines += [f"fragile verdict flipped (not a failure): {d['file']}: {d['key']}: "
              f"{d['reference']!r} -> {d['fresh']!r}, "
              + (d["why"] if d.get("why") else f"margin {d['drift']:.4g} within the bound's "
                                               f"tolerance {d['tolerance']:.4g}")
              for d in res.get("fragile_flips", [])[:limit]]
    for f in res["failures"][:limit]:
        tol = "" if f.get("tolerance") is None else f", tolerance {f['tolerance']:.4g}"
        lines.append(f"{f['file']}: {f['key']}: reference {f['reference']!r}, fresh "
                     f"{f['fresh']!r}{tol} ({f['why']})")
    if len(res["failures"]) > limit:
        lines.append(f"... and {len(res['failures']) - limit} more")
    return "\n".join(lines)


def max_drift(res: Mapping) -> dict:
    """Largest drift per metrics file and kind, as a fraction of its tolerance:
    ``{file: {kind: {"key", "drift", "tolerance", "fraction"}}}``."""
    out: dict = {}
    for d in res["drifts"]:
        frac = d["drift"] / d["tolerance"] if d["tolerance"] else math.inf
        cur = out.setdefault(d["file"], {}).get(d["kind"])
        if cur is None or frac > cur["fraction"]:
            out[d["file"]][d["kind"]] = {"key": d["key"], "reference": d["reference"],
                                         "fresh": d["fresh"], "drift": d["drift"],
                                         "tolerance": d["tolerance"], "fraction": frac}
    return out


def fragile_verdicts(validity: Mapping, fraction: float | None = None) -> list[dict]:
    """Checks of ``metrics/validity.json`` whose verdict a drift within the tolerance could
    flip: a CI bound (95 % or 90 %) lies closer to a point where the verdict changes (the
    reference, or the reference -+ the check's equivalence margin) than ``fraction`` (default
    ``TOLERANCE["ci_fraction"]``) of the CI half-width.

    Args:
        validity: the parsed ``metrics/validity.json`` (``checks``: records with ``id``,
            ``verdict``, ``lo``, ``hi``, ``reference``).

    Returns:
        ``[{"id", "verdict", "margin", "half_width", "margin_in_half_widths"}]`` sorted by
        the margin in half-widths; ``margin`` = the distance of the nearest bound to the
        nearest such point, in the check's own units."""
    frac = TOLERANCE["ci_fraction"] if fraction is None else fraction
    out = []
    for c in validity.get("checks", []):
        d = _decision_distance(c)
        if d is None:
            continue
        margin, hw = d
        if hw > 0 and margin < frac * hw:
            out.append({"id": c["id"], "verdict": c.get("verdict"), "margin": margin,
                        "half_width": hw, "margin_in_half_widths": margin / hw})
    return sorted(out, key=lambda r: r["margin_in_half_widths"])
