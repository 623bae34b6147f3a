"""Caption quality metrics: COCO metrics via pycocoevalcap (needs Java), CLIPScore arithmetic,
and HFClipScorer on a tiny random CLIP built offline."""
from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

from biaslab.metrics import quality

needs_java = pytest.mark.skipif(shutil.which("java") is None,
                                reason="Java not installed (see README set-up)")

REFS = {
    1: ["A man riding a horse on the beach.", "a person rides a brown horse near the sea"],
    2: ["A cat sleeping on a red couch.", "a cat lying on a sofa"],
    3: ["Two dogs playing with a frisbee in a park.", "dogs chasing a frisbee on the grass"],
}


# --------------------------------------------------------------------------------------------
# COCO metrics
# --------------------------------------------------------------------------------------------

@needs_java
@pytest.mark.slow  # METEOR loads its paraphrase table twice: ~20 s
def test_reused_meteor_server_scores_like_a_fresh_one():
    """One METEOR server per process (biaslab.metrics.quality._meteor): a call after other
    calls scores exactly as a fresh server; tokenising references and predictions in one
    PTBTokenizer run gives the same tokens as two runs."""
    a = {i: refs[1] for i, refs in REFS.items()}
    b = {1: "a horse", 2: "a red couch with a cat", 3: "two dogs"}
    quality.close_meteor()
    fresh_b = quality.coco_caption_scores(b, REFS, metrics=("METEOR",))["METEOR"]
    quality.close_meteor()
    quality.coco_caption_scores(a, REFS, metrics=("METEOR",))
    again_b = quality.coco_caption_scores(b, REFS, metrics=("METEOR",))["METEOR"]
    assert again_b == fresh_b and 0 < fresh_b < 100
    quality.close_meteor()
    assert quality._METEOR is None

    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer
    gts = {j: [{"caption": r} for r in REFS[i]] for j, i in enumerate(REFS)}
    res = {j: [{"caption": b[i]}] for j, i in enumerate(REFS)}
    both = quality.tokenize_all({**gts, **{3 + j: v for j, v in res.items()}})
    assert [both[j] for j in range(3)] == [PTBTokenizer().tokenize(gts)[j] for j in range(3)]
    assert [both[3 + j] for j in range(3)] == [PTBTokenizer().tokenize(res)[j]
                                               for j in range(3)]


@needs_java
@pytest.mark.slow  # METEOR loads its paraphrase table: ~10-25 s
def test_identical_captions_score_high():
    preds = {i: refs[0] for i, refs in REFS.items()}
    s = quality.coco_caption_scores(preds, REFS, metrics=("BLEU-4", "CIDEr", "METEOR"))
    assert list(s) == ["BLEU-4", "CIDEr", "METEOR"]
    assert s["BLEU-4"] == pytest.approx(100.0, abs=1e-3)   # every n-gram matches, BP = 1
    assert s["METEOR"] > 90
    swapped = {1: REFS[2][0], 2: REFS[3][0], 3: REFS[1][0]}
    s2 = quality.coco_caption_scores(swapped, REFS, metrics=("BLEU-4", "CIDEr"))
    assert s2["BLEU-4"] < 1 and s2["CIDEr"] < s["CIDEr"] / 10


@needs_java
def test_bleu1_brevity_penalty_by_hand():
    # "a man" vs "a man riding": unigram precision 1, BP = exp(1 - 3/2)
    s = quality.coco_caption_scores({7: "A man."}, {7: ["a man riding"]},
                                    metrics=("BLEU-1", "ROUGE-L"), scale=1.0)
    assert s["BLEU-1"] == pytest.approx(math.exp(-0.5), rel=1e-6)
    # ROUGE-L (beta = 1.2): LCS 2, P = 1, R = 2/3 -> (1 + b^2) P R / (R + b^2 P)
    b2 = 1.2 ** 2
    assert s["ROUGE-L"] == pytest.approx((1 + b2) * (2 / 3) / (2 / 3 + b2), rel=1e-6)


def test_coco_scores_input_errors(monkeypatch):
    with pytest.raises(ValueError, match="unsupported"):
        quality.coco_caption_scores({1: "a"}, {1: ["a"]}, metrics=("SPICE",))
    with pytest.raises(ValueError, match="no references"):
        quality.coco_caption_scores({1: "a", 2: "b"}, {1: ["a"]})
    with pytest.raises(ValueError):
        quality.coco_caption_scores({}, {1: ["a"]})
    monkeypatch.setattr(quality.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeError, match="README"):
        quality.coco_caption_scores({1: "a man"}, {1: ["a man"]})


# --------------------------------------------------------------------------------------------
# CLIPScore
# --------------------------------------------------------------------------------------------

def test_clip_score_arithmetic():
    img = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0], [3.0, 4.0]])
    txt = np.array([[5.0, 0.0], [1.0, 0.0], [-1.0, -1.0], [1.0, 0.0]])
    # cos = 1, 0, -1 (clipped to 0), 0.6 -> 2.5 * (1, 0, 0, 0.6)
    mean, per = quality.clip_score(img, txt, per_item=True)
    np.testing.assert_allclose(per, [2.5, 0.0, 0.0, 1.5])
    assert mean == pytest.approx(1.0)
    assert quality.clip_score(img, txt, w=1.0) == pytest.approx(0.4)
    with pytest.raises(ValueError):
        quality.clip_score(img, txt[:2])
    with pytest.raises(ValueError):
        quality.clip_score(np.zeros((1, 2)), np.ones((1, 2)))


class _FakeScorer:
    def __init__(self):
        self.texts = None

    def encode_images(self, paths):
        return np.array([[1.0, 0.0]] * len(paths))

    def encode_texts(self, texts):
        self.texts = list(texts)
        return np.array([[1.0, 0.0] if "man" in t else [0.0, 1.0] for t in texts])


def test_clip_score_with_protocol_and_prefix():
    s = _FakeScorer()
    assert isinstance(s, quality.ClipScorer)
    assert quality.clip_score_with(s, ["a.jpg", "b.jpg"], ["a man", "a cat"]) == \
        pytest.approx(1.25)
    assert s.texts == ["A photo depicts a man", "A photo depicts a cat"]
    quality.clip_score_with(s, ["a.jpg"], ["a cat"], prefix="")
    assert s.texts == ["a cat"]
    with pytest.raises(ValueError):
        quality.clip_score_with(s, ["a.jpg"], ["a", "b"])


@pytest.fixture(scope="module")
def tiny_clip_dir(tmp_path_factory):
    """A randomly initialised, tiny CLIPModel + CLIPProcessor saved with save_pretrained.

    The tokenizer is a byte-level BPE with no merges (one token per byte), built offline."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from tokenizers.pre_tokenizers import ByteLevel

    vocab = {"<|startoftext|>": 0, "<|endoftext|>": 1}
    for ch in sorted(ByteLevel.alphabet()):
        vocab[ch] = len(vocab)
        vocab[ch + "</w>"] = len(vocab)
    cfg = transformers.CLIPConfig(
        text_config=dict(vocab_size=len(vocab), hidden_size=16, intermediate_size=32,
                         num_hidden_layers=1, num_attention_heads=2,
                         max_position_embeddings=80, bos_token_id=0, eos_token_id=1,
                         pad_token_id=1),
        vision_config=dict(image_size=32, patch_size=16, hidden_size=16, intermediate_size=32,
                           num_hidden_layers=1, num_attention_heads=2),
        projection_dim=8)
    torch.manual_seed(0)
    d = tmp_path_factory.mktemp("tiny_clip")
    transformers.CLIPModel(cfg).save_pretrained(d)
    tok = transformers.CLIPTokenizer(vocab=vocab, merges=[], model_max_length=77)
    ip = transformers.CLIPImageProcessor(size={"shortest_edge": 32},
                                         crop_size={"height": 32, "width": 32})
    transformers.CLIPProcessor(image_processor=ip, tokenizer=tok).save_pretrained(d)
    return d


def test_hf_clip_scorer_tiny_model(tiny_clip_dir, tmp_path):
    from PIL import Image

    rng = np.random.default_rng(0)
    paths = []
    for i in range(3):
        p = tmp_path / f"img{i}.png"
        Image.fromarray((rng.random((40, 50, 3)) * 255).astype("uint8")).save(p)
        paths.append(str(p))
    scorer = quality.HFClipScorer(str(tiny_clip_dir), batch_size=2)
    assert isinstance(scorer, quality.ClipScorer)
    img = scorer.encode_images(paths)
    caps = ["a man riding a horse", "a cat", "two dogs playing with a frisbee in a park"]
    txt = scorer.encode_texts(caps)
    assert img.shape == (3, 8) and txt.shape == (3, 8)
    assert np.isfinite(img).all() and np.isfinite(txt).all()
    # batching does not change the embeddings
    np.testing.assert_allclose(scorer.encode_texts(caps[:1]), txt[:1], atol=1e-5)
    s = quality.clip_score_with(scorer, paths, caps)
    manual = quality.clip_score(img, scorer.encode_texts(["A photo depicts " + c for c in caps]))
    assert s == pytest.approx(manual, abs=1e-6)
    assert 0.0 <= s <= 2.5

    # a plain callable tokenizer instead of the processor's
    def tokenize(texts):
        import torch
        ids = [[0] + [2 + 2 * (b % 200) for b in t.encode()][:20] + [1] for t in texts]
        n = max(map(len, ids))
        return {"input_ids": torch.tensor([x + [1] * (n - len(x)) for x in ids]),
                "attention_mask": torch.tensor([[1] * len(x) + [0] * (n - len(x))
                                                for x in ids])}

    s2 = quality.HFClipScorer(str(tiny_clip_dir), tokenizer=tokenize)
    assert s2.encode_texts(caps).shape == (3, 8)
