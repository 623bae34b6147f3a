"""Caption tokenisation shared by the captioners (paper 000 app. B.2; tiny tier: a word-level
vocabulary estimated on the training captions, see :func:`build_tokenizer`)."""
from __future__ import annotations

import re
from collections.abc import Sequence

from biaslab.runtime.io import InputError

PAD, UNK, EOS = "<pad>", "<unk>", "<eos>"

__all__ = ["PAD", "UNK", "EOS", "normalize_caption", "build_tokenizer", "tidy"]


_SPACES = re.compile(r"\s+")
_DETACH = re.compile(r"\s+([.,!?;:])")
_APOS = re.compile(r"\s*'\s*(s|t|re|ve|m|ll|d)\b")


def normalize_caption(text: str) -> str:
    """Whitespace-normalised caption (case and punctuation kept; the tiny tokenizer lower-cases)."""
    return _SPACES.sub(" ", str(text)).strip()


def tidy_tokens(text: str) -> str:
    """Join word-level tokens back into text: no space before punctuation, ``woman ' s`` ->
    ``woman's``."""
    text = _SPACES.sub(" ", text).strip()
    text = _DETACH.sub(r"\1", text)
    return _APOS.sub(r"'\1", text)


def build_tokenizer(captions: Sequence[str], vocab_size: int = 10000, min_count: int = 2):
    """Word-level tokenizer estimated on ``captions`` (tiny tier), as a
    ``transformers.PreTrainedTokenizerFast``.

    Normaliser NFKC + lower-case; pre-tokenizer ``Whitespace`` (``\\w+|[^\\w\\s]+``: words and
    punctuation runs); vocabulary: ``<pad>`` = 0, ``<unk>`` = 1, ``<eos>`` = 2, then the tokens
    seen at least ``min_count`` times, most frequent first (``tokenizers.trainers.
    WordLevelTrainer``), ``vocab_size`` in all. Unknown words map to ``<unk>``. ``bos`` is the
    end token, as in GPT-2 (unused: the image prefix starts every caption).
    """
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    tok = Tokenizer(models.WordLevel(unk_token=UNK))
    tok.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.WordLevelTrainer(vocab_size=int(vocab_size),
                                        min_frequency=max(1, int(min_count)),
                                        special_tokens=[PAD, UNK, EOS], show_progress=False)
    tok.train_from_iterator([normalize_caption(c) for c in captions], trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=PAD, unk_token=UNK,
                                   eos_token=EOS, bos_token=EOS, model_max_length=1024)


def load_pretrained_tokenizer(name: str, local_files_only: bool):
    """A decoder's pretrained tokenizer (pad = eos when it has no pad token).

    Raises:
        InputError: the tokenizer has no end-of-sequence token."""
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(name, local_files_only=local_files_only)
    if tok.eos_token is None:
        raise InputError(name, "the decoder's tokenizer has no end-of-sequence token")
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


tidy = tidy_tokens
