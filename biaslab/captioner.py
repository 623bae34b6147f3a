"""Compatibility shim: the captioners live in :mod:`biaslab.captioning` (one module per
captioner, plus shared tokens / training / data / evaluation modules). Every name this module
used to define is re-exported here unchanged, so ``from biaslab import captioner as C`` keeps
working; new code should import from :mod:`biaslab.captioning` directly.

=====================================  ===============================================
names                                  now in
=====================================  ===============================================
CaptionerConfig, config_from_params,   :mod:`biaslab.captioning.clipcap`
ClipCapModel, Captioner,
build_captioner, train_captioner, TINY
build_tokenizer, normalize_caption     :mod:`biaslab.captioning.tokens`
manifest_samples, manifest_image_table,:mod:`biaslab.captioning.data`
image_features
caption_metrics, seed_records,         :mod:`biaslab.captioning.evaluation`
gender_labels, clip_score_for,
apply_libra, METRICS, GENDER_SOURCES
=====================================  ===============================================
"""
from __future__ import annotations

from biaslab.captioning.clipcap import (CONFIG_FILE, PREFIX_FILE, TINY, _FORMAT,  # noqa: F401
                                        Captioner, CaptionerConfig, ClipCapModel,
                                        _build_decoder, _val_loss, build_captioner,
                                        config_from_params, train_captioner)
from biaslab.captioning.data import (_path_id, image_features,  # noqa: F401
                                     manifest_image_table, manifest_samples)
from biaslab.captioning.evaluation import (GENDER_SOURCES, METRICS, _number,  # noqa: F401
                                           apply_libra, caption_metrics, clip_score_for,
                                           gender_labels, seed_records)
from biaslab.captioning.tokens import (EOS, PAD, UNK, _load_pretrained_tokenizer,  # noqa: F401
                                       _tidy, build_tokenizer, normalize_caption)
from biaslab.captioning.training import json_default as _json_default  # noqa: F401
from biaslab.captioning.training import pad as _pad  # noqa: F401
from biaslab.captioning.training import standardiser as _standardiser  # noqa: F401
from biaslab.runtime.io import InputError  # noqa: F401

__all__ = ["CaptionerConfig", "config_from_params", "build_tokenizer", "normalize_caption",
           "ClipCapModel", "Captioner", "build_captioner", "train_captioner",
           "manifest_samples", "manifest_image_table", "image_features", "caption_metrics",
           "clip_score_for", "seed_records", "gender_labels", "apply_libra", "METRICS",
           "GENDER_SOURCES", "TINY"]
