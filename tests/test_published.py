"""The published captioners' profile: parser, Ratio / Error / BA_label with hand
computed answers, the racial-bias LIC groups, the comparison with the thesis' tables, the two
stages on a small set written here, and the known answers of the real released files."""
import gzip
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from biaslab.data import published as P
from biaslab.runtime.io import InputError
from biaslab.metrics import lic as L
from tests.conftest import REPO, run_checked

SHARED = REPO.parent / "shared" / "published-captions"


def _write(root: Path, model: str, study: str, rows: list[dict] | list[str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    path = P.outputs_path(root, model, study)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for r in rows:
            f.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
    return path


def _row(i, cap, g="Male", s="Light", split="train"):
    return {"image_id": i, "caption": cap, "bb_gender": g, "bb_skin": s, "split": split}


# --- parser -------------------------------------------------------------------------------

_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(_text, st.sampled_from(["Male", "Female", "Unsure", ""]),
                               st.sampled_from(["Light", "Dark", "Both", ""])),
                     min_size=1, max_size=12))
def test_read_outputs_round_trips_any_valid_file(tmp_path_factory, rows):
    root = tmp_path_factory.mktemp("pub")
    recs = [_row(100 + k, c, g, s) for k, (c, g, s) in enumerate(rows)]
    _write(root, "nic", "gender", recs)
    df = P.read_outputs(root, "nic", "gender")
    assert df["image_id"].tolist() == [r["image_id"] for r in recs]
    assert df["caption"].tolist() == [r["caption"] for r in recs]
    assert str(df["image_id"].dtype) == "int64"


@pytest.mark.parametrize("bad, msg", [
    ("{not json", "line 2: not JSON"),
    (json.dumps([1, 2]), "line 2: not a JSON object"),
    (json.dumps({"image_id": 2, "caption": "a man"}), "line 2: missing field"),
    (json.dumps(_row("2", "a man")), "line 2: image_id must be an integer"),
    (json.dumps(_row(1, "a man again")), "line 2: image_id 1 repeats"),
    (json.dumps(_row(2, None)), "line 2: field(s) ['caption'] must be strings"),
])
def test_read_outputs_names_the_file_and_line(tmp_path, bad, msg):
    path = _write(tmp_path, "sat", "race", [json.dumps(_row(1, "a man")), bad])
    with pytest.raises(InputError) as e:
        P.read_outputs(tmp_path, "sat", "race")
    assert str(path) in str(e.value) and msg in str(e.value)


def test_read_outputs_missing_and_truncated(tmp_path):
    with pytest.raises(InputError, match="missing: the released captions of 'fc'"):
        P.read_outputs(tmp_path, "fc", "gender")
    path = _write(tmp_path, "fc", "gender", [_row(k, "a man") for k in range(200)])
    path.write_bytes(path.read_bytes()[:-20])      # a cut download
    with pytest.raises(InputError, match="unreadable"):
        P.read_outputs(tmp_path, "fc", "gender")


# --- Ratio, Error, BA_label ---------------------------------------------------------------

def test_ratio_error_by_hand():
    # 6 images: captions man, man, woman, neutral, both; image genders M, F, F, M, F, Unsure
    df = pd.DataFrame([_row(1, "a man on a bike", "Male"), _row(2, "a man cooking", "Female"),
                       _row(3, "a woman cooking", "Female"), _row(4, "a person", "Male"),
                       _row(5, "a man and a woman", "Female"), _row(6, "a man", "Unsure")])
    r = P.ratio_error(df, n_boot=200)
    # labelled: 5 images; man captions 2 (ids 1, 2), woman 1 (id 3); Ratio 2 / 1
    # neutral: id 4 names no gender; id 5 names both (in neither count of the Ratio)
    assert (r["n_man"], r["n_woman"], r["n_neutral"], r["n_both"], r["n_images"]) == \
        (2, 1, 1, 1, 5)
    assert r["Ratio"]["mean"] == pytest.approx(2.0)
    # Error: id 2 (female image, "man") is the one wrong of 5 labelled -> 20 %
    assert r["Error"]["mean"] == pytest.approx(20.0)
    assert r["n_unlabelled"] == 1
    # the library definitions agree on the full set
    from biaslab.metrics.captions import error, ratio_details
    g = {int(i): x.lower() for i, x in zip(df["image_id"], df["bb_gender"])}
    caps = dict(zip(df["image_id"].astype(int), df["caption"]))
    assert ratio_details(caps, g)["ratio"] == pytest.approx(2.0) and error(caps, g) == pytest.approx(20)


def test_ba_label_by_hand():
    # one word, "kitchen": on 3 female and 1 male image; the captions say woman x3 (one of them
    # on the male image) and neutral once (a female image).
    # reference b(kitchen, f) = 3/4; model b_hat(kitchen, f) = 3/3 = 1 -> BA = (1 - 3/4) / 1
    df = pd.DataFrame([_row(1, "a woman in a kitchen", "Female"),
                       _row(2, "a woman in a kitchen", "Female"),
                       _row(3, "someone in a kitchen", "Female"),
                       _row(4, "a woman in a kitchen", "Male"),
                       _row(5, "a man on a horse", "Male")])
    r = P.ba_label(df, vocab=["kitchen"], min_count=1, n_boot=200)
    assert r["words"] == ["kitchen"]
    assert r["BA_label"]["mean"] == pytest.approx(25.0)
    assert r["top"][0] == {"word": "kitchen", "group": "female", "b": 0.75, "b_hat": 1.0}
    # a captioner that names every gender right scores 0
    right = df.assign(caption=["a woman in a kitchen"] * 3 + ["a man in a kitchen",
                                                             "a man on a horse"])
    assert P.ba_label(right, vocab=["kitchen"], min_count=1, n_boot=200)["BA_label"][
        "mean"] == pytest.approx(0.0)
    with pytest.raises(ValueError, match="no word"):
        P.ba_label(df, vocab=["kitchen"], min_count=5)


# --- LIC for two arbitrary groups ---------------------------------------------------------

def test_lic_groups_split_and_no_masking():
    skin = {i: ("dark" if i < 20 else "light") for i in range(100)}
    train, test = L.balanced_split(skin, seed=0, groups=("dark", "light"))
    # minority 20 -> 2 test and 18 train per group, dark first
    assert len(train) == 36 and len(test) == 4
    assert all(skin[i] == "dark" for i in train[:18]) and all(skin[i] == "light"
                                                             for i in train[18:])
    assert L.preprocess("A Man's dog.", words=None) == "a man s dog"
    assert L.preprocess("A Man's dog.") == "a [MASK] s dog"
    with pytest.raises(ValueError, match="two or more distinct groups"):
        L.balanced_split(skin, 0, groups=("dark",))


def test_lic_race_reads_unmasked_words():
    """words=None keeps every word: here the group is told by a gender word, so the unmasked
    classifier reads it (LIC_M far above 25) and the masked one cannot (about 25)."""
    rng = np.random.default_rng(0)
    caps, skin = {}, {}
    for i in range(600):
        s = "dark" if i % 3 == 0 else "light"
        caps[i] = f"a {'man' if s == 'dark' else 'woman'} " + \
            " ".join(rng.choice(["on", "a", "street", "bench", "with", "dog"], 4))
        skin[i] = s
    kw = dict(seeds=2, config="ci", groups=("dark", "light"))
    r = L.lic_details(caps, None, skin, words=None, **kw)
    assert r["n_images_by_gender"] == {"dark": 200, "light": 400}
    assert r["n_train_per_gender"] == 180 and r["LIC_M"] > 75
    assert L.lic_details(caps, None, skin, words="lic", **kw)["LIC_M"] < 40


# --- comparison with the thesis -----------------------------------------------------------

def test_compare_and_ordering_by_hand():
    paper = pd.DataFrame([
        # LIC_M printed twice: Table 2.2 with ± wins over Table 2.1's plain value
        {"table": "2.1", "line": 1, "model": "nic", "study": "gender", "encoder": "lstm",
         "metric": "LIC_M", "value": 43.2, "spread": 0.05, "spread_kind": "rounding"},
        {"table": "2.2", "line": 2, "model": "nic", "study": "gender", "encoder": "lstm",
         "metric": "LIC_M", "value": 43.2, "spread": 1.5, "spread_kind": "std"},
        {"table": "2.2", "line": 2, "model": "nic_equalizer", "study": "gender",
         "encoder": "lstm", "metric": "LIC_M", "value": 51.3, "spread": 0.7,
         "spread_kind": "std"},
        {"table": "2.1", "line": 1, "model": "sat", "study": "gender", "encoder": "",
         "metric": "Error", "value": 7.3, "spread": 0.05, "spread_kind": "rounding"}])
    ours = {"nic": {"gender/lstm/LIC_M": {"mean": 44.5, "ci95": 2.0, "n": 3}},
            "nic_equalizer": {"gender/lstm/LIC_M": {"mean": 49.0, "ci95": 1.0, "n": 3}}}
    rows = {(r["model"], r["metric"]): r for r in P.compare(ours, paper)}
    nic = rows[("nic", "LIC_M")]
    assert (nic["table"], nic["spread"], nic["within"]) == ("2.2", 1.5, True)
    assert nic["diff"] == pytest.approx(1.3)
    assert rows[("nic_equalizer", "LIC_M")]["within"] is False      # 2.3 > 0.7
    assert rows[("sat", "Error")]["ours"] is None and rows[("sat", "Error")]["within"] is None
    from biaslab.report import published as R
    o = R.ordering(list(rows.values()), "gender", "lstm", "LIC_M")
    # 51.3 - 43.2 = 8.1 > 1.5 + 0.7: separated, and ours keeps NIC < NIC+Equalizer
    assert (o["n_separated"], o["n_agree"], o["disagree"]) == (1, 1, [])
    swapped = [dict(r, ours=100 - r["ours"]) if r["ours"] is not None else r
               for r in rows.values()]
    assert R.ordering(swapped, "gender", "lstm", "LIC_M")["disagree"] == [["nic",
                                                                           "nic_equalizer"]]


def test_paper_tables_csv_is_the_thesis():
    """The typed tables: 9 models x (11 Table 2.1 columns + 9 Table 2.2 + 9 Table 2.5 cells),
    spot values read off ../shared/papers/002 (Tables 2.1, 2.2, 2.5)."""
    t = P.read_paper_tables(REPO / "published/paper_tables.csv")
    assert len(t) == 9 * (11 + 9 + 9)

    def v(table, model, study, enc, metric):
        r = t[(t.table == table) & (t.model == model) & (t.study == study)
              & (t.encoder == enc) & (t.metric == metric)]
        assert len(r) == 1
        return float(r.value.iloc[0]), float(r.spread.iloc[0])
    assert v("2.1", "nic", "gender", "", "Ratio") == (2.47, 0.005)
    assert v("2.2", "nic_equalizer", "gender", "lstm", "LIC_M") == (51.3, 0.7)
    assert v("2.2", "transformer", "gender", "bert_ft", "LIC_M") == (54.1, 1.2)
    assert v("2.5", "att2in", "race", "lstm", "LIC_M") == (35.2, 2.3)
    assert v("2.5", "oscar", "race", "bert_pre", "LIC") == (2.6, 0.05)


def test_paper_tables_bad_rows(tmp_path):
    src = (REPO / "published/paper_tables.csv").read_text().splitlines()
    bad = tmp_path / "t.csv"
    bad.write_text("\n".join(src[:3] + [src[3].replace(",nic,", ",nick,")]) + "\n")
    with pytest.raises(InputError, match=r"unknown model\(s\) \['nick'\]"):
        P.read_paper_tables(bad)
    bad.write_text("\n".join(src[:2] + [src[2].replace(",43.2,", ",4x,")]) + "\n")
    with pytest.raises(InputError, match="line 3: value '4x' is not a number"):
        P.read_paper_tables(bad)


# --- the stages on a small set written here -----------------------------------------------

def _tiny_release(root: Path, models=("nic", "oscar")) -> None:
    """Two 'models' on 600 gender / 450 race images: oscar's captions carry a context word of
    the image's group (kitchen for women, skateboard for men; dark: 'night', light: 'beach'),
    nic's do not."""
    rng = np.random.default_rng(1)
    for m in models:
        g_rows, r_rows = [], []
        for i in range(600):
            g = "Female" if i % 2 else "Male"
            ctx = ("kitchen" if g == "Female" else "skateboard") if m == "oscar" else \
                rng.choice(["kitchen", "skateboard"])
            word = ("woman" if g == "Female" else "man") if i % 7 else "person"
            g_rows.append(_row(i, f"a {word} with a {ctx} {rng.choice(['here', 'there'])}",
                               g, "Light"))
        for i in range(450):
            s = "Dark" if i % 3 == 0 else "Light"
            ctx = ("night" if s == "Dark" else "beach") if m == "oscar" else \
                rng.choice(["night", "beach"])
            r_rows.append(_row(1000 + i, f"a person on a {ctx}", "Male", s))
        r_rows.append(_row(5000, "a person", "Male", "Unsure"))
        _write(root, m, "gender", g_rows)
        _write(root, m, "race", r_rows)


def _run_bias(tmp_path: Path, lic: dict | None = None, **published) -> dict:
    """stage published_bias with the repo's params, `published` updated; -> its JSON."""
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["published"].update(n_boot=200, **published)
    params["published"]["lic"].update(lic or {})
    pfile = tmp_path / "params.yaml"
    pfile.write_text(yaml.safe_dump(params))
    out = tmp_path / "published.json"
    run_checked([sys.executable, "stages/published_bias.py", "--params", str(pfile), "--out",
                 str(out)], REPO, None)
    return json.loads(out.read_text())


def _run_report(tmp_path: Path, paper: Path | None = None) -> tuple[str, dict, Path]:
    """stage published_report on tmp_path/published.json -> (markdown, compare JSON, png)."""
    md, cmp_, png = tmp_path / "p.md", tmp_path / "c.json", tmp_path / "l.png"
    run_checked([sys.executable, "stages/published_report.py", "--metrics",
                 str(tmp_path / "published.json"), "--out", str(md), "--compare", str(cmp_),
                 "--plot", str(png)] + (["--paper", str(paper)] if paper else []), REPO, None)
    return md.read_text(), json.loads(cmp_.read_text()), png


def test_stages_on_a_small_release(tmp_path):
    root = tmp_path / "release"
    _tiny_release(root)
    d = _run_bias(tmp_path, lic={"seeds": 2}, root=str(root), models=["nic", "oscar"],
                  workers=2, ba={"top_k": 50, "min_count": 5, "n_boot": 200})
    nic, osc = d["models"]["nic"], d["models"]["oscar"]
    assert nic["n_images"] == {"gender": 600, "race": 451}
    # the released files are not a DVC dep: their digests are in the out
    import hashlib
    assert d["inputs"] == {f.name: hashlib.sha256(f.read_bytes()).hexdigest()
                           for f in sorted(root.glob("*.jsonl.gz"))}
    assert nic["n_unlabelled"] == {"gender": 0, "race": 1}
    # the captions name the right gender or none (ids % 7 == 0: "person"): Error 0; 300 odd
    # (female) ids less the 43 odd multiples of 7, the same for the even (male) ids
    assert nic["gender"]["Error"]["mean"] == 0.0
    assert (nic["gender"]["n_man"], nic["gender"]["n_woman"]) == (257, 257)
    assert nic["gender"]["Ratio"]["mean"] == 1.0
    # context that gives the group away: oscar's LIC_M is far above nic's, for both studies
    assert osc["gender"]["LIC_M"]["mean"] > 75 and nic["gender"]["LIC_M"]["mean"] < 45
    assert osc["race"]["LIC_M"]["mean"] > 75 and nic["race"]["LIC_M"]["mean"] < 45
    assert nic["race"]["n_by_group"] == {"dark": 150, "light": 300}
    assert len(nic["gender"]["LIC_M_per_seed"]) == 2 and nic["gender"]["LIC_M"]["n"] == 2
    # DBAC needs the human captions: said so, nothing computed
    assert nic["gender"]["DBAC"] == {"skipped": "needs the human captions of the same images "
                                                "(published.human_captions)"}
    assert "DBAC" not in nic["race"]

    text, cmp_, png = _run_report(tmp_path)
    assert "| DBAC (Nair, Tokas & Kerner 2025) |" in text
    assert "| NIC | 2.47 (rounding ±0.005) |" in text and "| OSCAR |" in text
    assert "## Not available from these files" in text and "LIC_D, LIC" in text
    assert {r["model"] for r in cmp_["rows"]} == {"nic", "oscar"}
    assert png.stat().st_size > 1000


def test_stage_rejects_bad_params(tmp_path):
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["published"]["models"] = ["nic", "gpt4"]
    pfile = tmp_path / "params.yaml"
    pfile.write_text(yaml.safe_dump(params))
    r = subprocess.run([sys.executable, "stages/published_bias.py", "--params", str(pfile),
                        "--out", str(tmp_path / "o.json")], cwd=REPO, capture_output=True,
                       text=True)
    assert r.returncode == 2 and "gpt4" in r.stderr
    assert r.stderr.startswith(f"published_bias: {pfile}: published.models: must list")
    assert not (tmp_path / "o.json").exists()


# --- the real released files (../shared/published-captions) ------------------------------

#: where the released files and the thesis' Table 2.1 differ by more than the printed
#: rounding (checked against the released files): Transformer's Ratio (5,773 man / 2,584 woman
#: captions = 2.234; printed 2.18) and NIC's Error (1,536 / 10,780 = 14.249 %; printed 14.3)
KNOWN_TABLE_2_1_DIFFERENCES = {("transformer", "Ratio"), ("nic", "Error")}


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/published-captions not present")
def test_released_outputs_give_table_2_1_ratio_and_error():
    """Known answers: Ratio and Error need no classifier, so the released captions must give
    the thesis' printed Table 2.1 values to its rounding, except the two listed."""
    paper = P.read_paper_tables(REPO / "published/paper_tables.csv")
    t = paper[(paper.table == "2.1") & paper.metric.isin(["Ratio", "Error"])]
    assert len(t) == 18
    off = set()
    for model in P.MODELS:
        df = P.read_outputs(SHARED, model, "gender")
        assert len(df) == 10780 and len(P.labels(df, "gender")) == 10780
        r = P.ratio_error(df, n_boot=100)
        for metric in ("Ratio", "Error"):
            row = t[(t.model == model) & (t.metric == metric)].iloc[0]
            if abs(r[metric]["mean"] - row.value) > row.spread + 1e-9:
                off.add((model, metric))
    assert off == KNOWN_TABLE_2_1_DIFFERENCES
    race = P.read_outputs(SHARED, "nic", "race")
    assert P.labels(race, "race") and set(P.labels(race, "race").values()) == {"dark",
                                                                                 "light"}
    assert not math.isnan(P.ratio_error(race, n_boot=100)["Ratio"]["mean"])


def test_human_captions_add_lic_d_lic_and_quality(tmp_path):
    """with a COCO captions file of the same images the profile computes
    LIC_D, LIC (= LIC_M - LIC_D per seed) and the caption quality, and the report lists them."""
    root = tmp_path / "release"
    _tiny_release(root, models=("oscar",))
    rng = np.random.default_rng(2)
    anns, k = [], 0
    for i in list(range(600)) + list(range(1000, 1450)):
        female = (i % 2 == 1) if i < 1000 else ((i - 1000) % 3 == 0)
        for _ in range(2):
            k += 1
            ctx = rng.choice(["kitchen", "skateboard", "night", "beach"])
            anns.append({"id": k, "image_id": i,
                         "caption": f"a {'woman' if female else 'man'} with a {ctx}"})
    caps = tmp_path / "captions_val2014.json"
    caps.write_text(json.dumps({"annotations": anns}))
    d = _run_bias(tmp_path, lic={"seeds": 2, "max_human_captions": 1}, root=str(root),
                  models=["oscar"], workers=1, human_captions=str(caps),
                  ba={"top_k": 50, "min_count": 5, "n_boot": 200})["models"]["oscar"]
    for study in ("gender", "race"):
        r = d[study]
        assert r["n_human_indices"] == 1 and r["n_dropped_without_human"] == 0
        # human captions with a random context: LIC_D near chance, the model's far above
        assert r["LIC_D"]["mean"] < 45 < 75 < r["LIC_M"]["mean"]
        assert r["LIC"]["mean"] == pytest.approx(r["LIC_M"]["mean"] - r["LIC_D"]["mean"],
                                                 abs=1e-5)
    # DBAC: the model ties the context to gender (kitchen / skateboard), the human
    # captions draw it at random, so gender is more predictable from the model's captions:
    # T->A > 0 (lambda_M ~ 1, lambda_D ~ 0.5 by construction). A->T is computed but not
    # asserted: its lambda is a product over the 79 COCO categories, dominated here by the
    # short-trained attacker's outputs for the 78 never-mentioned ones (measured: lambda_M
    # 0.208, lambda_D 0.256, so DBAC_direct A->T -0.10 although the truth is > 0).
    db = d["gender"]["DBAC"]
    assert db["n_images"] == 600 and db["seeds"] == [0, 1]
    r = db["T->A"]
    assert r["lambda_M_direct"]["mean"] > 0.95 and abs(r["lambda_D_direct"]["mean"] - 0.5) < 0.1
    assert r["DBAC_direct"]["mean"] - r["DBAC_direct"]["ci95"] > 0.2
    assert db["A->T"]["DBAC_direct"]["n"] == 2
    q = d["gender"]["quality"]
    assert q["n_images"] == 600 and all(0 <= q[m] <= 100 for m in ("BLEU-4", "METEOR",
                                                                   "ROUGE-L"))
    text = _run_report(tmp_path)[0]
    assert "| LIC_D: thesis |" in text.replace("model | study ", "")
    assert "| OSCAR | gender | 39.3 (±0.8) |" in text and "CIDEr: thesis" in text
    na = text.split("## Not available from these files")[1]
    assert "LIC_D, LIC" not in na and "DBA_G" in na and "DBAC" not in na
    assert "| model | T→A (prior) | T→A (direct) | A→T (prior) | A→T (direct) | images | " \
        "n seeds |" in text and "| OSCAR | " + f"{100 * db['T->A']['DBAC']['mean']:.1f} ± " in text
    assert " | 600 | 2 |" in text


@pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/published-captions not present")
def test_real_slice_and_a_wrong_paper_value(tmp_path):
    """the profile on a 200-image slice of two released models; a paper value
    changed on purpose is marked outside its spread, and the report names the model."""
    root = tmp_path / "slice"
    for m in ("nic", "oscar"):
        for study in ("gender", "race"):
            with gzip.open(P.outputs_path(SHARED, m, study), "rt") as f:
                lines = [next(f) for _ in range(200)]
            _write(root, m, study, [ln.rstrip("\n") for ln in lines])
    d = _run_bias(tmp_path, lic={"seeds": 2}, root=str(root), models=["nic", "oscar"],
                  ba={"top_k": 100, "min_count": 5, "n_boot": 200})
    assert d["models"]["nic"]["n_images"] == {"gender": 200, "race": 200}
    # the slice's own Ratio, as the library computes it on these 200 captions
    from biaslab.metrics.captions import ratio_details
    df = P.read_outputs(root, "oscar", "gender")
    want = ratio_details(dict(zip(df.image_id, df.caption)), P.labels(df, "gender"))["ratio"]
    assert d["models"]["oscar"]["gender"]["Ratio"]["mean"] == pytest.approx(want, abs=1e-6)
    # OSCAR's Ratio printed as our own value (within) and NIC's as 9.99 (deliberately wrong)
    paper = pd.read_csv(REPO / "published/paper_tables.csv", dtype=str,
                        keep_default_na=False)
    is_ratio = (paper.table == "2.1") & (paper.metric == "Ratio")
    paper.loc[is_ratio & (paper.model == "oscar"), "value"] = f"{want:.2f}"
    paper.loc[is_ratio & (paper.model == "nic"), "value"] = "9.99"
    ptab = tmp_path / "paper.csv"
    paper.to_csv(ptab, index=False)
    text, cmp_, _ = _run_report(tmp_path, paper=ptab)
    rows = {(r["model"], r["metric"]): r for r in cmp_["rows"]}
    assert rows[("nic", "Ratio")]["within"] is False and rows[("oscar", "Ratio")]["within"]
    assert "| NIC | 9.99 (rounding ±0.005) |" in text and "NIC (Ratio:" in text
    assert "OSCAR (Ratio" not in text


def test_human_captions_from_several_files_and_bad_values(tmp_path):
    """published.human_captions may list several COCO captions files (coco-mini's train2017 and
    val2017 hold 1,333 of the gender study's val2014 images); a bad value stops the stage."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("pb", REPO / "stages/published_bias.py")
    pb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pb)
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"annotations": [{"id": 2, "image_id": 1, "caption": "a man"},
                                             {"id": 1, "image_id": 1, "caption": "a boy"}]}))
    b.write_text(json.dumps({"annotations": [{"id": 1, "image_id": 7, "caption": "a woman"},
                                             {"id": 3, "image_id": 1, "caption": "a dog"}]}))
    assert pb.read_captions_files([str(a), str(b)]) == {1: ["a boy", "a man", "a dog"],
                                                       7: ["a woman"]}
    assert pb.read_captions_files(str(b)) == {1: ["a dog"], 7: ["a woman"]}
    base = yaml.safe_load((REPO / "params.yaml").read_text())["published"]
    for bad in ([], [""], 3):
        with pytest.raises(pb.ParamError, match="human_captions"):
            pb.check({**base, "human_captions": bad})
