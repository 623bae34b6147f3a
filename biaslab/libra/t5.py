"""T5 masked-word generation for LIBRA's Biased Caption Synthesis (paper 003 sec. 3.2 and supp.
1.2; thesis, paper 002, sec. 3.3.2 and 3.7.2).

Fine-tuning (supp. 1.2, Eq. 1): a T5 is fine-tuned on the training captions ``D`` as a masked
language model: 10% of the tokens of a caption ``y`` are masked and T5 predicts them,
``L_mlm = -log prod_{m in M} p(y_m | y_\\M)``. We use T5's own sentinel format: the masked words
become ``<extra_id_0>, <extra_id_1>, ...`` in the encoder input, and the decoder target is
``<extra_id_0> w_0 <extra_id_1> w_1 ... <extra_id_k></s>``.

Choices where the paper is silent (documented, configurable, tested):

* **Mask unit = word.** A "token" of supp. 1.2 / Eq. 5 is a word of the caption (regex
  ``[A-Za-z]+|[0-9]+``, the tokens of ``biaslab.data.gender.tokenize``), not a sub-word piece, so that
  a masked position is always a whole word that T5 replaces by a whole word (what Eq. 5 and the
  synonym filter of supp. 1.3 need). ``k = max(1, round(rate * n_words))`` words are masked,
  chosen uniformly without replacement; each masked word gets its own sentinel (adjacent masked
  words are not merged into one span). Masks are re-sampled every epoch (dynamic masking).
* **Loss.** The training loss is the cross-entropy of the whole T5 target summed per caption
  and averaged over the batch: Eq. 1's ``-sum_m log p(y_m | ...)`` over the pieces of the masked
  words, plus the terms of the sentinel and ``</s>`` pieces that delimit the spans (T5 must emit
  them so that its output can be parsed at generation time). Eq. 1 alone (masked-word pieces
  only) is reported separately as ``mlm_nll`` (nats per caption). T5 factorises
  ``p(y_m | y_\\M)`` autoregressively over the target, i.e. conditions each masked word also on
  the previously generated ones.
* **Formats.** ``format: sentinel`` is the above (the paper tier's: a pretrained T5 knows
  sentinels). ``format: reconstruct`` keeps the sentinel input but makes the decoder target
  the whole original caption (BERT/BART-style denoising; Eq. 1 is the loss on the masked
  words' pieces, ``mlm_nll``); fills are then read at the masked positions with the known
  words teacher-forced (``fill_words``), one whole-word vocabulary piece per masked word. A
  tiny T5 trained from scratch within the ci budget fills content words better this way (measured on coco-mini, 6,000 captions, 5 epochs: held-out masked-word accuracy
  18.9% vs 16.0% for the most-frequent-word baseline; content words 3.4% vs 2.3%; the
  sentinel format reached 17.8% / 0.7% and mostly filled content slots with ``a``).
* **Tiers.** ``model: "t5-base"`` (paper tier, any Hugging Face T5 name or local directory,
  loaded with ``local_files_only=True`` unless told otherwise) is fine-tuned with its own
  tokenizer. ``model: "tiny"`` (offline tier) builds a small ``T5ForConditionalGeneration`` from
  a ``T5Config`` (default d_model 128, 2 encoder + 2 decoder layers) trained from scratch with a
  tokenizer built on the captions (``build_caption_tokenizer``), wrapped as ``T5TokenizerFast``
  with the 100 ``<extra_id_*>`` sentinels at the end of the vocabulary, as in T5.
* **Case.** Text is lower-cased and whitespace-normalised before it reaches T5 (``normalize``);
  fills are put back into the original caption with the case of the word they replace.

Determinism: training and sampling run under a forked torch RNG seeded with ``seed``; the global
RNG state is left untouched.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from biaslab.models.features import torch_threads
from biaslab.runtime.io import atomic_dir, without_run_stats
from biaslab.runtime.progress import bar as progress_bar
from biaslab.libra.settings import TINY, T5Settings, t5_settings
from biaslab.libra.text import (N_SENTINELS, SENTINEL, SENTINEL_RE, SPACE,  # noqa: F401
                                apply_fills, build_caption_tokenizer, mask_words, n_to_mask,
                                normalize, parse_fills, sample_positions, train_t5_tokenizer,
                                word_spans)

FORMATS = ("sentinel", "reconstruct")
_FORMAT = 1


def settings_from_dict(d: dict | None) -> T5Settings:
    """``T5Settings`` from a params dict (``libra.t5``); unknown keys and values out of range
    raise ``ValueError`` naming them (:func:`biaslab.libra.settings.t5_settings`)."""
    return t5_settings(d)


# --------------------------------------------------------------------------------------------
# model container


@dataclass
class T5Model:
    """A fine-tuned T5: ``model`` (``T5ForConditionalGeneration``, eval mode), ``tokenizer``,
    ``settings`` and ``meta`` (training record)."""
    model: Any
    tokenizer: Any
    settings: T5Settings
    meta: dict = field(default_factory=dict)


#: torch threads for a block (kept under this name for biaslab.libra.dcg)
threads = torch_threads


@contextlib.contextmanager
def quiet():
    """Silence transformers' info/warning logs and progress bars for the block (the load report
    of ViLT's unused pooler, "Writing model shards", padding advice during generation)."""
    from transformers.utils import logging as hf_logging
    old = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(old)
        if bars:
            hf_logging.enable_progress_bar()


def build_model(tokenizer, s: T5Settings):
    """A ``T5ForConditionalGeneration``: pretrained (``s.model`` a name/dir) or tiny from config."""
    from transformers import T5Config, T5ForConditionalGeneration
    if s.model != TINY:
        from biaslab.models.textclf import resolve_model
        return T5ForConditionalGeneration.from_pretrained(resolve_model(s.model),
                                                          local_files_only=s.local_files_only)
    cfg = T5Config(vocab_size=len(tokenizer), d_model=s.d_model, d_ff=s.d_ff, d_kv=s.d_kv,
                   num_layers=s.layers, num_decoder_layers=s.layers, num_heads=s.heads,
                   dropout_rate=s.dropout, feed_forward_proj="relu",
                   pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                   decoder_start_token_id=tokenizer.pad_token_id, tie_word_embeddings=True)
    return T5ForConditionalGeneration(cfg)


def load_tokenizer(s: T5Settings, captions: Sequence[str]):
    """The T5 tokenizer: trained on ``captions`` (tiny tier) or the pretrained one of
    ``s.model``."""
    if s.model == TINY:
        return train_t5_tokenizer(captions, s.vocab_size, s.min_count)
    from transformers import AutoTokenizer
    from biaslab.models.textclf import resolve_model
    return AutoTokenizer.from_pretrained(resolve_model(s.model),
                                         local_files_only=s.local_files_only)


def _encode(tokenizer, sources: list[str], targets: list[str] | None, max_length: int,
            spans: list[list[tuple[int, int]]] | None = None):
    """Tokenised batch. ``spans`` (reconstruct format): per target, the character spans of
    its masked words, whose pieces form ``word_mask`` (Eq. 1 terms); without ``spans``
    (sentinel format) every target piece but the sentinels, ``</s>`` and padding is a
    masked-word piece."""
    import torch
    enc = tokenizer(sources, padding=True, truncation=True, max_length=max_length,
                    return_tensors="pt")
    out = {"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]}
    if targets is not None:
        lab = tokenizer(targets, padding=True, truncation=True, max_length=max_length,
                        return_tensors="pt")["input_ids"]
        lab = lab.masked_fill(lab == tokenizer.pad_token_id, -100)
        out["labels"] = lab
        if spans is None:
            special = torch.zeros_like(lab, dtype=torch.bool)
            for tid in _special_ids(tokenizer):
                special |= lab == tid
            out["word_mask"] = (lab != -100) & ~special
        else:
            wm = torch.zeros_like(lab, dtype=torch.bool)
            for i, ranges in enumerate(_piece_ranges_batch(tokenizer, targets, spans)):
                for a, n in ranges:
                    wm[i, a:a + n] = True
            out["word_mask"] = wm & (lab != -100)
    return out


def _n_pieces(tokenizer, texts: list[str]) -> list[list[int]]:
    return tokenizer(texts, add_special_tokens=False)["input_ids"]


def _piece_ranges(tokenizer, text: str, spans: Sequence[tuple[int, int]]):
    """``(first piece index, number of pieces)`` of each character span of ``text`` that
    starts a whitespace chunk (the pieces of the text before it are then those of the prefix
    alone); spans inside a chunk are skipped."""
    return _piece_ranges_batch(tokenizer, [text], [spans])[0]


def _piece_ranges_batch(tokenizer, texts: Sequence[str],
                        spans: Sequence[Sequence[tuple[int, int]]]) -> list[list]:
    """``_piece_ranges`` for many texts with one tokenizer call."""
    flat = []
    for text, sp in zip(texts, spans):
        flat.append(text)
        for a, e in sp:
            flat += [text[:a].rstrip(), text[:e]]
    ids = _n_pieces(tokenizer, flat) if flat else []
    out, k = [], 0
    for text, sp in zip(texts, spans):
        full = ids[k]
        res = []
        for j, (a, _) in enumerate(sp):
            pre, upto = ids[k + 1 + 2 * j], ids[k + 2 + 2 * j]
            if (a == 0 or text[a - 1].isspace()) and full[:len(upto)] == upto \
                    and upto[:len(pre)] == pre and len(upto) > len(pre):
                res.append((len(pre), len(upto) - len(pre)))
        out.append(res)
        k += 1 + 2 * len(sp)
    return out


def _norm_spans(caption: str, positions: Sequence[int]) -> tuple[str, list[tuple[int, int]]]:
    """The normalised caption and the character spans of the words at ``positions`` in it."""
    norm = normalize(caption)
    sp = word_spans(norm)
    return norm, [(sp[p][0], sp[p][1]) for p in positions]


def _special_ids(tokenizer) -> list[int]:
    ids = {tokenizer.eos_token_id, tokenizer.pad_token_id}
    ids |= set(tokenizer.convert_tokens_to_ids([SENTINEL.format(i) for i in range(N_SENTINELS)]))
    return sorted(i for i in ids if i is not None)


def _losses(model, batch) -> tuple[Any, Any, int]:
    """(training loss: per-caption summed target NLL averaged over the batch,
    Eq. 1 summed over the batch, number of target pieces)."""
    import torch
    labels = batch["labels"]
    dec_in = model._shift_right(labels.masked_fill(labels == -100, model.config.pad_token_id))
    out = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                decoder_input_ids=dec_in)
    nll = torch.nn.functional.cross_entropy(out.logits.transpose(1, 2), labels,
                                            ignore_index=-100, reduction="none")   # (b, L)
    loss = nll.sum(1).mean()
    eq1 = (nll * batch["word_mask"]).sum()
    return loss, eq1, int((labels != -100).sum())


def _sample_masks(captions: Sequence[str], rate: float, rng: np.random.Generator,
                  eligible: Sequence[Sequence[int]] | None = None):
    srcs, tgts, origs, poss = [], [], [], []
    for i, c in enumerate(captions):
        n = len(word_spans(c))
        pos = sample_positions(n, rate, rng, None if eligible is None else eligible[i])
        s, t, o = mask_words(c, pos)
        srcs.append(s)
        tgts.append(t)
        origs.append(o)
        poss.append(pos)
    return srcs, tgts, origs, poss


def _training_texts(captions: Sequence[str], rate: float, rng: np.random.Generator,
                    fmt: str):
    """(sources, targets, masked-word spans or None) for a training pass in format ``fmt``."""
    srcs, tgts, _, poss = _sample_masks(captions, rate, rng)
    if fmt != "reconstruct":
        return srcs, tgts, None
    pairs = [_norm_spans(c, p) for c, p in zip(captions, poss)]
    return srcs, [p[0] for p in pairs], [p[1] for p in pairs]


def finetune(captions: Sequence[str], settings: T5Settings | None = None, seed: int = 0,
             val_captions: Sequence[str] | None = None,
             on_epoch: Callable[[int, dict], None] | None = None,
             progress: bool | None = False) -> T5Model:
    """Fine-tune (paper tier) or train from scratch (tiny) a T5 masked-word model on ``D``
    (supp. 1.2, Eq. 1).

    Args:
        captions: the training captions ``D`` (raw text).
        settings: ``T5Settings`` (default: tiny, mask rate 0.1).
        seed: initialisation, mask sampling, dropout and shuffling seed.
        val_captions: optional held-out captions; after each epoch their loss and ``mlm_nll``
            (Eq. 1, nats per caption, fixed masks) are added to the epoch record.
        progress: tqdm bar over the training batches of all epochs on stderr
            (``biaslab.runtime.progress.bar``: True / False / None = auto); the model does not depend
            on it.
        on_epoch: ``fn(epoch, record)`` after each epoch; record keys ``loss`` (training loss,
            per caption), ``mlm_nll`` (Eq. 1 per caption), ``tokens_per_s`` (target pieces per
            second), ``lr``, ``seconds`` and the ``val_*`` keys.

    Returns:
        ``T5Model`` in eval mode; ``meta`` holds the history and throughput.

    Raises:
        ValueError: no caption has a word.
    """
    import torch
    s = settings or T5Settings()
    caps = [c for c in captions if word_spans(c)]
    if not caps:
        raise ValueError("cannot fine-tune T5 on zero captions with words")
    with threads(s.num_threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        rng = np.random.default_rng(seed)
        tok = load_tokenizer(s, caps)
        model = build_model(tok, s)
        opt = _optimizer(model, s)
        n_batches = -(-len(caps) // s.batch_size)
        n_epochs = s.pretrain_epochs + s.epochs
        total = max(1, n_batches * n_epochs)
        warm = max(1, int(s.warmup * total))
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda t: min((t + 1) / warm, max(0.0, (total - t) / max(1, total - warm))))
        if s.format not in FORMATS:
            raise ValueError(f"unknown T5 format {s.format!r}; known: {list(FORMATS)}")
        val = None
        if val_captions:
            vcaps = [c for c in val_captions if word_spans(c)]
            val = _training_texts(vcaps, s.mask_rate, np.random.default_rng(seed + 1),
                                  s.format)
        history, tok_total, sec_total = [], 0, 0.0
        pbar = progress_bar(desc="T5 fine-tune", total=total, unit="batch", progress=progress)
        for epoch in range(n_epochs):
            model.train()
            t0 = time.perf_counter()
            order = rng.permutation(len(caps))
            pre = epoch < s.pretrain_epochs
            rate = s.pretrain_mask_rate if pre else s.mask_rate
            ordered = [caps[i] for i in order]
            srcs, tgts, spans = _training_texts(ordered, rate, rng, s.format)
            tot_loss = tot_eq1 = 0.0
            n_tok = 0
            for b in range(0, len(caps), s.batch_size):
                batch = _encode(tok, srcs[b:b + s.batch_size], tgts[b:b + s.batch_size],
                                s.max_length,
                                None if spans is None else spans[b:b + s.batch_size])
                loss, eq1, nt = _losses(model, batch)
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                opt.step()
                sched.step()
                k = len(srcs[b:b + s.batch_size])
                tot_loss += float(loss.detach()) * k
                tot_eq1 += float(eq1.detach())
                n_tok += nt
                pbar.update(1)
            sec = time.perf_counter() - t0
            tok_total += n_tok
            sec_total += sec
            rec = {"loss": tot_loss / len(caps), "mlm_nll": tot_eq1 / len(caps),
                   "tokens_per_s": n_tok / sec if sec else None,
                   "lr": float(sched.get_last_lr()[0]), "seconds": sec, "mask_rate": rate}
            if val is not None:
                rec.update({f"val_{k}": v for k, v in _eval_loss(model, tok, *val,
                                                                 s).items()})
            history.append(rec)
            pbar.set_postfix(epoch=f"{epoch + 1}/{n_epochs}", loss=f"{rec['loss']:.3f}")
            if on_epoch is not None:
                on_epoch(epoch, rec)
        pbar.close()
    model.eval()
    meta = {"seed": int(seed), "n_train": len(caps), "history": history,
            "train_tokens_per_s": tok_total / sec_total if sec_total else None,
            "train_seconds": sec_total}
    return T5Model(model=model, tokenizer=tok, settings=s, meta=meta)


def _optimizer(model, s: T5Settings):
    import torch
    if s.optimizer == "adafactor":
        from transformers.optimization import Adafactor
        return Adafactor(model.parameters(), lr=s.lr, scale_parameter=True, relative_step=False,
                         warmup_init=False, weight_decay=s.weight_decay)
    if s.optimizer == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=s.lr, weight_decay=s.weight_decay)
    raise ValueError(f"unknown optimizer {s.optimizer!r}; known: adafactor, adamw")


def _eval_loss(model, tok, srcs: list[str], tgts: list[str], spans, s: T5Settings,
               batch_size: int = 256) -> dict:
    import torch
    model.eval()
    tot_loss = tot_eq1 = 0.0
    with torch.no_grad():
        for b in range(0, len(srcs), batch_size):
            batch = _encode(tok, srcs[b:b + batch_size], tgts[b:b + batch_size], s.max_length,
                            None if spans is None else spans[b:b + batch_size])
            loss, eq1, _ = _losses(model, batch)
            tot_loss += float(loss) * len(srcs[b:b + batch_size])
            tot_eq1 += float(eq1)
    n = max(1, len(srcs))
    return {"loss": tot_loss / n, "mlm_nll": tot_eq1 / n}


# --------------------------------------------------------------------------------------------
# generation


def banned_token_ids(tokenizer, words) -> list[list[int]]:
    """``bad_words_ids`` that keep fills to content words: every vocabulary piece that is a
    whole word of ``words`` (``▁the``, ``the``), or has no letter (punctuation, digits), except
    the special tokens (sentinels, ``</s>``, padding) that the T5 output format needs."""
    words = {w.lower() for w in words}
    keep = set(tokenizer.all_special_ids)
    out = []
    for piece, i in tokenizer.get_vocab().items():
        if i in keep or piece == SPACE or SENTINEL_RE.fullmatch(piece):
            continue
        w = piece.replace(SPACE, "").lower()
        if not any(ch.isalpha() for ch in w) or (piece.startswith(SPACE) and w in words):
            out.append([int(i)])
    return sorted(out)


def fill_masks(t5: T5Model, sources: Sequence[str], n_masks: Sequence[int],
               batch_size: int = 128, sample: bool = True, top_k: int = 20,
               temperature: float = 1.0, seed: int = 0,
               max_piece_per_word: int = 4,
               bad_words_ids: list[list[int]] | None = None,
               progress: bool | None = False) -> list[list[str] | None]:
    """Fill the sentinels of T5 inputs (the generation step ``y_hat = T5(y_M)`` of Eq. 5).

    Args:
        sources: inputs in sentinel format (``mask_words(...)[0]``).
        n_masks: number of sentinels of each input.
        batch_size: inputs per ``generate`` call (inputs are sorted by length into batches;
            outputs come back in input order).
        sample: top-k sampling (Eq. 5 samples ``y_hat``); False = greedy decoding.
        top_k, temperature: sampling parameters.
        seed: sampling seed.
        max_piece_per_word: generation budget, ``n * (max_piece_per_word + 1) + 2`` new tokens.
        bad_words_ids: tokens never generated (``banned_token_ids``), e.g. to keep the fills of
            content-word slots to content words.
        progress: tqdm bar over the inputs on stderr (``biaslab.runtime.progress.bar``; None = auto).

    Returns:
        per input the list of fills (one string per sentinel, lower case) or None when the
        output cannot be parsed (missing sentinel or empty fill).
    """
    import torch
    s = t5.settings
    out: list[list[str] | None] = [None] * len(sources)
    if not len(sources):
        return out
    lengths = [len(x) for x in sources]
    order = np.argsort(lengths, kind="stable")
    bar = progress_bar(desc="T5 fill", total=len(sources), unit="caption", progress=progress)
    with threads(s.num_threads), torch.random.fork_rng(devices=[]), torch.no_grad(), bar:
        torch.manual_seed(seed)
        for b in range(0, len(order), batch_size):
            idx = order[b:b + batch_size]
            enc = _encode(t5.tokenizer, [sources[i] for i in idx], None, s.max_length)
            n_max = max(int(n_masks[i]) for i in idx)
            kw: dict[str, Any] = {"do_sample": bool(sample), "num_beams": 1}
            if sample:
                kw.update(top_k=int(top_k), temperature=float(temperature))
            if bad_words_ids:
                kw["bad_words_ids"] = bad_words_ids
            gen = t5.model.generate(input_ids=enc["input_ids"],
                                    attention_mask=enc["attention_mask"],
                                    max_new_tokens=n_max * (max_piece_per_word + 1) + 2, **kw)
            texts = t5.tokenizer.batch_decode(gen, skip_special_tokens=False)
            for i, txt in zip(idx, texts):
                out[i] = parse_fills(txt, int(n_masks[i]))
            bar.update(len(idx))
    return out


def fill_words(t5: T5Model, captions: Sequence[str], positions: Sequence[Sequence[int]],
               batch_size: int = 128, sample: bool = True, top_k: int = 20,
               temperature: float = 1.0, seed: int = 0,
               banned_words: set[str] | frozenset[str] | None = None,
               progress: bool | None = False) -> list[list[str] | None]:
    """``T5(y_M)`` of Eq. 5: new words for the words of each caption at ``positions``.

    ``sentinel`` models generate the sentinel target (``fill_masks``). ``reconstruct`` models
    read the decoder's distribution at each masked word's position, teacher-forcing the known
    words (and the fills already chosen, left to right): the fill is one whole-word piece of
    the vocabulary (``▁word``; single letters only ``a``/``i``, the others are the character
    fallback of unknown words). ``banned_words`` (e.g. stop words and gender words) are never
    generated, nor pieces without letters. ``progress``: tqdm bar over the captions on stderr
    (``biaslab.runtime.progress.bar``: True / False / None = auto); outputs do not depend on it.

    Returns:
        per caption the fills (lower case, one per position) or None when the model output
        cannot be used (unparsable sentinel output, or a masked word that does not start a
        whitespace chunk in reconstruct format).
    """
    if t5.settings.format == "reconstruct":
        return _fill_reconstruct(t5, captions, positions, batch_size, sample, top_k,
                                 temperature, seed, banned_words, progress)
    srcs = [mask_words(c, p)[0] for c, p in zip(captions, positions)]
    bad = banned_token_ids(t5.tokenizer, banned_words) if banned_words else None
    return fill_masks(t5, srcs, [len(p) for p in positions], batch_size=batch_size,
                      sample=sample, top_k=top_k, temperature=temperature, seed=seed,
                      bad_words_ids=bad, progress=progress)


def _word_piece_ids(tokenizer, banned) -> list[int]:
    banned = {w.lower() for w in (banned or ())}
    out = []
    for piece, i in tokenizer.get_vocab().items():
        w = piece[1:]
        if piece.startswith(SPACE) and w.isalpha() and w.lower() not in banned \
                and (len(w) > 1 or w.lower() in ("a", "i")):
            out.append(int(i))
    return sorted(out)


def _fill_reconstruct(t5: T5Model, captions, positions, batch_size, sample, top_k,
                      temperature, seed, banned, progress=False) -> list[list[str] | None]:
    import torch
    s, tok, model = t5.settings, t5.tokenizer, t5.model
    allowed = torch.tensor(_word_piece_ids(tok, banned), dtype=torch.long)
    pieces = tok.convert_ids_to_tokens(allowed.tolist())
    out: list[list[str] | None] = [None] * len(captions)
    gen = torch.Generator().manual_seed(int(seed))
    order = np.argsort([len(c) for c in captions], kind="stable")
    model.eval()
    bar = progress_bar(desc="T5 fill", total=len(captions), unit="caption", progress=progress)
    with threads(s.num_threads), torch.no_grad(), bar:
        for b in range(0, len(order), batch_size):
            idx = [int(i) for i in order[b:b + batch_size]]
            srcs = [mask_words(captions[i], positions[i])[0] for i in idx]
            enc = _encode(tok, srcs, None, s.max_length)
            hid = model.encoder(input_ids=enc["input_ids"],
                                attention_mask=enc["attention_mask"]).last_hidden_state
            texts = [normalize(captions[i]) for i in idx]
            fills: list[list[str] | None] = [[] for _ in idx]
            k_max = max((len(positions[i]) for i in idx), default=0)
            for j in range(k_max):
                rows, targets, at = [], [], []
                for r, i in enumerate(idx):
                    if fills[r] is None or j >= len(positions[i]):
                        continue
                    pos = list(positions[i])
                    text = apply_fills(texts[r], pos[:j], fills[r]) if j else texts[r]
                    sp = word_spans(text)
                    rng_ = _piece_ranges(tok, text, [(sp[pos[j]][0], sp[pos[j]][1])])
                    if not rng_ or rng_[0][0] >= s.max_length - 1:
                        fills[r] = None
                        continue
                    rows.append(r)
                    targets.append(text)
                    at.append(rng_[0][0])
                if not rows:
                    continue
                lab = tok(targets, padding=True, truncation=True, max_length=s.max_length,
                          return_tensors="pt")["input_ids"]
                dec_in = model._shift_right(lab)
                r_t = torch.tensor(rows)
                logits = model(encoder_outputs=(hid[r_t],),
                               attention_mask=enc["attention_mask"][r_t],
                               decoder_input_ids=dec_in).logits
                sel = logits[torch.arange(len(rows)), torch.tensor(at)][:, allowed]
                if sample:
                    sel = sel / max(float(temperature), 1e-6)
                    k = min(int(top_k), sel.shape[1]) if top_k else sel.shape[1]
                    v, ix = torch.topk(sel, k, dim=1)
                    pick = ix.gather(1, torch.multinomial(torch.softmax(v, 1), 1, generator=gen))
                    pick = pick[:, 0]
                else:
                    pick = sel.argmax(1)
                for r, c in zip(rows, pick.tolist()):
                    fills[r].append(pieces[c][1:])
            for r, i in enumerate(idx):
                out[i] = fills[r]
            bar.update(len(idx))
    return out


def masked_word_accuracy(t5: T5Model, captions: Sequence[str], rate: float,
                         baseline_counts: Counter | dict, seed: int = 0,
                         eligible: Sequence[Sequence[int]] | None = None,
                         batch_size: int = 128) -> dict:
    """Held-out masked-word accuracy: mask ``rate`` of the words of each caption (of its
    ``eligible`` positions when given, e.g. content words), fill greedily, and count exact
    (lower-case) matches of each filled word with the masked one.

    Baseline: always predict the most frequent word of ``baseline_counts`` (the caller passes
    the counts of the maskable words of the training captions: all words, or content words).

    Returns:
        ``{"accuracy", "baseline_accuracy", "baseline_word", "n_masked", "n_captions",
        "n_unparsed"}`` (accuracies in [0, 1], None when nothing was masked).
    """
    rng = np.random.default_rng(seed)
    pairs = [(c, None if eligible is None else eligible[i]) for i, c in enumerate(captions)
             if word_spans(c) and (eligible is None or len(eligible[i]))]
    caps = [p[0] for p in pairs]
    elig = None if eligible is None else [p[1] for p in pairs]
    _, _, origs, poss = _sample_masks(caps, rate, rng, elig)
    fills = fill_words(t5, caps, poss, batch_size=batch_size, sample=False)
    counts = Counter(baseline_counts)
    base = max(counts, key=lambda w: (counts[w], w)) if counts else ""
    masked = [w.lower() for o in origs for w in o]
    correct = n = unparsed = 0
    for o, f in zip(origs, fills):
        n += len(o)
        if f is None:
            unparsed += 1
            continue
        correct += sum(a.lower() == b.strip().lower() for a, b in zip(o, f))
    return {"accuracy": correct / n if n else None,
            "baseline_accuracy": sum(w == base for w in masked) / n if n else None,
            "baseline_word": base, "n_masked": n, "n_captions": len(caps),
            "n_unparsed": unparsed}


# --------------------------------------------------------------------------------------------
# save / load


def save(t5: T5Model, directory: str | os.PathLike) -> Path:
    """Save to ``directory`` (replaced atomically): ``save_pretrained`` model + tokenizer and
    ``libra_t5.json`` (settings, format, meta)."""
    with atomic_dir(directory) as tmp:
        with quiet():
            t5.model.save_pretrained(tmp)
        t5.tokenizer.save_pretrained(tmp)
        meta = {"format": _FORMAT, "settings": dataclasses.asdict(t5.settings),
                "meta": without_run_stats(t5.meta)}
        (tmp / "libra_t5.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return Path(directory)


def load(directory: str | os.PathLike, num_threads: int | None = None) -> T5Model:
    """Load a ``save``d T5 (offline). Raises ``FileNotFoundError`` for a directory without
    ``libra_t5.json``."""
    from transformers import AutoTokenizer, T5ForConditionalGeneration
    directory = Path(directory)
    meta_p = directory / "libra_t5.json"
    if not meta_p.is_file():
        raise FileNotFoundError(f"{directory}: not a saved LIBRA T5 (no libra_t5.json)")
    meta = json.loads(meta_p.read_text())
    if meta.get("format") != _FORMAT:
        raise ValueError(f"{meta_p}: unsupported format {meta.get('format')!r}")
    s = settings_from_dict(meta["settings"])
    if num_threads is not None:
        s = dataclasses.replace(s, num_threads=num_threads)
    with quiet():
        model = T5ForConditionalGeneration.from_pretrained(directory, local_files_only=True)
    tok = AutoTokenizer.from_pretrained(directory, local_files_only=True)
    model.eval()
    return T5Model(model=model, tokenizer=tok, settings=s, meta=meta.get("meta", {}))
