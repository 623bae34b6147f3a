"""The report's sections beyond Tables 1-4: the spurious-correlation and retrieval tables, the
gender-flip probe, the attribute audit and its controls, and the attribute (skin) table.
Pure functions of the stages' JSON metrics, each returning markdown lines ([] when the
stage was skipped)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from biaslab import report as R
from biaslab.report import controls as RC
from biaslab.report import notes as NOTES
from biaslab.runtime import stats
from biaslab.runtime.io import is_skipped


RETRIEVAL_ROWS = (("random", "random ranking"), ("tfidf", "TF-IDF, gender-agnostic"),
                  ("scorer", "CLIP-style scorer"), ("clip_clip", "scorer, CLIP-clip"))


def spurious_markdown(sp: Mapping) -> list[str]:
    """The "Spurious correlations (paper 001 appendix D)" section from metrics/spurious.json
    (stage spurious): the gender classifiers without gender (ROC AUC, natural test images vs
    the contrast set) and the caption clusters (ΔM with its CI and LDA words, Table 5).
    Returns markdown lines; none for a skip record."""
    cls, cl = sp.get("classifiers"), sp.get("clusters") or {}
    if not isinstance(cls, Mapping):
        return []
    su = sp.get("setup") or {}
    labels = (("background", "persons removed (background only)"),
              ("text", "gender-neutralised captions"), ("image", "unmasked image"))

    def cell(r):
        return stats.format_cell(r, 1, 100.0) if r else "–"
    t = cl.get("test") or {}
    p = t.get("p")
    lines = [
        "## Spurious correlations (paper 001 appendix D)",
        "",
        f"Gender classifiers that cannot see the gender word or the person (logistic "
        f"regressions on frozen features, trained on {su.get('n_train', '?')} train images): "
        f"ROC AUC in %, 50 = chance, ± 95 % bootstrap CI over the {su.get('n_test', '?')} test "
        f"images or the {su.get('n_contrast_sources', '?')} contrast-set source images. On "
        f"the contrast set every image appears once per group with the background fixed, so "
        f"a classifier that reads only context is at chance there.",
        "",
        "| input | natural test images | contrast set | natural - contrast |",
        "|---|---|---|---|"]
    for key, label in labels:
        r = cls.get(key) or {}
        lines.append(f"| {label} | {cell(r.get('natural'))} | {cell(r.get('contrast'))} | "
                     f"{cell(r.get('natural-contrast'))} |")
    ch = su.get("contrast_background_changed")
    if ch is not None:
        lines += ["", f"{ch} of {su.get('contrast_background_compared', '?')} contrast "
                      f"versions (lossless pairs) differ from their source outside the removed "
                      f"persons (the edit reaches past the person boxes)."]
    rows = [r for r in cl.get("rows") or [] if r.get("n")]
    lines += ["", f"Caption clusters (K-Means, M = {cl.get('m', '?')}, of the averaged "
                  f"neutralised caption embeddings of {cl.get('n', '?')} images, encoder "
                  f"{cl.get('encoder', '?')}; ΔM = male share of the cluster minus the overall "
                  f"{100 * float(cl.get('overall_male_share') or 0):.1f} %, points, Wilson 95 % "
                  f"CI; words by LDA). Chi-square test of cluster x gender: "
                  f"χ² = {t.get('chi2', '?')} ({t.get('dof', '?')} dof), "
                  f"p = {'?' if p is None else f'{p:.3g}'}; a test image's cluster's male "
                  f"share among the train images predicts its gender at ROC AUC "
                  f"{stats.format_cell(cl.get('auc'), 1, 100.0)} %.", "",
              "| cluster | images | ΔM | salient words |", "|---|---|---|---|"]
    for r in sorted(rows, key=lambda r: -(r.get("delta_m") or 0)):
        d = r.get("delta_m")
        ci = (f" [{r['lo']:+.1f}, {r['hi']:+.1f}]" if r.get("lo") is not None else "")
        lines.append(f"| {r['cluster']} | {r['n']} | "
                     f"{'' if d is None else f'{d:+.1f}'}{ci} | {r.get('words', '')} |")
    c = cl.get("contrast")
    if c:
        lines += ["", f"On the contrast set the same clusters hold each source once per group: "
                      f"the largest |ΔM| there is {c.get('max_abs_delta_m')} points "
                      f"({c.get('n')} versions)."]
    return lines + [""]


def retrieval_markdown(ret: Mapping) -> list[str]:
    """The "Retrieval (paper 001)" section from metrics/retrieval.json (stage eval_retrieval):
    its Table 1 (Bias@K / MaxSkew@K of a random ranking, the gender-agnostic TF-IDF model and
    the scorer, on the natural test gallery and on its balanced resamples) and its Table 2
    (scorer vs CLIP-clip, with Recall@K). A K that reaches the whole gallery ranks every image
    (Bias@K is then the gallery's own balance, MaxSkew@K 0 by construction) and is left out.
    Returns markdown lines; none when the file holds no scorer row (a skip record)."""
    setup = ret.get("setup") or {}
    ks = setup.get("ks") or []
    n_gallery = setup.get("n_gallery")
    big = [k for k in ks if isinstance(n_gallery, int) and k >= n_gallery]
    ks = [k for k in ks if k not in big]
    if not ks or not isinstance(ret.get("scorer"), dict):
        return []
    rows = [(key, label) for key, label in RETRIEVAL_ROWS if isinstance(ret.get(key), dict)]
    head = "| model | " + " | ".join(f"Bias@{k}" for k in ks) + " | " + \
        " | ".join(f"MaxSkew@{k}" for k in ks) + " |"
    rule = "|---|" + "---|" * (2 * len(ks))

    def table(src: Mapping) -> list[str]:
        out = [head, rule]
        for key, label in rows:
            r = src.get(key) or {}
            cells = [stats.format_cell(r.get(f"{m}@{k}"), 3) for m in ("Bias", "MaxSkew")
                     for k in ks]
            out.append(f"| {label} | " + " | ".join(cells) + " |")
        return out
    lines = [
        "## Retrieval (paper 001)",
        "",
        f"{setup.get('n_queries', '?')} gender-neutralised test captions as queries over "
        f"{n_gallery if n_gallery is not None else '?'} test images "
        f"({setup.get('n_female', '?')} female / {setup.get('n_male', '?')} male / "
        f"{setup.get('n_undefined', '?')} undefined). Bias@K: (men - women) / (men + women) "
        "in the top K, 0 = balanced, signed; MaxSkew@K: the largest log-ratio of a group's "
        "share in the top K to its share of the gallery, 0 = the gallery's own balance. "
        "TF-IDF ranks by the images' own neutralised captions: it cannot see gender, so what it "
        "shows is the data's bias (paper 001 sec. 3.3).",
        "",
        "Table 1, natural gallery (± 95 % bootstrap CI over queries):",
        "",
        *table(ret),
        ""]
    bal = ret.get("balanced")
    if isinstance(bal, dict) and bal:
        lines += [f"Table 1, balanced gallery (the larger group sampled down to the smaller, "
                  f"undefined images kept, their captions the queries; mean ± 95 % t-CI over "
                  f"{setup.get('n_balanced', '?')} resamples):", "", *table(bal), ""]
    con = ret.get("contrast") or {}
    cset, csu = con.get("set") or {}, con.get("setup") or {}
    cks = [k for k in csu.get("ks") or [] if k in ks]
    if cks and isinstance(con.get("scorer"), dict):
        acc = cset.get("accepted") or {}
        lines += [
            f"Table 1, contrast set (paper 001's GenSynth, stage contrast_set: each of "
            f"{cset.get('source_images', '?')} maskable test images edited into both groups' "
            f"versions with the background fixed, KNN-filtered; {cset.get('pairs', '?')} kept "
            f"both ({acc.get('female', '?')} female / {acc.get('male', '?')} male versions "
            f"accepted of {cset.get('candidates', '?')}): a gallery of "
            f"{csu.get('n_gallery', '?')} images, {csu.get('n_queries', '?')} queries; ± 95 % "
            "bootstrap CI over queries):", "",
            "| model | " + " | ".join(f"Bias@{k}" for k in cks) + " | "
            + " | ".join(f"MaxSkew@{k}" for k in cks) + " |",
            "|---|" + "---|" * (2 * len(cks))]
        for key, label in rows:
            r = con.get(key) or {}
            cells = [stats.format_cell(r.get(f"{m}@{k}"), 3) for m in ("Bias", "MaxSkew")
                     for k in cks]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
    elif con.get("note"):
        lines += [f"Contrast set: {con['note']}.", ""]
    rec = ret.get("recall") or {}
    if rec.get("scorer") and rec.get("clip_clip"):
        rks = setup.get("recall_ks") or []
        lines += [
            f"Table 2, the scorer and CLIP-clip (the {setup.get('clip_m', '?')} of "
            f"{setup.get('embedding_dim', '?')} embedding dimensions with the highest mutual "
            f"information with gender on {setup.get('clip_mi_images', '?')} training images "
            "dropped): MaxSkew@K, and Recall@K of each query's own image (the cost of "
            "debiasing; paper 001 reports ImageNet accuracy for it); natural gallery, and "
            "the contrast set's MaxSkew@K where it exists.",
            "",
            "| model | " + " | ".join(f"MaxSkew@{k}" for k in ks) + " | "
            + " | ".join(f"R@{k}" for k in rks) + " |",
            "|---|" + "---|" * (len(ks) + len(rks))]
        for key in ("scorer", "clip_clip", "tfidf"):
            if not isinstance(ret.get(key), dict):
                continue
            label = dict(RETRIEVAL_ROWS)[key]
            cells = [stats.format_cell(ret[key].get(f"MaxSkew@{k}"), 3) for k in ks] + \
                [stats.format_cell((rec.get(key) or {}).get(f"R@{k}"), 3) for k in rks]
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
            if isinstance(con.get(key), dict):
                lines.append(f"| {label}, contrast set | " + " | ".join(
                    stats.format_cell(con[key].get(f"MaxSkew@{k}"), 3) if k in cks else "–"
                    for k in ks) + " | " + " | ".join("–" for _ in rks) + " |")
        lines.append("")
    if big:
        lines += [f"Not shown: K = {', '.join(map(str, big))} >= the gallery's {n_gallery} "
                  f"images (the whole gallery: the gallery's own balance, not the model's).", ""]
    return lines


#: columns of the protected-attribute table (metrics/attribute.json, stage eval_attribute)
ATTRIBUTE_COLUMNS = (("LIC_M", "LIC_M"), ("LIC_D", "LIC_D"), ("LIC", "LIC ↓"))


def flip_markdown(flip: Mapping[str, Any]) -> list[str]:
    """The attribute-flip probe's section (``metrics/probe.json``'s ``flip`` block;
    ``biaslab.analysis.probe.flip_sensitivities``), or nothing when the probe did not run it."""
    if not flip:
        return []
    head = ["### Attribute-flip probe (the person's own attribute)", ""]
    if not flip.get("available"):
        return head + [f"Not run: {flip.get('reason')}.", ""]
    cols = R.flip_columns(flip)
    objs = flip.get("objects") or {}
    assoc = "; ".join(f"{d}: " + " vs ".join(f"{v} → {', '.join(o)}" for v, o in
                                              objs[d].items()) for d in objs)
    n = ", ".join(f"{k} {v}" for k, v in (flip.get("n_pairs") or {}).items())

    def seeds(model):
        ks = sorted({int(rec.get("n_seeds", rec.get("n")))
                     for rows in (flip.get(model) or {}).values() for rec in rows.values()
                     if isinstance(rec, Mapping) and rec.get("n_seeds", rec.get("n"))})
        return "?" if not ks else str(ks[0]) if len(ks) == 1 else f"{ks[0]}-{ks[-1]}"
    lines = head + [
        "Each test image drawn twice by the generator, with the person's "
        + " / ".join(flip.get("dims") or []) + " flipped and nothing else (person visible). "
        "Cell: mean change of the model's output for the objects associated with the second "
        "value minus those of the first (" + assoc + "), second image minus first, "
        "± 95 % CI over seeds. The objects in the two images are the same, so a model that "
        "does not use the person's attribute to predict objects scores 0; a model that learned "
        f"the planted association scores > 0. Pairs: {n}.", "",
        f"Classifiers (mean object probability; n = {seeds('classifier')} seeds):", "",
        R.markdown(R.flip_table(flip, "classifier"), cols, 3), ""]
    ref = flip.get("reference") or {}
    if ref:
        lines += ["Reference, the association in the training images: a reader that predicts "
                  "each object from the attribute alone, with its frequency among the training "
                  "images of each value, scores " + "; ".join(
                      f"{d} {stats.format_cell(r, 3)} (bootstrap 95 % CI over n = {r.get('n')} "
                      "images: " + ", ".join(f"{v} {k}" for v, k in
                                            (r.get("n_by_value") or {}).items()) + ")"
                      for d, r in ref.items()) + ". A model's sensitivity near it is what the "
                  "data taught, planted or by chance.", ""]
    cap = R.flip_table(flip, "captioner")
    if cap:
        lines += ["Captioners (share of the associated objects the caption names; n = "
                  f"{seeds('captioner')} seeds):", "",
                  R.markdown(cap, cols, 3), ""]
    return lines


def audit_attribute_markdown(a: Mapping, top: int = 5) -> list[str]:
    """The dataset audit of the run's attribute (``metrics/audit.json``'s ``attribute`` block,
    ``biaslab.analysis.audit_attribute``; REVISE, paper 004 Sect. 5.1): images per group, the
    person's size and centre distance per group (mean ± t 95 % CI over images, the test
    between groups), and the ``top`` objects whose rate differs most significantly between
    the groups. Empty without the block."""
    if not a or not a.get("groups"):
        return []
    groups = list(a["groups"])
    imgs = a.get("images") or {}
    lines = [f"## Dataset audit by {a.get('attribute')} (REVISE, paper 004 Sect. 5.1; stage "
             "audit)", "",
             "Images per group: " + ", ".join(f"{g} {imgs.get(g, 0)}" for g in groups) + ".", ""]
    prom = a.get("prominence") or {}
    heads = {"area_frac": "person size (fraction of the image)",
             "center_dist": "person's distance from the image centre (unit square)"}
    rows = []
    for m, head in heads.items():
        rec = prom.get(m) or {}
        cells = [stats.format_cell((rec.get("groups") or {}).get(g), 3) for g in groups]
        if "p_welch" in rec:
            test = (f"d = {rec['cohens_d']:.2f}, Welch p = {rec['p_welch']:.3g}"
                    if rec.get("p_welch") is not None else "–")
        else:
            test = (f"Kruskal-Wallis p = {rec['p_kruskal']:.3g}"
                    if rec.get("p_kruskal") is not None else "–")
        rows.append(f"| {head} | " + " | ".join(cells) + f" | {test} |")
    lines += ["Person prominence (largest person box; mean ± t 95 % CI over images; "
              f"{prom.get('n_without_person', 0)} grouped images have no person box):", "",
              "| measure | " + " | ".join(groups) + " | between groups |",
              "|---|" + "---|" * (len(groups) + 1), *rows, ""]
    obj = a.get("objects") or {}
    lines += [f"Objects: {obj.get('n_significant', 0)} of {obj.get('n_tested', 0)} tested "
              "categories differ between the groups (" + ("Fisher's exact test" if len(groups)
                                                          == 2 else "chi-square test")
              + ", Benjamini-Hochberg); rate ratio = the highest group's image rate over the "
              "lowest's. Full tables: plots/audit/attribute_objects.csv, "
              "attribute_words.csv.", ""]
    tops = (obj.get("top") or [])[:top]
    if tops:
        lines += ["| object | most | least | rate ratio | adjusted p |", "|---|---|---|---|---|",
                  *(f"| {t['item']} | {t['max_group']} | {t['min_group']} | "
                    + (f"{R.number(t['rate_ratio']):.2f}" if R.number(t["rate_ratio"]) is not None
                       else str(t["rate_ratio"]))
                    + " | " + ("–" if t.get("p_adj") is None else "< 1e-6" if t["p_adj"] < 1e-6
                               else f"{t['p_adj']:.3g}")
                    + " |" for t in tops), ""]
    lines += _audit_context_markdown(a, groups, top)
    return lines


def _p_text(p) -> str:
    return "–" if p is None else "< 1e-6" if p < 1e-6 else f"{p:.3g}"


def _audit_context_markdown(a: Mapping, groups: list, top: int) -> list[str]:
    """The supercategory, distance and appearance sections of :func:`audit_attribute_markdown`
    (paper 004 Sect. 5.1.2-5.1.4); a section the block lacks or skipped says so."""
    lines: list[str] = []
    two = len(groups) == 2
    sup = a.get("supercategories") or {}
    if "skipped" in sup:
        lines += [f"Context by supercategory (Fig. 7): not measured ({sup['skipped']}).", ""]
    elif sup:
        lines += [f"Context by supercategory (Fig. 7 right; an image counts when it has an "
                  f"object of the supercategory): {sup.get('n_significant', 0)} of "
                  f"{sup.get('n_tested', 0)} tested supercategories differ between the groups "
                  "(plots/audit/attribute_supercategories.csv).", ""]
        if sup.get("top"):
            lines += ["| supercategory | most | least | rate ratio | adjusted p |",
                      "|---|---|---|---|---|",
                      *(f"| {t['item']} | {t['max_group']} | {t['min_group']} | "
                        + (f"{R.number(t['rate_ratio']):.2f}" if R.number(t["rate_ratio"])
                           is not None else str(t["rate_ratio"]))
                        + f" | {_p_text(t.get('p_adj'))} |" for t in sup["top"][:top]), ""]
    dist = a.get("distance") or {}
    if dist:
        lines += [f"Person-object distance (Eq. 1; smaller = closer): "
                  f"{dist.get('n_significant', 0)} of {dist.get('n_tested', 0)} tested object "
                  "categories differ between the groups ("
                  + ("Welch's t-test, Cohen's d first group minus second" if two
                     else "Kruskal-Wallis") + ", Benjamini-Hochberg; "
                  "plots/audit/attribute_distance.csv).", ""]
        if dist.get("top"):
            lines += ["| object | closest | farthest | Cohen's d | adjusted p |",
                      "|---|---|---|---|---|",
                      *(f"| {t['item']} | {t['closest_group']} | {t['farthest_group']} | "
                        + ("–" if R.number(t.get("cohens_d")) is None
                           else f"{R.number(t['cohens_d']):.2f}")
                        + f" | {_p_text(t.get('p_adj'))} |" for t in dist["top"][:top]), ""]
    app = a.get("appearance") or {}
    if "skipped" in app:
        lines += [f"Appearance differences (Sect. 5.1.4): not measured ({app['skipped']}).", ""]
    elif app:
        lines += [f"Appearance differences (Sect. 5.1.4; per object, a linear SVM on the "
                  "frozen image features of the images with it, projected to sqrt(n) "
                  f"dimensions; {app.get('folds', '?')}-fold accuracy ± t 95 % CI over the "
                  f"folds against its permutation-test chance, "
                  f"{app.get('n_permutations', '?')} permutations): "
                  f"{app.get('n_significant', 0)} of {app.get('n_tested', 0)} tested object "
                  "categories are told apart by group (plots/audit/"
                  "attribute_appearance.csv). The features see the person as well as the "
                  "scene, as the paper's scene features do.", ""]
        if app.get("top"):
            lines += ["| object | images | accuracy | chance | accuracy / chance | "
                      "adjusted p |", "|---|---|---|---|---|---|",
                      *(f"| {t['item']} | {t['n']} | "
                        + stats.format_cell({"mean": R.number(t.get("accuracy")),
                                             "ci95": R.number(t.get("accuracy_ci95")),
                                             "n": app.get("folds")},
                                            3)
                        + f" | {R.number(t['chance']):.3f} | {R.number(t['ratio']):.2f} | "
                        + f"{_p_text(t.get('p_adj'))} |" for t in app["top"][:top]), ""]
    return lines


def controls_attribute_markdown(c: Mapping) -> list[str]:
    """The attribute's controls (stage ``controls_attribute``,
    ``biaslab.analysis.controls_attribute``): per control and metric the known answer, the
    measured mean ± t 95 % CI over the replicates and the verdict. Empty for gender or
    without the file."""
    if not c or "skipped" in c or not c.get("classifier"):
        return []
    a, groups = c.get("attribute"), c.get("groups") or []
    tsets = c.get("test_set") or {}
    n_rep = len(c.get("replicates") or [])
    summ = c.get("summary") or {}
    lines = [f"## Controls for {a}: the attribute's Leakage and LIC against known answers "
             "(stage controls_attribute)", "",
             "Control models whose bias is known by construction, through the code that "
             "evaluates the trained models: oracle (the true objects: Leakage = 0 exactly), "
             "amplifier@q (adds the group's stereotype object, "
             + ", ".join(f"{g}: {o}" for g, o in (c.get("stereotypes") or {}).items())
             + ", with probability q: Leakage > 0, LIC > 0), blind (no object: the attacker "
             f"guesses one group, LK_M < 100 / {len(groups)}), human (a held-out human caption: "
             f"LIC ≈ 0). Cell: mean ± t 95 % CI over n = {n_rep} replicates. Test images per "
             "group: classifier "
             + ", ".join(f"{g} {v}" for g, v in ((tsets.get("classifier") or {})
                                                  .get("n_labelled_by_group") or {}).items())
             + "; captioner "
             + ", ".join(f"{g} {v}" for g, v in ((tsets.get("captioner") or {})
                                                  .get("n_by_group") or {}).items())
             + f". {summ.get('matches', 0)} of {summ.get('n', 0)} match, "
               f"{summ.get('does_not_match', 0)} do not, {summ.get('inconclusive', 0)} "
               "inconclusive.", "",
             "| task | control | metric | expected | measured | verdict |",
             "|---|---|---|---|---|---|"]
    for task in ("classifier", "captioner"):
        part = c.get(task) or {}
        if "skipped" in part:
            lines.append(f"| {task} | – | – | – | skipped: {part['skipped']} | – |")
            continue
        for name, ms in part.items():
            for metric, r in ms.items():
                if "verdict" not in r:
                    continue
                exp, meas = RC.control_cells(r, 2)
                lines.append(f"| {task} | {name} | {metric} | {exp} | {meas} | {r['verdict']} |")
    return lines + [""]


def attribute_markdown(att: Mapping, classifiers: Mapping | None = None,
                       utility: Mapping[str, Any] | None = None
                       ) -> list[str]:
    """The protected attribute's section (stage ``eval_attribute``): the captioned
    test images per group, the smallest difference the two smallest groups detect, and for
    skin / gender_skin the captioners' LIC (and Error per group with the worst-group gap for
    gender_skin), mean ± 95 % CI over captioner seeds; with ``classifiers`` (the
    ``attribute`` block of metrics/classification.json) the classifiers' Leakage of the
    attribute too. Empty without the file.

    ``utility`` ({"classifier": (Table 1, its † rows), "captioner": (Table 2, its † rows),
    "floor": report.utility_floor}):
    each table then leads with the same models' utility (mAP, CIDEr; the attribute does not
    change it) and ranks its columns as Tables 1-2 do, never marking a † row (utility under
    the floor) best: a model that stops working leaks little of any attribute. Rows are in
    the tables' order."""
    if not att or is_skipped(att) or "attribute" not in att:
        return []
    a = att["attribute"]
    ti = att.get("test_images") or {}
    per = ti.get("per_group") or {}
    mdd = ti.get("min_detectable_difference_pp")
    pair = ti.get("smallest_pair") or []
    lines = [f"## Protected attribute: {a} (stage eval_attribute)", "",
             "Captioned test images per group: " + ", ".join(f"{g} {n}" for g, n in per.items())
             + f" (n = {ti.get('n', '?')}). "
             + (f"The two smallest groups ({', '.join(pair)}) detect a difference of a per-image "
                f"rate (e.g. Error) of {mdd:.1f} percentage points or more (two-sided α = "
                f"{ti.get('alpha', 0.05)}, power {ti.get('power', 0.8)}, at a rate of 50 %)."
                if mdd is not None else "A group has fewer than 2 images: no difference between "
                                        "groups is detectable."), ""]
    rows = att.get("rows") or {}
    if att.get("metrics") != "computed here":
        lines += [f"The {a} metrics are Table 2's (metrics/captioning.json).", ""]
        return lines
    cols = ATTRIBUTE_COLUMNS
    if a == "gender_skin":
        # the group's image count in its header: with 1 image the seeds agree (± 0.0), which
        # says nothing of the group
        cols += (("Error_pooled", "Error (pooled)"),
                 *((f"Error_{g}", f"Error {g} ({per[g]} img)") for g in per),
                 ("Error_worst_group_gap", "worst-group gap ↓"))
    util = utility or {}
    t2, deg2 = util.get("captioner") or ({}, {})
    t2 = t2 if any(R.number((t2.get(r, {}).get("CIDEr") or {}).get("mean")) is not None
                   for r in rows) else {}
    if t2:
        cols = (("CIDEr", "CIDEr ↑"), *cols)
    tab = {r: {c: (t2.get(r) or {}).get(c) if c == "CIDEr" else rows[r].get(c)
               for c, _ in cols} for r in R.in_order(rows)}
    n = max((int((v or {}).get("n") or 0) for rec in rows.values() for v in
             (rec.get("LIC"), rec.get("LIC_M"))), default=0)
    how = ("captions not masked, thesis sec. 2.5.3" if a == "skin" else
           "a 4-way attacker, gender words masked; Error in %, Burns et al., per group")
    lines += [f"Captioners by {a} ({how}). LIC = LIC_M - LIC_D: 0 = the captions tell the "
              f"group no better than the human captions do. Cell: mean ± 95 % CI over n = {n} "
              "captioner seeds.", "",
              R.markdown(tab, cols, 1, first="Training set", rank=bool(t2),
                         degenerate=[r for r in deg2 if r in tab]), ""]
    if t2 and any(r in tab for r in deg2):
        lines += [NOTES.degenerate_note({r: v for r, v in deg2.items() if r in tab},
                                    NOTES.UTILITY["table2"],
                                    float(util.get("floor") or 0.0)), ""]
    if classifiers and classifiers.get("name") == a:
        groups = classifiers.get("groups") or []
        crows = classifiers.get("rows") or {}
        ccols = (("Leakage", "Leakage ↓"), ("LK_M", "LK_M"), ("LK_D", "LK_D"))
        matched = any(R.number((rec.get("Leakage_F1") or {}).get("mean")) is not None
                      for rec in crows.values())
        if matched:
            ccols += (("Leakage_F1", "Leakage@F1 ↓"), ("LK_D_F1", "LK_D@F1"), ("F1", "F1"))
        t1, deg1 = util.get("classifier") or ({}, {})
        t1 = t1 if any(R.number((t1.get(r, {}).get("mAP") or {}).get("mean")) is not None
                       for r in crows) else {}
        if t1:
            ccols = (("mAP", "mAP ↑"), *ccols)
        ctab = {r: {c: (t1.get(r) or {}).get(c) if c == "mAP" else crows[r].get(c)
                    for c, _ in ccols} for r in R.in_order(crows)}
        cn = max((int((rec.get("Leakage") or {}).get("n") or 0) for rec in crows.values()),
                 default=0)
        nt = classifiers.get("n_test_labelled_by_group") or {}
        lines += [f"Classifiers: Leakage of {a} from their object predictions (paper 000 Eq. 7 "
                  f"and appendix B; a {len(groups)}-way attacker, group-balanced rounds). "
                  "Labelled test images per group: "
                  + ", ".join(f"{g} {k}" for g, k in nt.items()) + ". Cell: mean ± 95 % CI "
                  f"over n = {cn} classifier seeds."
                  + (" Leakage@F1 = LK_M - LK_D@F1: LK_D of the ground truth made as noisy as "
                     "the model (its macro F1; Wang et al. 2019 sec. 4.2), since a noisier model "
                     "leaks less by being noisier." if matched else ""), "",
                  R.markdown(ctab, ccols, 1, rank=bool(t1),
                             degenerate=[r for r in deg1 if r in ctab]), ""]
        if t1 and any(r in ctab for r in deg1):
            lines += [NOTES.degenerate_note({r: v for r, v in deg1.items() if r in ctab},
                                        NOTES.UTILITY["table1"],
                                        float(util.get("floor") or 0.0)), ""]
    return lines
