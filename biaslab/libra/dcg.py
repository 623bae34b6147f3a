"""Debiasing Caption Generator (DCG) of LIBRA: paper 003 sec. 4 (Eq. 9) and supp. 3.2; thesis
(paper 002) sec. 3.4 (Eq. 3.9).

DCG is an encoder-decoder captioner: the encoder is a Transformer vision-and-language model
that reads an image ``I`` and a biased caption ``y*`` with ``100 eta %`` of its words masked
(eta = 0.2); the decoder is a Transformer language model that generates through cross-attention
on the encoder output and is trained to recover the original caption ``y`` with
``L_ce = -sum_t log p(y_t | y_<t, I, y*)`` (Eq. 9). At inference the output caption ``y_c`` of any
captioner is masked the same way and DCG generates the debiased caption.

Implementation: ``transformers.EncoderDecoderModel`` with a ``ViltModel`` encoder and a
``GPT2LMHeadModel`` decoder (``add_cross_attention=True``), the paper's ViLT + GPT-2.

* Paper tier: ``encoder: dandelin/vilt-b32-mlm`` (or any ViLT name/dir) with its BERT tokenizer,
  ``decoder: gpt2`` with its tokenizer (pad = eos), ``image_input: pixels`` (ViLT's own patch
  projection + position embeddings, images resized to ``pixel_size``, mean/std 0.5).
* Offline tier (``encoder: tiny``, ``decoder: tiny``): the same classes built from small
  configs (``hidden`` 128, ``layers`` 2) and trained from scratch, one word-level tokenizer built
  on the captions (``t5.build_caption_tokenizer``, lower-cased) for both sides, and
  ``image_input: features``: the frozen backbone feature of the image (``biaslab.models.features``,
  EfficientNet-Lite0 1280-d, cached by the ``features`` stage) is linearly projected to
  ``n_image_tokens`` tokens with a learned position embedding ("linear projection and position
  embedding", sec. 4) and given to ViLT as ``image_embeds``. Chosen because ViLT patches trained
  from scratch on a few thousand images learn little, while the frozen backbone carries the
  visual evidence (e.g. of gender) that DCG must read.

Formulations (``formulation``; which one a run used is in ``metrics/dcg.json``):

* ``generate`` (paper 003 Eq. 9, the tier ``models=paper``): the GPT-2 decoder regenerates the
  whole caption.
* ``edit`` (the default's tables): the ViLT encoder's output at each input word's first token
  goes through a linear head over ``[KEEP] + words`` (``output_vocabulary``); the target of a
  word is ``[KEEP]`` when the original has the same word there (``align_words``), else the
  original's word; a masked word's target is always its word. Inference keeps every word
  predicted ``[KEEP]`` (or predicted as itself) character for character and replaces the
  others (``min_edit_prob`` gates a replacement). Eq. 9's loss summed over words instead of
  decoder tokens; the encoder, image input and eta masking in training are the paper's.
  Why (measured on the default): the generate DCG trained on BCS pairs changed
  91.5 % of correct human captions and made 8 % of their genders wrong; given also identity and
  swap pairs it kept the gender (99 %) but still rewrote 35.5 % of captions; the edit DCG with
  the same pairs changes 4.5 % and keeps 98 % of genders. Pairs that need an insertion or a
  deletion cannot be expressed and are left out of ``edit`` training (counted in
  ``metrics/dcg.json`` ``unaligned_pairs``; BCS changes words in place, so none on the default).
  At inference ``infer_eta`` (default 0 in params) replaces the paper's masking: a masked word
  that was right can only be lost (eta 0.2 at inference: 65 % of captions changed).

Choices (documented, tested): the masked words are ``k = max(1, round(eta * n))`` words of the
input caption chosen uniformly (any word, gender words included, so that DCG must read the image
to restore them); masking at inference uses a seeded generator (``seed``), so outputs are
reproducible. Eq. 9 is summed over the tokens of each caption (including the end token) and
averaged over the batch. Greedy decoding by default, beam search with ``num_beams > 1``.
"""
from __future__ import annotations

import dataclasses
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from biaslab.runtime.io import atomic_dir, without_run_stats
from biaslab.libra.t5 import quiet, threads
from biaslab.libra.text import n_to_mask, sample_positions, word_spans
from biaslab.runtime.progress import bar as progress_bar
from biaslab.libra.settings import (EDIT, FEATURES, GENERATE, PIXELS, TINY,  # noqa: F401
                                    DCGSettings, dcg_settings)
from biaslab.libra.dcg_model import (KEEP, DCG, align_words, build_dcg,  # noqa: F401
                                     build_tokenizer, output_vocabulary, set_ids)


_FORMAT = 2    # 2: + formulation "edit" (format-1 generate DCGs still load)


def settings_from_dict(d: dict | None) -> DCGSettings:
    """``DCGSettings`` from a params dict (``libra.dcg``); unknown keys, values of the wrong
    type and values out of range raise ``ValueError`` naming them
    (:func:`biaslab.libra.settings.dcg_settings`)."""
    return dcg_settings(d)


def mask_caption(caption: str, eta: float, rng: np.random.Generator,
                 mask_token: str = "[MASK]") -> str:
    """``caption`` with ``max(1, round(eta * n))`` of its ``n`` words (uniform, without
    replacement) replaced by ``mask_token`` (sec. 4: "mask 100 eta percent of words");
    unchanged when ``eta == 0``."""
    spans = word_spans(caption)
    k = n_to_mask(len(spans), eta)
    if k == 0:
        return caption
    pos = set(rng.choice(len(spans), size=k, replace=False).tolist())
    out, last = [], 0
    for i, (s, e, _) in enumerate(spans):
        out.append(caption[last:s])
        out.append(mask_token if i in pos else caption[s:e])
        last = e
    out.append(caption[last:])
    return "".join(out)


def context_balanced_pairs(genders: Sequence[str], context_genders: Sequence[str],
                           n_pairs: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``n_pairs`` captions drawn so that the caption's gender is independent of the
    gender its context predicts: ``n_pairs / 4`` from each cell (gender female / male) x
    (context agrees / disagrees), without replacement while a cell lasts, then with
    (counter-stereotypical captions are few: 64 of 1117 on the default). Empty cells are
    skipped and their share spread over the others.

    Why: identity (``y -> y``) and swap (``swap(y) -> y``) pairs drawn at random from a biased
    D teach "the gender word that agrees with the context is right", i.e. context -> gender
    bias, the bias DCG must remove (measured on the default: the DCG then kept a captioner's
    context-driven gender errors, KEEP probability 0.55-0.98 on 10 of 13). Balanced, only the
    image tells a pair from its twin.

    Args:
        genders: each caption's gender (``female``/``male``).
        context_genders: the gender f_g (Eq. 2) predicts from the caption with its gender
            words masked.
        n_pairs: how many indices (>= 0).
        rng: the draw's generator.

    Returns:
        int64 array of ``n_pairs`` indices (sorted within each cell), or empty when no
        caption has a gender.
    """
    g = np.asarray(list(genders), dtype=object)
    c = np.asarray(list(context_genders), dtype=object)
    if len(g) != len(c):
        raise ValueError(f"{len(g)} genders but {len(c)} context genders")
    cells = [np.flatnonzero((g == gg) & ((c == gg) == agree))
             for gg in ("female", "male") for agree in (True, False)]
    cells = [x for x in cells if len(x)]
    if not cells or n_pairs <= 0:
        return np.zeros(0, np.int64)
    share = [n_pairs // len(cells) + (k < n_pairs % len(cells)) for k in range(len(cells))]
    out = []
    for cell, k in zip(cells, share):
        first = rng.permutation(cell)[:k]
        more = rng.choice(cell, size=k - len(first), replace=True) if k > len(first) else []
        out.append(np.sort(np.concatenate([first, np.asarray(more, np.int64)])))
    return np.concatenate(out).astype(np.int64)


def _match_case(word: str, like: str) -> str:
    if like.isupper() and len(like) > 1:
        return word.upper()
    return word[:1].upper() + word[1:] if like[:1].isupper() else word

# --------------------------------------------------------------------------------------------
# training / inference


def _take(images, idx):
    if isinstance(images, np.ndarray):
        return images[idx]
    return [images[i] for i in idx]


def train_dcg(biased: Sequence[str], originals: Sequence[str], images,
              settings: DCGSettings | None = None, seed: int = 0,
              val: tuple[Sequence[str], Sequence[str], Any] | None = None,
              on_epoch: Callable[[int, dict], None] | None = None,
              model: DCG | None = None, progress: bool | None = False) -> DCG:
    """Train DCG with Eq. 9 on pairs (biased ``y*``, original ``y``) and their images.

    Args:
        biased, originals: the synthetic biased captions and their originals (same length).
        images: per pair, features ``(n, F)`` (``image_input="features"``) or image paths.
        settings: ``DCGSettings``; ``eta`` masking is re-sampled every epoch.
        val: optional ``(biased, originals, images)``; its Eq. 9 loss (fixed masks) is added
            to each epoch record as ``val_loss``.
        on_epoch: ``fn(epoch, record)``; record keys ``loss`` (Eq. 9 per caption),
            ``tokens_per_s`` (target tokens per second), ``samples_per_s``, ``lr``,
            ``seconds`` and ``val_loss``.
        model: continue training this DCG instead of building a new one.
        progress: tqdm bar over the training batches of all epochs on stderr
            (``biaslab.runtime.progress.bar``: True / False / None = auto); the model does not depend
            on it.

    Returns:
        the trained ``DCG`` in eval mode (``meta``: history, throughput).

    Raises:
        ValueError: empty or mismatched inputs.
    """
    import torch
    s = settings or DCGSettings()
    n = len(biased)
    if n == 0 or n != len(originals) or n != len(images):
        raise ValueError(f"DCG needs equally many biased captions, originals and images, got "
                         f"{n}, {len(originals)}, {len(images)}")
    feat_dim = int(np.asarray(images).shape[1]) if s.image_input == FEATURES else None
    with threads(s.num_threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        dcg = model or build_dcg(s, list(originals) + list(biased), feat_dim, seed=seed)
        if s.formulation == EDIT:   # pairs a per-word edit cannot express are left out
            keep = [i for i in range(n) if dcg.edit_targets(biased[i], originals[i]) is not None]
            dcg.meta["unaligned_pairs"] = n - len(keep)
            if not keep:
                raise ValueError("no training pair aligns word for word (edit formulation)")
            biased, originals = [biased[i] for i in keep], [originals[i] for i in keep]
            images, n = _take(images, keep), len(keep)
        opt = torch.optim.AdamW([p for p in dcg.parameters() if p.requires_grad], lr=s.lr,
                                weight_decay=s.weight_decay)
        nb = -(-n // s.batch_size)
        total = max(1, nb * s.epochs)
        warm = max(1, int(s.warmup * total))
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda t: min((t + 1) / warm, max(0.0, (total - t) / max(1, total - warm))))
        vbatch = None
        if val is not None and len(val[0]):
            vbatch = _masked_batch(dcg, val[0], val[1], s.eta, np.random.default_rng(seed + 1))
        history, tok_all, sec_all = [], 0, 0.0
        pbar = progress_bar(desc="DCG train", total=total, unit="batch", progress=progress)
        for epoch in range(s.epochs):
            dcg.train()
            t0 = time.perf_counter()
            order = rng.permutation(n)
            tot, ntok = 0.0, 0
            for b in range(0, n, s.batch_size):
                idx = order[b:b + s.batch_size]
                loss, nt = _batch_loss(dcg, _masked_batch(dcg, [biased[i] for i in idx],
                                                          [originals[i] for i in idx], s.eta,
                                                          rng), _take(images, idx))
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(dcg.parameters(), 1.0)
                opt.step()
                sched.step()
                tot += float(loss.detach()) * len(idx)
                ntok += nt
                pbar.update(1)
            sec = time.perf_counter() - t0
            tok_all += ntok
            sec_all += sec
            rec = {"loss": tot / n, "tokens_per_s": ntok / sec if sec else None,
                   "samples_per_s": n / sec if sec else None,
                   "lr": float(sched.get_last_lr()[0]), "seconds": sec}
            if vbatch is not None:
                rec["val_loss"] = _eval_batches(dcg, vbatch, val[2])
            history.append(rec)
            pbar.set_postfix(epoch=f"{epoch + 1}/{s.epochs}", loss=f"{rec['loss']:.3f}")
            if on_epoch is not None:
                on_epoch(epoch, rec)
        pbar.close()
    dcg.eval()
    dcg.meta.update({"seed": int(seed), "n_train": n, "history": history,
                     "train_tokens_per_s": tok_all / sec_all if sec_all else None,
                     "train_samples_per_s": n * s.epochs / sec_all if sec_all else None})
    return dcg


def _masked_batch(dcg: DCG, biased: Sequence[str], originals: Sequence[str], eta: float,
                  rng: np.random.Generator) -> tuple:
    """Training inputs with ``100 eta %`` of each input's words masked: ``("generate",
    masked texts, originals)`` or ``("edit", masked word lists, per-word targets)`` (pairs
    that do not align get all-ignored targets)."""
    mtok = dcg.enc_tok.mask_token
    if dcg.settings.formulation != EDIT:
        return (GENERATE, [mask_caption(c, eta, rng, mtok) for c in biased], list(originals))
    words, targets = [], []
    for b, o in zip(biased, originals):
        w = [x for _, _, x in word_spans(b)]
        pos = sample_positions(len(w), eta, rng) if eta > 0 else []
        t = dcg.edit_targets(b, o, pos)
        words.append([mtok if k in pos else x for k, x in enumerate(w)])
        targets.append(t if t is not None else [-100] * len(w))
    return (EDIT, words, targets)


def _batch_loss(dcg: DCG, batch: tuple, images):
    kind, inputs, targets = batch
    if kind == EDIT:
        return dcg.edit_loss(inputs, images, targets)
    return dcg.loss(inputs, images, targets)


def _eval_batches(dcg: DCG, batch: tuple, images, batch_size: int = 256) -> float:
    import torch
    dcg.eval()
    kind, inputs, targets = batch
    tot = 0.0
    with torch.no_grad():
        for b in range(0, len(inputs), batch_size):
            idx = np.arange(b, min(b + batch_size, len(inputs)))
            loss, _ = _batch_loss(dcg, (kind, [inputs[i] for i in idx],
                                        [targets[i] for i in idx]), _take(images, idx))
            tot += float(loss) * len(idx)
    return tot / max(1, len(inputs))


def debias(dcg: DCG, captions: Sequence[str], images, num_beams: int | None = None,
           eta: float | None = None, seed: int = 0, batch_size: int = 64,
           max_new_tokens: int | None = None, progress: bool | None = False) -> list[str]:
    """DCG inference (sec. 4 "Inference"): mask ``100 eta %`` of the words of each caption
    (seeded), then generate the debiased caption from (masked caption, image).

    Args:
        captions: captions ``y_c`` of any captioner.
        images: per caption, features ``(n, F)`` or image paths (per ``image_input``).
        num_beams: 1 = greedy (default from settings).
        eta: masking rate (default: the trained model's ``eta``).
        seed: masking seed.
        progress: tqdm bar over the captions on stderr (True / False / None = auto,
            ``biaslab.runtime.progress``); the captions do not depend on it.

    Returns:
        debiased captions, lower case (one per input, input order).
    """
    s = dcg.settings
    rate = float(eta) if eta is not None else s.eta if s.infer_eta is None else s.infer_eta
    rng = np.random.default_rng(seed)
    mtok = dcg.enc_tok.mask_token
    edit = s.formulation == EDIT
    if edit:
        spans = [word_spans(c) for c in captions]
        pos = [set(sample_positions(len(sp), rate, rng)) if rate > 0 else set() for sp in spans]
    else:
        masked = [mask_caption(c, rate, rng, mtok) for c in captions]
    out: list[str] = []
    dcg.eval()
    bar = progress_bar(desc="DCG debias", total=len(captions), unit="caption",
                       progress=progress)
    with threads(s.num_threads), bar:
        for b in range(0, len(captions), batch_size):
            idx = np.arange(b, min(b + batch_size, len(captions)))
            if edit:
                out += _apply_edits(dcg, [captions[i] for i in idx], [spans[i] for i in idx],
                                    [pos[i] for i in idx], _take(images, idx))
            else:
                out += dcg.generate_from_masked([masked[i] for i in idx], _take(images, idx),
                                                num_beams, max_new_tokens)
            bar.update(len(idx))
    return out


def _apply_edits(dcg: DCG, captions: Sequence[str], spans: Sequence[list], masked: Sequence[set],
                 images) -> list[str]:
    """``edit`` inference on one batch: per word, ``[KEEP]`` (or a masked word predicted as
    itself) leaves the input's characters as they are; another word replaces it (case of the
    input word kept) when its probability is at least ``min_edit_prob``. Everything between
    words (punctuation, spacing) is the input's."""
    import torch
    mtok = dcg.enc_tok.mask_token
    words = [[mtok if k in m else w for k, (_, _, w) in enumerate(sp)]
             for sp, m in zip(spans, masked)]
    if not any(words):
        return list(captions)
    keep = [k for k, w in enumerate(words) if w]
    with torch.no_grad():
        logits, firsts = dcg.edit_logits([words[k] for k in keep], _take(images, keep))
    out = list(captions)
    gate = dcg.settings.min_edit_prob
    for k, lg, pos in zip(keep, logits, firsts):
        prob = torch.softmax(lg.float(), dim=-1)
        best = torch.argmax(prob, dim=-1).tolist()
        text, last, parts = captions[k], 0, []
        for j, (st, en, w) in enumerate(spans[k]):
            new = w
            c = best[j]
            if pos[j] >= 0 and c != 0 and float(prob[j, c]) >= gate:
                cand = dcg.out_vocab[c]
                if cand != w.lower():
                    new = _match_case(cand, w)
            parts += [text[last:st], new]
            last = en
        out[k] = "".join(parts) + text[last:]
    return out


# --------------------------------------------------------------------------------------------
# save / load


def save(dcg: DCG, directory: str | os.PathLike) -> Path:
    """Save to ``directory`` (replaced atomically): ``dcg.json`` (settings, format, feat_dim,
    meta), ``seq2seq/`` (EncoderDecoderModel), ``image.pt`` (projection, features mode),
    ``enc_tokenizer/`` and ``dec_tokenizer/``."""
    import torch
    edit = dcg.settings.formulation == EDIT
    with atomic_dir(directory) as tmp:
        with quiet():
            if edit:
                dcg.edit_encoder.save_pretrained(tmp / "encoder")
            else:
                dcg.seq2seq.save_pretrained(tmp / "seq2seq")
        dcg.enc_tok.save_pretrained(tmp / "enc_tokenizer")
        if not edit:
            dcg.dec_tok.save_pretrained(tmp / "dec_tokenizer")
        heads = ("img_", "edit_head.") if edit else ("img_",)
        state = {k: v for k, v in dcg.state_dict().items() if k.startswith(heads)}
        if state:
            torch.save(state, tmp / "image.pt")
        meta = {"format": _FORMAT, "settings": dataclasses.asdict(dcg.settings),
                "feat_dim": dcg.feat_dim, "meta": without_run_stats(dcg.meta)}
        if edit:
            meta["out_vocab"] = dcg.out_vocab
        (tmp / "dcg.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return Path(directory)


def _meta_of(directory: Path) -> tuple[dict, DCGSettings]:
    """``dcg.json`` of a saved DCG, checked: ``(meta, settings)``. Raises ``InputError`` naming
    the file and the problem."""
    from biaslab.runtime.io import InputError
    if not directory.is_dir():
        what = "not a directory" if directory.exists() else "not found"
        raise InputError(directory, f"{what} (a trained DCG model directory, stage "
                                    f"dcg_train: data/libra/dcg)")
    meta_p = directory / "dcg.json"
    if not meta_p.is_file():
        raise InputError(meta_p, "missing: not a saved DCG model directory")
    try:
        meta = json.loads(meta_p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(meta_p, f"not valid JSON ({e})") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("settings"), dict):
        raise InputError(meta_p, "not a DCG description: expected a JSON object with "
                                 "'format' and 'settings'")
    if meta.get("format") not in (1, _FORMAT):
        raise InputError(meta_p, f"unsupported format {meta.get('format')!r} (this version "
                                 f"reads 1 and {_FORMAT})")
    try:
        s = settings_from_dict(meta["settings"])
    except (TypeError, ValueError) as e:
        raise InputError(meta_p, f"settings: {e}") from None
    if s.image_input == FEATURES:
        from biaslab.models.features import allowed_image_encoders
        if s.backbone not in allowed_image_encoders():
            # the directory may come from anyone: it must not choose what gets loaded
            raise InputError(meta_p, f"settings.backbone {s.backbone!r} is not one of the "
                                     f"project's image backbones {list(allowed_image_encoders())}")
        from biaslab import registry
        from biaslab.runtime.hub import in_local_cache
        entry = next(e for e in registry.BACKBONES if e.name == s.backbone)
        if str(entry.target).endswith(":HFImageEncoder") and not in_local_cache(s.backbone):
            # a name from a file anyone may have written is never downloaded
            raise InputError(meta_p, f"settings.backbone {s.backbone!r} is not in the local "
                                     f"Hugging Face cache; a saved model's backbone is loaded "
                                     f"from there only, never downloaded")
    return meta, s


def load(directory: str | os.PathLike, num_threads: int | None = None) -> DCG:
    """Load a ``save``d DCG, offline and without running code from the directory: every
    ``from_pretrained`` has ``local_files_only=True`` and reads the directory's own parts, the
    image backbone must be a registered one
    (``biaslab.models.features.allowed_image_encoders``), and the weights are read with ``torch.load(weights_only=True)``.

    Raises:
        InputError: naming the file or part and the problem: no directory, ``dcg.json``
            missing / not JSON / not a DCG description / unknown or ill-typed settings / a
            backbone outside the allow-list, a part missing (``enc_tokenizer``, ``encoder``
            or ``seq2seq`` + ``dec_tokenizer``, ``image.pt``) or unloadable.
    """
    import pickle

    import torch
    from transformers import AutoTokenizer, EncoderDecoderModel

    from biaslab.runtime.io import InputError
    directory = Path(directory)
    meta, s = _meta_of(directory)
    if num_threads is not None:
        s = dataclasses.replace(s, num_threads=num_threads)
    heads = ("img_",) if s.image_input == FEATURES else ()
    heads += ("edit_head.",) if s.formulation == EDIT else ()
    parts = ["enc_tokenizer"] + (["encoder"] if s.formulation == EDIT
                                 else ["seq2seq", "dec_tokenizer"]) + (["image.pt"] if heads else [])
    for part in parts:
        if not (directory / part).exists():
            raise InputError(directory / part, "missing: the DCG model directory is incomplete "
                                               "(copy the whole directory dcg_train wrote)")

    def part(name, fn):
        try:
            return fn(directory / name)
        except (OSError, ValueError, KeyError, RuntimeError, EOFError,
                pickle.UnpicklingError) as e:
            raise InputError(directory / name, f"cannot be loaded ({type(e).__name__}: "
                                               f"{str(e)[:300]})") from None

    enc_tok = part("enc_tokenizer", lambda d: AutoTokenizer.from_pretrained(
        d, local_files_only=True))
    if s.formulation == EDIT:
        from transformers import ViltModel
        with quiet():
            enc = part("encoder", lambda d: ViltModel.from_pretrained(
                d, add_pooling_layer=False, local_files_only=True))
        dcg = DCG(s, None, enc_tok, None, meta.get("feat_dim"), encoder=enc,
                  out_vocab=meta.get("out_vocab"))
    else:
        with quiet():
            seq2seq = part("seq2seq", lambda d: EncoderDecoderModel.from_pretrained(
                d, local_files_only=True))
        dec_tok = part("dec_tokenizer", lambda d: AutoTokenizer.from_pretrained(
            d, local_files_only=True))
        set_ids(seq2seq, dec_tok)
        dcg = DCG(s, seq2seq, enc_tok, dec_tok, meta.get("feat_dim"))
    heads = ("img_",) if s.image_input == FEATURES else ()
    heads += ("edit_head.",) if s.formulation == EDIT else ()
    if heads:
        state = part("image.pt", lambda f: torch.load(f, weights_only=True))
        try:
            missing = dcg.load_state_dict(state, strict=False)
        except (RuntimeError, TypeError, AttributeError) as e:
            raise InputError(directory / "image.pt", f"does not fit the model "
                                                     f"({str(e)[:300]})") from None
        if any(k.startswith(heads) for k in missing.missing_keys):
            raise InputError(directory / "image.pt", "incomplete image projection / edit head")
    dcg.meta = meta.get("meta", {})
    dcg.eval()
    return dcg


def evaluate(dcg: DCG, biased: Sequence[str], originals: Sequence[str],
             original_genders: Sequence[str], types: Sequence[str], images,
             words: str = "libra", seed: int = 0, num_beams: int | None = None) -> dict:
    """How well DCG undoes synthetic bias on held-out pairs: per type and overall, the fraction
    of outputs whose caption gender (word list ``words``) equals the original's
    (``gender_acc_output``) vs the biased input's (``gender_acc_input``), exact recovery of the
    original (``exact_output``) vs the input (``exact_input``), and how often DCG returned its
    input unchanged (``copied_input``). Returns ``{"overall": {...}, "<type>": {...},
    "outputs": [...]}``."""
    from biaslab.data.gender import caption_gender
    outs = debias(dcg, biased, images, num_beams=num_beams, seed=seed)

    def norm(t: str) -> str:
        return " ".join(w.lower() for _, _, w in word_spans(t))

    rows = []
    for b, o, g, t, y in zip(biased, originals, original_genders, types, outs):
        rows.append({"type": t, "gender_in": caption_gender(b, words) == g,
                     "gender_out": caption_gender(y, words) == g,
                     "exact_in": norm(b) == norm(o), "exact_out": norm(y) == norm(o),
                     "copied": norm(y) == norm(b)})

    def agg(rs: list[dict]) -> dict:
        if not rs:
            return {"n": 0}
        return {"n": len(rs),
                "gender_acc_input": float(np.mean([r["gender_in"] for r in rs])),
                "gender_acc_output": float(np.mean([r["gender_out"] for r in rs])),
                "exact_input": float(np.mean([r["exact_in"] for r in rs])),
                "exact_output": float(np.mean([r["exact_out"] for r in rs])),
                "copied_input": float(np.mean([r["copied"] for r in rs]))}

    res: dict[str, Any] = {"overall": agg(rows)}
    for t in sorted(set(types)):
        res[t] = agg([r for r in rows if r["type"] == t])
    res["outputs"] = outs
    return res


# --------------------------------------------------------------------------------------------
# images: files and features


IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".webp")


def image_files(images: str | os.PathLike, image_ids: Sequence[int]) -> dict[int, Path]:
    """Image file of each id in ``images``: a COCO-layout directory (``annotations/*.json``
    ``images`` tables: ``file_name`` under ``images/<split>/``, ``<split>/``, ``images/`` or the
    root) or any folder of images named by the COCO convention (the trailing digits of the file
    stem are the id: ``000000000139.jpg``, ``COCO_val2014_000000000139.jpg``), searched
    recursively.

    Raises:
        InputError: ``images`` is not a directory, or some ids have no file (the message gives
            how many and a few of them).
    """
    import re
    from biaslab.runtime.io import InputError, read_json
    root = Path(images)
    if not root.is_dir():
        raise InputError(root, "images directory not found")
    want = {int(i) for i in image_ids}
    found: dict[int, Path] = {}
    ann = root / "annotations"
    if ann.is_dir():
        prio = {"captions": 0, "image_info": 1, "instances": 2, "person_keypoints": 3}
        files = []
        for f in ann.glob("*.json"):
            m = re.match(r"(captions|instances|person_keypoints|image_info)_(.+)\.json$", f.name)
            if m:
                files.append((prio[m.group(1)], f.name, f, m))
        for _, _, f, m in sorted(files):   # small caption files first; stop when all found
            if len(found) == len(want):
                break
            data = read_json(f)
            split = m.group(2)
            for im in data.get("images", []) if isinstance(data, dict) else []:
                iid = im.get("id")
                if iid not in want or iid in found or "file_name" not in im:
                    continue
                for cand in (root / "images" / split / im["file_name"],
                             root / split / im["file_name"], root / "images" / im["file_name"],
                             root / im["file_name"]):
                    if cand.is_file():
                        found[iid] = cand
                        break
    if len(found) < len(want):
        pat = re.compile(r"(\d+)$")
        for dirpath, _, files in os.walk(root):
            for fn in sorted(files):
                stem, ext = os.path.splitext(fn)
                if ext.lower() not in IMAGE_EXTENSIONS:
                    continue
                m = pat.search(stem)
                if m:
                    iid = int(m.group(1))
                    if iid in want and iid not in found:
                        found[iid] = Path(dirpath) / fn
    missing = sorted(want - set(found))
    if missing:
        raise InputError(root, f"no image file for {len(missing)} of {len(want)} image id(s), "
                               f"e.g. {missing[:5]} (expected a COCO-layout directory or files "
                               f"named like {missing[0]:012d}.jpg)")
    return found


def image_features(image_ids: Sequence[int], settings: DCGSettings,
                   features_prefix: str | os.PathLike | None = "data/features/images",
                   images_table=None, cache_dir: str | os.PathLike | None = None,
                   num_threads: int | None = None) -> np.ndarray:
    """Backbone features ``(n, F)`` float32 of ``image_ids`` (input order), for DCG's
    ``features`` input: rows of ``<features_prefix>.npy`` (+ ``_ids.npy``, the ``features``
    stage) when the file exists and has them; the other ids are encoded with
    ``settings.backbone`` at ``settings.image_size`` from ``images_table`` (image_id, path),
    through ``biaslab.models.features.encode_cached`` when ``cache_dir`` is given.

    Raises:
        InputError: ids neither cached nor in ``images_table``.
    """
    from biaslab.runtime.io import InputError
    ids = [int(i) for i in image_ids]
    have: dict[int, np.ndarray] = {}
    if features_prefix is not None and Path(f"{features_prefix}.npy").is_file():
        from biaslab.models.features import load_features
        fids, feats = load_features(features_prefix)
        row = {int(i): k for k, i in enumerate(fids)}
        for i in set(ids) & set(row):
            have[i] = feats[row[i]]
    todo = sorted(set(ids) - set(have))
    if todo:
        if images_table is None:
            raise InputError(f"{features_prefix}.npy", f"no cached features for {len(todo)} "
                                                       f"image(s), e.g. {todo[:5]}")
        tab = images_table[images_table["image_id"].astype(int).isin(todo)]
        tab = tab.drop_duplicates("image_id")
        lack = sorted(set(todo) - set(tab["image_id"].astype(int)))
        if lack:
            raise InputError("images table", f"no image path for {len(lack)} id(s), e.g. "
                                             f"{lack[:5]}")
        from biaslab.models import features as F
        if cache_dir is not None:
            fids, feats = F.encode_cached(tab[["image_id", "path"]], cache_dir,
                                          settings.backbone, image_size=settings.image_size,
                                          num_threads=num_threads)
        else:
            enc = F.load_image_encoder(settings.backbone, image_size=settings.image_size,
                                       num_threads=num_threads)
            fids = tab["image_id"].to_numpy(np.int64)
            feats = enc.encode(tab["path"].astype(str).tolist())
        for i, f in zip(fids, feats):
            have[int(i)] = f
    if not ids:
        return np.zeros((0, 0), np.float32)
    return np.stack([have[i] for i in ids]).astype(np.float32)
