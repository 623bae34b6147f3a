"""Decoding for the captioners that are not Hugging Face generators (the Transformer
captioner): deterministic beam search over a next-token log-probability function.

Scoring is Hugging Face ``generate``'s with ``length_penalty`` 1.0 and ``early_stopping``
True, so ClipCap (which uses ``generate``) and the Transformer captioner decode by the same
rule: a finished hypothesis scores its summed log-probability (end token included) divided by
its length (end token included), i.e. the mean token log-probability; an image stops as soon
as ``beam`` hypotheses have finished; at ``max_new`` tokens the open hypotheses are finished as
they are. Ties go to the lower token id (``torch.topk`` order on CPU).
"""
from __future__ import annotations

from collections.abc import Callable

__all__ = ["beam_search", "cut_at_eos"]


def beam_search(next_logprobs: Callable, n: int, bos: int, eos: int, beam: int = 3,
                max_new: int = 21) -> list[list[int]]:
    """Best token sequence (end token removed) for each of ``n`` inputs.

    Args:
        next_logprobs: ``next_logprobs(rows, tokens) -> (m, V)`` float tensor of next-token
            log-probabilities, where ``rows`` is an int64 (m,) tensor of input indices
            (0..n-1) and ``tokens`` int64 (m, t) the hypotheses so far (``bos`` first).
        n: number of inputs (images).
        bos, eos: start / end token ids.
        beam: beams per input (1 = greedy).
        max_new: most tokens generated per input (end token included).

    Returns:
        n lists of token ids without ``bos`` and ``eos`` (at most ``max_new`` ids).

    Raises:
        ValueError: ``beam`` or ``max_new`` < 1.
    """
    import torch
    beam, max_new = int(beam), int(max_new)
    if beam < 1 or max_new < 1:
        raise ValueError(f"beam and max_new must be >= 1, got {beam}, {max_new}")
    # alive[i]: list of (score sum, tokens); finished[i]: list of (mean score, tokens)
    alive = {i: [(0.0, [])] for i in range(n)}
    finished: dict[int, list] = {i: [] for i in range(n)}
    for step in range(max_new):
        if not alive:
            break
        rows, toks, owners = [], [], []
        for i, hyps in alive.items():
            for h, (sc, t) in enumerate(hyps):
                rows.append(i)
                toks.append([bos] + t)
                owners.append((i, h))
        lp = next_logprobs(torch.tensor(rows, dtype=torch.long),
                           torch.tensor(toks, dtype=torch.long)).float()
        k = min(2 * beam, lp.shape[-1])
        top_v, top_i = torch.topk(lp, k, dim=-1)
        cands: dict[int, list] = {}
        for r, (i, h) in enumerate(owners):
            sc, t = alive[i][h]
            for v, tok in zip(top_v[r].tolist(), top_i[r].tolist()):
                cands.setdefault(i, []).append((sc + v, t, tok))
        last = step == max_new - 1
        new_alive = {}
        for i, cs in cands.items():
            cs.sort(key=lambda c: -c[0])          # stable: ties keep (hypothesis, token) order
            keep = []
            for rank, (sc, t, tok) in enumerate(cs):
                if tok == eos:
                    if rank < beam:                # as HF: an end token beyond the beam is dropped
                        finished[i].append((sc / (len(t) + 1), t))
                elif last:
                    finished[i].append((sc / (len(t) + 1), t + [tok]))
                else:
                    keep.append((sc, t + [tok]))
                if len(keep) == beam:
                    break
            if len(finished[i]) < beam and keep and not last:
                new_alive[i] = keep
        alive = new_alive
    out = []
    for i in range(n):
        best = max(finished[i], key=lambda f: f[0]) if finished[i] else (0.0, [])
        out.append(list(best[1]))
    return out


def cut_at_eos(ids: list[int], eos: int) -> list[int]:
    """``ids`` up to (not including) the first ``eos``."""
    return ids[:ids.index(eos)] if eos in ids else list(ids)
