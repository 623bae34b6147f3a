"""The DCG network of LIBRA (paper 003 sec. 4, Eq. 9; thesis sec. 3.4): its tokenizers, the
ViLT encoder and GPT-2 decoder (``generate``) or the ViLT encoder and per-word edit head
(``edit``), and :func:`build_dcg`. Training, inference and saving are in
:mod:`biaslab.libra.dcg`, which re-exports :class:`DCG` and :func:`build_dcg`; the module
docstring there says which formulation does what and why.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from biaslab.libra.t5 import quiet
from biaslab.libra.text import SPACE, build_caption_tokenizer, word_spans
from biaslab.libra.settings import EDIT, FEATURES, TINY, DCGSettings

#: the ``edit`` head's class for "keep the input word"
KEEP = "[KEEP]"
_SPECIALS = ("[PAD]", "[UNK]", "[MASK]", "[BOS]", "[EOS]")


def align_words(biased: Sequence[str], original: Sequence[str]) -> list[str] | None:
    """The original word (lower case) each biased word should become, for the ``edit``
    formulation: position by position when both have ``n`` words (BCS changes words in place),
    else through ``difflib`` (equal runs and same-length replacements); ``None`` when an
    insertion or deletion is needed, which a per-word edit cannot express (such pairs are left
    out of ``edit`` training and counted)."""
    import difflib
    b = [w.lower() for w in biased]
    o = [w.lower() for w in original]
    if len(b) == len(o):
        return o
    out: list[str] = [""] * len(b)
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=b, b=o, autojunk=False).get_opcodes():
        if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
            out[i1:i2] = o[j1:j2]
        else:
            return None
    return out


def output_vocabulary(captions: Sequence[str]) -> list[str]:
    """``edit`` output classes: ``[KEEP]`` then every lower-cased word of ``captions`` (sorted,
    so the same captions give the same indices everywhere)."""
    return [KEEP] + sorted({w.lower() for c in captions for _, _, w in word_spans(c)})


# --------------------------------------------------------------------------------------------
# tokenizers and model


def build_tokenizer(captions: Sequence[str], vocab_size: int = 8000, min_count: int = 2):
    """Offline-tier tokenizer (``PreTrainedTokenizerFast``) built on the captions, lower-casing,
    specials ``[PAD] [UNK] [MASK] [BOS] [EOS]`` = ids 0-4."""
    from tokenizers import normalizers
    from transformers import PreTrainedTokenizerFast
    tok, _ = build_caption_tokenizer(captions, vocab_size, min_count, specials=_SPECIALS,
                                     unk_token="[UNK]")
    tok.normalizer = normalizers.Lowercase()
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]",
                                   mask_token="[MASK]", bos_token="[BOS]", eos_token="[EOS]")


def load_tokenizer(name: str, local_files_only: bool):
    """A pretrained tokenizer (paper tier), pad and bos set to eos where missing (GPT-2)."""
    from transformers import AutoTokenizer
    from biaslab.models.textclf import resolve_model
    tok = AutoTokenizer.from_pretrained(resolve_model(name), local_files_only=local_files_only)
    if tok.pad_token is None:            # GPT-2
        tok.pad_token = tok.eos_token
    if tok.bos_token is None:
        tok.bos_token = tok.eos_token
    return tok


def build_encoder(s: DCGSettings, enc_tok):
    """The ViLT encoder: tiny from config (offline tier) or pretrained (name / local dir)."""
    from transformers import ViltConfig, ViltModel
    from biaslab.models.textclf import resolve_model
    if s.encoder == TINY:
        return ViltModel(ViltConfig(
            vocab_size=len(enc_tok), hidden_size=s.hidden, num_hidden_layers=s.layers,
            num_attention_heads=s.heads, intermediate_size=4 * s.hidden,
            hidden_dropout_prob=s.dropout, attention_probs_dropout_prob=s.dropout,
            max_position_embeddings=s.max_length, image_size=s.pixel_size,
            patch_size=s.patch_size, pad_token_id=enc_tok.pad_token_id, max_image_length=-1),
            add_pooling_layer=False)
    with quiet():
        return ViltModel.from_pretrained(resolve_model(s.encoder), add_pooling_layer=False,
                                         local_files_only=s.local_files_only)


def build_seq2seq(s: DCGSettings, enc_tok, dec_tok):
    """The ``generate`` network: ``EncoderDecoderModel`` of the ViLT encoder and a GPT-2
    decoder with cross-attention (tiny from config, or pretrained)."""
    from transformers import EncoderDecoderModel, GPT2Config, GPT2LMHeadModel
    from biaslab.models.textclf import resolve_model
    enc = build_encoder(s, enc_tok)
    if s.decoder == TINY:
        dec = GPT2LMHeadModel(GPT2Config(
            vocab_size=len(dec_tok), n_positions=s.max_length + 2, n_embd=s.hidden,
            n_layer=s.layers, n_head=s.heads, resid_pdrop=s.dropout, embd_pdrop=s.dropout,
            attn_pdrop=s.dropout, add_cross_attention=True, is_decoder=True,
            bos_token_id=dec_tok.bos_token_id, eos_token_id=dec_tok.eos_token_id,
            pad_token_id=dec_tok.pad_token_id))
    else:
        path = resolve_model(s.decoder)
        cfg = GPT2Config.from_pretrained(path, local_files_only=s.local_files_only)
        cfg.add_cross_attention = True     # new cross-attention layers, trained by Eq. 9
        cfg.is_decoder = True
        with quiet():
            dec = GPT2LMHeadModel.from_pretrained(path, config=cfg,
                                                  local_files_only=s.local_files_only)
    model = EncoderDecoderModel(encoder=enc, decoder=dec)
    set_ids(model, dec_tok)
    return model


def set_ids(model, dec_tok) -> None:
    """Copy the decoder tokenizer's special-token ids into the model and generation configs."""
    for cfg in (model.config, model.generation_config):
        cfg.decoder_start_token_id = dec_tok.bos_token_id
        cfg.bos_token_id = dec_tok.bos_token_id
        cfg.eos_token_id = dec_tok.eos_token_id
        cfg.pad_token_id = dec_tok.pad_token_id


def _torch_module():
    import torch
    return torch.nn.Module


class DCG(_torch_module()):
    """The DCG network: the ViLT encoder, the image projection (features mode), the tokenizers
    and the settings; ``generate``: ``seq2seq`` (EncoderDecoderModel: ViLT encoder, GPT-2
    decoder); ``edit``: ``edit_encoder`` (ViLT) and ``edit_head`` (per word: ``[KEEP]`` or a word
    of ``out_vocab``). Build with ``build_dcg``, train with ``train_dcg``, run with ``debias``;
    ``save``/``load``."""

    def __init__(self, settings: DCGSettings, seq2seq, enc_tok, dec_tok, feat_dim: int | None,
                 encoder=None, out_vocab: Sequence[str] | None = None):
        import torch
        from torch import nn
        super().__init__()
        self.settings = settings
        self.seq2seq = seq2seq
        self.enc_tok = enc_tok
        self.dec_tok = dec_tok
        self.feat_dim = feat_dim
        self.meta: dict = {}
        if settings.formulation == EDIT:
            if encoder is None or not out_vocab or out_vocab[0] != KEEP:
                raise ValueError(f"the edit DCG needs an encoder and an output vocabulary that "
                                 f"starts with {KEEP!r}")
            self.edit_encoder = encoder
            self.out_vocab = list(out_vocab)
            self.out_index = {w: i for i, w in enumerate(self.out_vocab)}
            self.edit_head = nn.Linear(encoder.config.hidden_size, len(self.out_vocab))
        h = self.vl_encoder.config.hidden_size
        if settings.image_input == FEATURES:
            if not feat_dim:
                raise ValueError("image_input 'features' needs feat_dim")
            k = settings.n_image_tokens
            self.img_proj = nn.Linear(int(feat_dim), k * h)
            self.img_pos = nn.Parameter(torch.zeros(k, h))
            nn.init.normal_(self.img_pos, std=0.02)
            self.img_norm = nn.LayerNorm(h)

    @property
    def vl_encoder(self):
        """The ViLT encoder of either formulation."""
        return self.edit_encoder if self.settings.formulation == EDIT else self.seq2seq.encoder

    # ---- inputs
    def _image_embeds(self, feats):
        import torch
        x = torch.as_tensor(np.asarray(feats, np.float32))
        b = x.shape[0]
        k = self.settings.n_image_tokens
        e = self.img_proj(x).view(b, k, -1) + self.img_pos
        return self.img_norm(e)

    def _pixels(self, images):
        import torch
        from PIL import Image
        size = self.settings.pixel_size
        arrs = []
        for im in images:
            if not isinstance(im, Image.Image):
                with Image.open(im) as f:
                    im = f.convert("RGB")
            a = np.asarray(im.convert("RGB").resize((size, size), Image.BICUBIC), np.float32)
            arrs.append(((a / 255.0 - 0.5) / 0.5).transpose(2, 0, 1))
        return torch.from_numpy(np.ascontiguousarray(np.stack(arrs)))

    def _vl_hidden(self, ids, am, images):
        """ViLT over text ids ``(B, T)`` with mask ``am`` and the images (features ``(B, F)``
        projected to ``n_image_tokens`` embeddings, or pixels): last hidden state
        ``(B, T + image tokens, H)``."""
        import torch
        b = ids.shape[0]
        if self.settings.image_input == FEATURES:
            emb = self._image_embeds(images)
            out = self.vl_encoder(input_ids=ids, attention_mask=am, image_embeds=emb,
                                  pixel_mask=torch.ones(b, emb.shape[1], dtype=torch.long))
        else:
            px = self._pixels(images)
            out = self.vl_encoder(input_ids=ids, attention_mask=am, pixel_values=px,
                                  pixel_mask=torch.ones(b, px.shape[2], px.shape[3],
                                                        dtype=torch.long))
        return out.last_hidden_state

    def encode(self, masked_texts: Sequence[str], images):
        """Encoder pass: ``(hidden (B, T, H), attention mask (B, T))`` over text + image
        tokens. ``images``: features ``(B, F)`` or a list of image paths / PIL images."""
        import torch
        enc = self.enc_tok(list(masked_texts), padding=True, truncation=True,
                           max_length=self.settings.max_length, return_tensors="pt")
        ids, am = enc["input_ids"], enc["attention_mask"]
        h = self._vl_hidden(ids, am, images)
        b = ids.shape[0]
        mask = torch.cat([am, torch.ones(b, h.shape[1] - am.shape[1], dtype=am.dtype)], dim=1)
        return h, mask

    def encode_words(self, word_lists: Sequence[Sequence[str]], images):
        """Encoder pass over pre-split words (``edit``). Returns ``(hidden (B, T, H), first
        (list of B int lists: the token position of each word's first piece, -1 when the word
        was truncated away))``."""
        enc = self.enc_tok([list(w) for w in word_lists], is_split_into_words=True,
                           padding=True, truncation=True, max_length=self.settings.max_length,
                           return_tensors="pt")
        firsts = []
        for i, words in enumerate(word_lists):
            pos = [-1] * len(words)
            for t, w in enumerate(enc.word_ids(i)):
                if w is not None and pos[w] < 0:
                    pos[w] = t
            firsts.append(pos)
        return self._vl_hidden(enc["input_ids"], enc["attention_mask"], images), firsts

    def edit_logits(self, word_lists: Sequence[Sequence[str]], images):
        """``edit`` logits: a list of B tensors ``(n_words_i, len(out_vocab))`` (rows of
        truncated words are NaN-free zeros, flagged by ``first == -1``) and the ``firsts``."""
        import torch
        h, firsts = self.encode_words(word_lists, images)
        logits = self.edit_head(h)
        out = []
        for i, pos in enumerate(firsts):
            idx = torch.tensor([max(p, 0) for p in pos], dtype=torch.long)
            out.append(logits[i, idx] if len(pos) else logits[i, :0])
        return out, firsts

    def edit_loss(self, word_lists: Sequence[Sequence[str]], images,
                  targets: Sequence[Sequence[int]]):
        """Cross-entropy of the per-word targets (``edit_targets``; -100 = ignored), summed
        over each caption's words and averaged over the batch (Eq. 9's reduction). Returns
        ``(loss, number of target words)``."""
        import torch
        logits, firsts = self.edit_logits(word_lists, images)
        tot, n = logits[0].sum() * 0.0, 0
        for lg, pos, tg in zip(logits, firsts, targets):
            t = torch.tensor([x if p >= 0 else -100 for x, p in zip(tg, pos)], dtype=torch.long)
            if len(t) and (t != -100).any():
                tot = tot + torch.nn.functional.cross_entropy(lg, t, ignore_index=-100,
                                                              reduction="sum")
                n += int((t != -100).sum())
        return tot / len(logits), n

    def edit_targets(self, biased: str, original: str, masked: Sequence[int] = ()
                     ) -> list[int] | None:
        """Per word of ``biased``, the target class: 0 (``[KEEP]``) where the aligned original
        word is the same (case-insensitive), else the original word's index in ``out_vocab``
        (-100 when it is not in the vocabulary); a masked position (``masked``) always has its
        word's index, since the model cannot see the word it would keep. ``None`` when the two
        captions do not align word for word (``align_words``)."""
        bw = [w for _, _, w in word_spans(biased)]
        ow = align_words(bw, [w for _, _, w in word_spans(original)])
        if ow is None:
            return None
        ms = set(masked)
        return [self.out_index.get(o, -100) if (k in ms or o != b.lower()) else 0
                for k, (b, o) in enumerate(zip(bw, ow))]

    def _targets(self, originals: Sequence[str]):
        import torch
        tok = self.dec_tok
        ids = tok(list(originals), add_special_tokens=False, truncation=True,
                  max_length=self.settings.max_length)["input_ids"]
        n = max(len(x) for x in ids) + 1
        dec_in = torch.full((len(ids), n), tok.pad_token_id, dtype=torch.long)
        labels = torch.full((len(ids), n), -100, dtype=torch.long)
        for i, x in enumerate(ids):
            dec_in[i, :len(x) + 1] = torch.tensor([tok.bos_token_id] + x)
            labels[i, :len(x) + 1] = torch.tensor(x + [tok.eos_token_id])
        return dec_in, labels

    def loss(self, masked_texts: Sequence[str], images, originals: Sequence[str]):
        """Eq. 9: ``-sum_t log p(y_t | y_<t, I, y*)`` per caption (end token included), averaged
        over the batch. Returns ``(loss, number of target tokens)``."""
        import torch
        h, mask = self.encode(masked_texts, images)
        dec_in, labels = self._targets(originals)
        out = self.seq2seq(encoder_outputs=(h,), attention_mask=mask,
                           decoder_input_ids=dec_in,
                           decoder_attention_mask=(labels != -100).long())
        nll = torch.nn.functional.cross_entropy(out.logits.transpose(1, 2), labels,
                                                ignore_index=-100, reduction="none")
        return nll.sum(1).mean(), int((labels != -100).sum())

    def generate_from_masked(self, masked_texts: Sequence[str], images,
                             num_beams: int | None = None,
                             max_new_tokens: int | None = None) -> list[str]:
        """Decode debiased captions for already-masked inputs (greedy or beam search)."""
        import torch
        from transformers.modeling_outputs import BaseModelOutput
        s = self.settings
        with torch.no_grad(), quiet():
            h, mask = self.encode(masked_texts, images)
            gen = self.seq2seq.generate(
                encoder_outputs=BaseModelOutput(last_hidden_state=h), attention_mask=mask,
                num_beams=int(num_beams or s.num_beams), do_sample=False,
                max_new_tokens=int(max_new_tokens or s.max_new_tokens),
                decoder_start_token_id=self.dec_tok.bos_token_id,
                eos_token_id=self.dec_tok.eos_token_id, pad_token_id=self.dec_tok.pad_token_id)
        texts = self.dec_tok.batch_decode(gen, skip_special_tokens=True)
        return [" ".join(t.replace(SPACE, " ").split()) for t in texts]


def build_dcg(settings: DCGSettings, captions: Sequence[str] = (),
              feat_dim: int | None = None, seed: int = 0) -> DCG:
    """A new (untrained, or pretrained-tier) DCG. ``captions`` build the tiny tokenizer and,
    for ``edit``, the output vocabulary (``output_vocabulary``: every target word must be in
    them). Random initialisation (tiny towers, cross-attention, image projection, edit head)
    draws from a torch RNG seeded with ``seed`` and forked, so the same inputs give the same
    weights in every process (the global torch RNG is not reproducible across runs) and
    callers' RNG state is untouched."""
    import torch
    s = settings
    edit = s.formulation == EDIT
    if edit and not len(captions):
        raise ValueError("the edit DCG's output vocabulary needs training captions")
    if s.encoder == TINY or (s.decoder == TINY and not edit):
        if not len(captions):
            raise ValueError("the tiny DCG tokenizer needs training captions")
        tiny_tok = build_tokenizer(captions, s.vocab_size, s.min_count)
    enc_tok = tiny_tok if s.encoder == TINY else load_tokenizer(s.encoder, s.local_files_only)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        if edit:
            return DCG(s, None, enc_tok, None, feat_dim, encoder=build_encoder(s, enc_tok),
                       out_vocab=output_vocabulary(captions))
        dec_tok = (tiny_tok if s.decoder == TINY
                   else load_tokenizer(s.decoder, s.local_files_only))
        return DCG(s, build_seq2seq(s, enc_tok, dec_tok), enc_tok, dec_tok, feat_dim)


