"""Paper 001's claims (Smith et al., "Balancing the Picture", GenSynth) as validity checks:
retrieval bias (sec. 3.3, Tables 1-2, from ``metrics/retrieval.json``) and the spurious
correlations of the data (appendix D, Table 7, from ``metrics/spurious.json``). Each check has
the layout and the margin rules of :mod:`biaslab.analysis.validity`; the verdicts come from
``validity.decide`` with the others.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from biaslab.analysis.validity import make_check, margin_of
from biaslab.runtime import stats


#: the single-row AUC claims' reference effect
SPAN = "the AUC's span from chance (0.5) to a perfect ranking (1)"


#: paper 001's claims on the gender classifiers of stage spurious: (input, set, expected
#: direction, reference, claim)
SPURIOUS_CLAIMS = (
    ("background", "natural", ">", 0.5,
     "spurious correlations: a gender classifier on person-removed test images (background "
     "only) has ROC AUC above chance (paper 001 app. D.4: 63.4 % on COCO)"),
    ("background", "contrast", "≤", 0.5,
     "spurious correlations: on the contrast set (background fixed, each image in both "
     "groups) the background-only classifier is at chance (paper 001 Table 7)"),
    ("background", "natural-contrast", ">", 0.0,
     "spurious correlations: the background-only classifier's AUC falls from the natural "
     "test images to the contrast set"),
    ("text", "natural", ">", 0.5,
     "spurious correlations: a gender classifier on gender-neutralised captions has ROC AUC "
     "above chance (paper 001 app. D.4: 78.0 % on COCO)"),
    ("image", "contrast", ">", 0.5,
     "contrast set: a gender classifier on the unmasked images reads each version's group "
     "(AUC above chance): the edits carry gender (paper 001 Table 7)"))


def retrieval_checks(retrieval: Mapping[str, Any] | None) -> list[dict]:
    """Paper 001's claims on retrieval bias metrics (sec. 3.3, Table 1; Table 2), from
    ``metrics/retrieval.json`` (stage eval_retrieval), at the smallest K for the signed
    Bias@K (paper 001: K = 5, 10) and the largest K below the number of gallery images of
    known gender for MaxSkew@K (paper 001: K = 100; a larger K holds them all and reads 0):

    * a gender-agnostic model (TF-IDF on gender-neutralised captions) has MaxSkew@K above a
      random ranking's on the natural gallery (``>``, paired over queries): the metric reads
      the data's context bias, not only the model's;
    * the gender-agnostic model's Bias@K is higher on the natural gallery than on the balanced
      one (``>``; natural minus balanced, the far ends of the bootstrap and t intervals): the
      signed metric follows the gallery's imbalance (paper 001: 0.22 vs -0.06 at K = 5). Not
      "≈ 0 on the balanced gallery": a precise estimate of any small value excludes 0 (paper
      001's own -0.06 ± 0.00 would);
    * and its MaxSkew@K there stays above the random ranking's (``>``, Welch over the
      resamples): balancing the counts leaves the spurious correlations in;
    * CLIP-clip lowers the scorer's MaxSkew@K on the natural gallery (``<``, paired over
      queries; paper 001 Table 2's COCO rows);
    * on the contrast set (stage contrast_set, ``retrieval["contrast"]``; the largest K there
      not above the natural one) the gender-agnostic model's MaxSkew@K is not above a random
      ranking's (``≤``): the contrast set leaves no context that goes with one group;
    * and the scorer's MaxSkew@K there is above a random ranking's (``>``): a model trained
      on biased data stays biased where the gallery is not.

    No retrieval rows (a skip record, no captions) give no check."""
    r = retrieval or {}
    setup = r.get("setup") or {}
    # a top K that can hold every image of known gender reads the gallery's own balance
    # (MaxSkew 0 by construction): only K below their number
    n_defined = (setup.get("n_female") or 0) + (setup.get("n_male") or 0) \
        if isinstance(setup.get("n_female"), int) else setup.get("n_gallery")
    ks = [int(k) for k in setup.get("ks") or [] if not isinstance(n_defined, int)
          or int(k) < n_defined]
    if not ks or not isinstance(r.get("differences"), Mapping):
        return []
    kb, km = min(ks), max(ks)
    src = "metrics/retrieval.json"
    out: list[dict] = []

    def diff(name, key, expect, cid, claim):
        d = ((r["differences"].get(name) or {}).get(key)) or {}
        if d.get("mean") is not None:
            out.append(make_check(cid, claim, expect, 0.0, d["mean"], d.get("lo"), d.get("hi"),
                              d.get("n"), src))
    diff("tfidf-random", f"MaxSkew@{km}", ">", f"retrieval/tfidf-random/maxskew@{km}>0",
         f"retrieval: a gender-agnostic model (TF-IDF on neutralised captions) has MaxSkew@{km} "
         f"above a random ranking's on the natural gallery (paired over queries; paper 001 "
         f"sec. 3.3)")
    diff("clip_clip-scorer", f"MaxSkew@{km}", "<", f"retrieval/clip_clip-scorer/maxskew@{km}<0",
         f"retrieval: CLIP-clip lowers the scorer's MaxSkew@{km} on the natural gallery "
         f"(paired over queries; paper 001 Table 2)")
    bal = r.get("balanced") or {}
    nat = (r.get("tfidf") or {}).get(f"Bias@{kb}") or {}
    t = (bal.get("tfidf") or {}).get(f"Bias@{kb}") or {}
    if None not in (nat.get("lo"), nat.get("hi"), t.get("mean"), t.get("ci95")):
        # conservative: the far ends of the two intervals (bootstrap over queries, t over
        # resamples: no joint distribution to pair them by)
        out.append(make_check(f"retrieval/natural-balanced/tfidf/bias@{kb}>0",
                          f"retrieval: the gender-agnostic model's Bias@{kb} is higher on the "
                          f"natural gallery (more men) than on the balanced one: the signed "
                          f"metric follows the gallery's imbalance (paper 001 sec. 3.3, "
                          f"Table 1)", ">", 0.0, nat["mean"] - t["mean"],
                          nat["lo"] - (t["mean"] + t["ci95"]),
                          nat["hi"] - (t["mean"] - t["ci95"]), t.get("n"), src))
    a, b = ((bal.get(x) or {}).get(f"MaxSkew@{km}") or {} for x in ("tfidf", "random"))
    if a.get("mean") is not None and b.get("mean") is not None:
        d = stats.difference_of_records(a, b)
        out.append(make_check(f"retrieval/balanced/tfidf-random/maxskew@{km}>0",
                          f"retrieval: on the balanced gallery the gender-agnostic model's "
                          f"MaxSkew@{km} stays above a random ranking's (Welch over resamples; "
                          f"paper 001 sec. 3.3 and appendix D)", ">", 0.0, d["diff"], d["lo"],
                          d["hi"], min(int(a.get("n") or 0), int(b.get("n") or 0)), src))
    con = r.get("contrast") or {}
    cks = [int(k) for k in (con.get("setup") or {}).get("ks") or []]
    if isinstance(con.get("differences"), Mapping) and cks:
        kc = max(k for k in cks if k <= km) if any(k <= km for k in cks) else max(cks)
        d = con["differences"]

        natural = ((r["differences"].get("tfidf-random") or {}).get(f"MaxSkew@{km}")
                   or {}).get("mean")

        def cdiff(name, expect, cid, claim):
            x = (d.get(name) or {}).get(f"MaxSkew@{kc}") or {}
            if x.get("mean") is not None:
                # "not above": within a tenth of the excess the natural gallery shows
                m = margin_of(natural, f"the gender-agnostic model's MaxSkew@{km} excess over "
                                       f"a random ranking on the natural gallery") \
                    if expect == "≤" else None
                out.append(make_check(cid, claim, expect, 0.0, x["mean"], x.get("lo"), x.get("hi"),
                                  x.get("n"), src, margin=m))
        cdiff("tfidf-random", "≤", f"retrieval/contrast/tfidf-random/maxskew@{kc}≤0",
              f"retrieval: on the contrast set (both groups' versions of each image, "
              f"background fixed) the gender-agnostic model's MaxSkew@{kc} is not above a "
              f"random ranking's (paired over queries; paper 001 sec. 4: no spurious "
              f"correlation left to read)")
        cdiff("scorer-random", ">", f"retrieval/contrast/scorer-random/maxskew@{kc}>0",
              f"retrieval: on the contrast set the scorer trained on the biased data keeps "
              f"MaxSkew@{kc} above a random ranking's (paired over queries): the bias it "
              f"shows there is the model's, not the gallery's (paper 001 sec. 5)")
    return out


def spurious_checks(spurious: Mapping[str, Any] | None) -> list[dict]:
    """Paper 001's claims on spurious correlations in the data (appendix D, Table 7), from
    ``metrics/spurious.json`` (stage spurious):

    * the caption clusters deviate from gender parity (app. D.1 / D.3): a test image's
      cluster's male share among the train images predicts its gender (AUC ``>`` 0.5, with
      its bootstrap CI; ``biaslab.analysis.spurious.cluster_auc``);
    * a gender classifier on person-removed images ("background only", app. D.4) reads gender
      above chance on the natural test images (AUC ``>`` 0.5);
    * on the contrast set (stage contrast_set) it does not (``≤`` 0.5: holds when the CI
      reaches 0.5): with the background fixed, there is no context left to read;
    * its AUC falls from the natural images to the contrast set (``>`` 0, independent
      bootstrap);
    * a classifier on the neutralised captions reads gender above chance on the natural test
      images (app. D.4: 78 % AUC on COCO);
    * a classifier on the unmasked images reads gender on the contrast set (``>`` 0.5): the
      contrast set's versions carry their group (Table 7's zero-shot gender accuracy).

    No record (a skip record, no captions) gives no check."""
    sp = spurious or {}
    cls = sp.get("classifiers")
    if not isinstance(cls, Mapping):
        return []
    src = "metrics/spurious.json"
    out: list[dict] = []
    auc = ((sp.get("clusters") or {}).get("auc")) or {}
    if auc.get("mean") is not None:
        out.append(make_check("spurious/clusters/natural/auc>0.5", (
            f"spurious correlations: the {(sp.get('clusters') or {}).get('m', '?')} caption "
            f"clusters deviate from gender parity: a test image's cluster's male share among "
            f"the train images predicts its gender (ROC AUC above chance; paper 001 app. D.1)"),
            ">", 0.5, auc["mean"], auc.get("lo"), auc.get("hi"), auc.get("n"), src,
            margin=margin_of(0.5, SPAN)))
    for name, where, expect, ref, claim in SPURIOUS_CLAIMS:
        node = ((cls.get(name) or {}).get(where)) or {}
        if node.get("mean") is not None:
            # ids: spurious/<input>/<set>/auc>0.5, a difference: spurious/<input>/<sets>>0
            cid = f"spurious/{name}/{where}" + (f"/auc{expect}{ref:g}" if ref else f"{expect}0")
            nat = ((cls.get(name) or {}).get("natural") or {}).get("mean")
            m = (margin_of(0.5, SPAN) if where == "natural" or (ref and expect == ">") else
                 margin_of(None if nat is None else nat - 0.5,
                           f"the {name} classifier's AUC above chance on the natural images"))
            out.append(make_check(cid, claim, expect, ref, node["mean"], node.get("lo"),
                              node.get("hi"), node.get("n"), src, margin=m))
    return out


__all__ = ["SPURIOUS_CLAIMS", "retrieval_checks", "spurious_checks"]
