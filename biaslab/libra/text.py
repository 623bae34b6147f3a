"""The caption text LIBRA's T5 and DCG work on (paper 003 sec. 3.2, supp. 1.2): words and their
character spans, the masking of ``k = max(1, round(rate * n))`` words with T5's sentinels,
parsing and applying the generated fills, and the word-level tokenizer built on the captions
(offline tier). :mod:`biaslab.libra.t5` (whose module docstring gives the choices) re-exports
every public name.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

SENTINEL = "<extra_id_{}>"
N_SENTINELS = 100
#: a caption word: the tokens of ``biaslab.data.gender.tokenize``
_WORD_RE = re.compile(r"[A-Za-z]+|[0-9]+")
#: a sentinel in T5's output, its number captured
SENTINEL_RE = re.compile(r"<extra_id_(\d+)>")
_PIECE_RE = re.compile(r"[a-z]+|[0-9]+|[^\sa-z0-9]")
SPACE = "\u2581"   # sentencepiece word-boundary marker

# --------------------------------------------------------------------------------------------
# words and masks


def normalize(text: str) -> str:
    """Lower-case and collapse whitespace (the text T5 sees)."""
    return " ".join(str(text).lower().split())


def word_spans(caption: str) -> list[tuple[int, int, str]]:
    """``(start, end, word)`` of every word (``[A-Za-z]+|[0-9]+``) of ``caption``."""
    return [(m.start(), m.end(), m.group(0)) for m in _WORD_RE.finditer(caption)]


def n_to_mask(n_words: int, rate: float) -> int:
    """Number of words masked at ``rate``: ``max(1, round(rate * n))`` when ``rate > 0`` and the
    caption has words, else 0 (so every caption contributes at least one prediction)."""
    if n_words <= 0 or rate <= 0:
        return 0
    return min(n_words, max(1, int(round(rate * n_words))))


def sample_positions(n_words: int, rate: float, rng: np.random.Generator,
                     eligible: Sequence[int] | None = None) -> list[int]:
    """Sorted word positions to mask: ``n_to_mask(len(eligible), rate)`` positions drawn
    uniformly without replacement from ``eligible`` (default: all ``n_words`` words).

    With ``eligible`` given (Eq. 5: content words, never gender words) the rate applies to the
    eligible words; an empty ``eligible`` gives no positions."""
    pool = list(range(n_words)) if eligible is None else sorted(set(eligible))
    k = n_to_mask(len(pool), rate)
    if k == 0:
        return []
    return sorted(int(p) for p in rng.choice(pool, size=k, replace=False))


def mask_words(caption: str, positions: Sequence[int]) -> tuple[str, str, list[str]]:
    """T5 sentinel format of ``caption`` with the words at ``positions`` masked.

    Returns ``(source, target, originals)``: the normalised caption with the i-th masked word
    replaced by ``<extra_id_i>``, the target ``<extra_id_0> w0 <extra_id_1> w1 ... <extra_id_k>``
    (lower-cased words) and the original words (original case).

    Raises:
        ValueError: a position out of range, or more than 99 positions.
    """
    spans = word_spans(caption)
    pos = sorted(set(int(p) for p in positions))
    if pos and (pos[0] < 0 or pos[-1] >= len(spans)):
        raise ValueError(f"mask positions {pos} out of range for {len(spans)} words")
    if len(pos) >= N_SENTINELS:
        raise ValueError(f"at most {N_SENTINELS - 1} masked words, got {len(pos)}")
    out, last, target, originals = [], 0, [], []
    for i, p in enumerate(pos):
        s, e, w = spans[p]
        out.append(caption[last:s])
        out.append(f" {SENTINEL.format(i)} ")
        last = e
        target.append(f"{SENTINEL.format(i)} {w.lower()}")
        originals.append(w)
    out.append(caption[last:])
    target.append(SENTINEL.format(len(pos)))
    return normalize("".join(out)), " ".join(target), originals


def parse_fills(generated: str, n: int) -> list[str] | None:
    """Fills of sentinels ``0..n-1`` from a decoded T5 output (special tokens kept), or None when
    a sentinel is missing, out of order, or a fill is empty."""
    text = generated.replace("<pad>", " ").replace("</s>", " ")
    parts = SENTINEL_RE.split(text)
    # parts = [before, id0, fill0, id1, fill1, ...]
    fills: dict[int, str] = {}
    for j in range(1, len(parts) - 1, 2):
        k = int(parts[j])
        if k in fills:
            break
        fills[k] = " ".join(parts[j + 1].split())
    out = []
    for i in range(n):
        f = fills.get(i)
        if not f:
            return None
        out.append(f)
    return out


def _match_case(src: str, dst: str) -> str:
    if len(src) > 1 and src.isupper():
        return dst.upper()
    if src[:1].isupper():
        return dst[:1].upper() + dst[1:]
    return dst


def apply_fills(caption: str, positions: Sequence[int], fills: Sequence[str]) -> str:
    """``caption`` with the word at ``positions[i]`` replaced by ``fills[i]`` (case of the
    replaced word kept; spacing and punctuation of the caption kept). Articles ``a``/``an``
    right before a replaced word are fixed to agree with the fill."""
    spans = word_spans(caption)
    rep = {int(p): f for p, f in zip(positions, fills)}
    out, last = [], 0
    for i, (s, e, w) in enumerate(spans):
        new = w
        if i in rep:
            new = _match_case(w, rep[i])
        elif w.lower() in ("a", "an") and (i + 1) in rep and (i + 1) < len(spans) \
                and spans[i + 1][0] - e <= 1:
            nxt = rep[i + 1].strip()
            if nxt and re.match(r"[a-z]", nxt[0], re.I):
                new = _match_case(w, "an" if nxt[0].lower() in "aeiou" else "a")
        out.append(caption[last:s])
        out.append(new)
        last = e
    out.append(caption[last:])
    return "".join(out)


# --------------------------------------------------------------------------------------------
# tokenizer


def _pieces(text: str) -> list[str]:
    """Pieces of normalised text as the tokenizer should see them: per whitespace chunk, words,
    numbers and single punctuation marks; the first piece of a chunk carries ``▁``."""
    out = []
    for chunk in text.split():
        for j, m in enumerate(_PIECE_RE.finditer(chunk)):
            out.append((SPACE if j == 0 else "") + m.group(0))
    return out


def build_caption_tokenizer(captions: Sequence[str], vocab_size: int = 8000, min_count: int = 2,
                            specials: Sequence[str] = ("<pad>", "</s>", "<unk>"),
                            unk_token: str = "<unk>"):
    """A ``tokenizers`` Unigram tokenizer estimated on captions (offline tier).

    Pieces: every word / number / punctuation piece of the normalised captions seen at least
    ``min_count`` times (most frequent first, ``vocab_size`` in all), as ``▁word`` at the start
    of a whitespace chunk, plus every single character (with and without ``▁``) as a fallback so
    that nothing is unknown. Scores are log relative frequencies (characters far below words), so
    Viterbi segmentation keeps a known word whole: the tokenizer is word-level for the caption
    vocabulary and character-level for the rest.

    We do not use ``UnigramTrainer``'s EM: on small caption vocabularies (the synthetic default
    has ~100 distinct words) it prunes whole words and returns fragments (observed:
    ``woman -> w/om/a/n``). Pre-tokenizer/decoder: whitespace split + Metaspace, as T5.

    Returns:
        ``(tokenizers.Tokenizer, vocab)``; ``vocab`` is the ``[(piece, score), ...]`` list
        (specials first).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    counts = Counter(p for c in captions for p in _pieces(normalize(c)))
    total = sum(counts.values()) or 1
    chars = sorted({ch for p in counts for ch in p.lstrip(SPACE)}
                   | set("abcdefghijklmnopqrstuvwxyz0123456789.,'-"))
    char_pieces = [c for ch in chars for c in (ch, SPACE + ch)] + [SPACE]
    n_words = max(0, int(vocab_size) - len(specials) - len(char_pieces))
    words = [p for p, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
             if n >= min_count and len(p.lstrip(SPACE)) > 1][:n_words]
    vocab: list[tuple[str, float]] = [(s, 0.0) for s in specials]
    seen = set(specials)
    for p in words:
        vocab.append((p, math.log(counts[p] / total)))
        seen.add(p)
    floor = math.log(1.0 / total) - 10.0
    for p in char_pieces:
        if p not in seen:
            vocab.append((p, math.log(counts[p] / total) if counts.get(p) else floor))
            seen.add(p)
    tok = Tokenizer(models.Unigram(vocab, unk_id=list(specials).index(unk_token),
                                   byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.WhitespaceSplit(),
        pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="always", split=True)])
    tok.decoder = decoders.Metaspace(replacement=SPACE, prepend_scheme="always", split=True)
    return tok, vocab


def train_t5_tokenizer(captions: Sequence[str], vocab_size: int = 8000, min_count: int = 2):
    """``T5TokenizerFast`` over ``build_caption_tokenizer``'s vocabulary: ``<pad>`` = 0,
    ``</s>`` = 1, ``<unk>`` = 2, caption pieces, then ``<extra_id_99> ... <extra_id_0>`` at the
    end of the vocabulary (T5's layout)."""
    from transformers import T5TokenizerFast
    _, vocab = build_caption_tokenizer(captions, vocab_size - N_SENTINELS, min_count)
    vocab = vocab + [(SENTINEL.format(i), 0.0) for i in range(N_SENTINELS - 1, -1, -1)]
    return T5TokenizerFast(vocab=vocab, extra_ids=N_SENTINELS)
