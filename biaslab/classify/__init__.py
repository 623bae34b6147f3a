"""Multi-label classification of objects and gender, and its bias metrics (Hirota et al.,
"Resampled Datasets Are Not Enough", EMNLP 2024 -- paper 000 -- sec. 3.1, Table 1, appendix
B.1, Eq. 7).

Package layout (every public name is re-exported here, ``from biaslab.classify import X``):

* :mod:`~biaslab.classify.model` -- output layout, ``TrainSettings``, the head and
  :class:`GenderObjectClassifier` (save / load);
* :mod:`~biaslab.classify.manifest` -- label selection, targets, validation split, the test
  table, object matrices, features of manifest rows;
* :mod:`~biaslab.classify.train` -- :func:`train_classifier` (head on frozen features, any
  method) and :func:`train_finetune` (paper tier, ERM);
* :mod:`~biaslab.classify.methods` -- ERM and the model-level baselines of Table 1, one
  module each: ``adversarial`` (Adversarial), ``domain`` (DomDisc, DomInd), ``reweight``
  (Upweight, CB), ``focal`` (Focal), ``group_dro`` (GroupDRO);
* :mod:`~biaslab.classify.tune` -- the same hyper-parameter budget for every row
  (``classifier.tuning``; imported as a module, not re-exported);
* :mod:`~biaslab.classify.blackout` -- persons blacked out of test images (Ratio);
* :mod:`~biaslab.classify.evaluate` -- mAP, Ratio, Leakage of one model, seed records.

Task (appendix B.1). The label space is the objects that co-occur with the gender groups in the
ORIGINAL training set (paper: "attributes co-occurring with woman or man more than 100 times",
51 COCO objects), person-related classes excluded (``objects.parquet`` has no ``person``), plus
the two protected-group outputs ``woman`` and ``man`` ("the classification layers predict both
protected groups and object classes"). :func:`select_labels` keeps an object when it co-occurs
with EACH group at least ``min_cooccur`` times (``rule="each"``; ``rule="any"``: with at least
one group) -- the paper's wording is ambiguous between the two; "each" is the rule of Zhao et
al. 2017 that the paper cites, and the only one under which Leakage can be estimated for every
object. Paper value 100 (``> 100`` in the text; we use ``>=``); scaled down for small data.

Model. The paper fine-tunes ImageNet backbones (ResNet-50, Swin-T, ConvNeXt-B) with Adam, batch
32, lr 1e-5, early stopping on a validation split of 20 % of the training set. The offline
default here is a head on *frozen* backbone features (``finetune: false``; EfficientNet-Lite0,
:mod:`biaslab.models.features`): features standardised with the training mean/std, then ``hidden``
``Linear -> ReLU -> Dropout`` layers (``[]``: a linear layer, the paper's classification
layer) and ``Linear(|O| + 2)``; one sigmoid per output, trained with binary cross-entropy,
Adam, mini-batches of ``batch_size``, at most ``epochs`` epochs, early stopping when the
validation loss has not improved for ``patience`` epochs (the best epoch's weights are kept).
A frozen backbone needs a larger lr than fine-tuning (ci: 1e-3). ``finetune: true`` (paper
tier) trains the backbone end to end from the images (:func:`train_finetune`): slow on CPU.

Validation split (:func:`validation_split`): 20 % of the training manifest's *source images*
(``image_id``), drawn with ``numpy.random.default_rng(seed)``; every row of an image (an
over-sampled copy, a counterfactual of it) falls on the same side, so no copy of a validation
image is trained on.

Label completeness (``labelled_only``, default True): in COCO-layout data an image without any
object row may be unlabelled rather than empty (coco-mini: only ~1.6k images have complete
object sets). Such rows still train the gender outputs but their object outputs are masked out
of the loss, and evaluation uses only labelled images for mAP and Leakage. The synthetic source
has complete labels (an image without objects is rare), so this changes little there.

Metrics (sec. 3.1):

* mAP: macro mean of scikit-learn ``average_precision_score`` over the object labels with at
  least one positive in the test images (:func:`biaslab.models.objects.mean_average_precision`).
* Ratio: persons are blacked out of the test images (:func:`blackout_persons`), features are
  re-extracted and the gender outputs compared: ``r = #man / #woman`` predictions
  (:func:`biaslab.metrics.captions.classification_ratio`), counted the way a multi-label
  classifier predicts: each gender output is a prediction where it is at or above its
  threshold (:func:`gender_thresholds`: 0.5 unless the model stores validation-tuned ones);
  an image with both outputs on counts for both, one with neither for none (``n_both``,
  ``n_neither`` reported). Reported as ``max(r, 1/r)``; r = 0 or inf gives an infinite
  Ratio, which the seed summary counts and keeps (``biaslab.runtime.stats``). The paper does not say
  how persons are masked; the pipeline default blacks out whole person BOXES: a blacked-out
  polygon or keypoint silhouette keeps the body outline, which still shows gender (measured
  on the synthetic source, where gender is drawn only through body shape: a classifier
  trained without any planted bias reads gender from polygon-masked images with AUC 81-84 %,
  from box-masked ones with AUC ~50 %).
* Leakage: ``LK_M - LK_D`` (Eq. 7, x100; :func:`biaslab.metrics.leakage.leakage`). The
  attackers are trained on the TRAINING images (paper 000 sec. 3.1: f "is trained on a
  training set T"; Wang et al. 2019): LK_D's on their ground-truth objects, LK_M's on the
  model's object predictions for them, and both are scored on the labelled test images
  (ground truth / the model's predictions). The predictions are binarised at
  ``leakage_threshold`` (a number, ``"val_f1"`` = per-object thresholds maximising F1 on the
  validation split, or None = the predicted probabilities themselves, as the code of Wang et
  al. 2019 feeds its attacker the logits; :func:`object_predictions`).
* Diagnostics (not in the paper): ``masked_gender_auc`` = ROC AUC of ``p_man - p_woman`` on
  the masked images, i.e. how much gender the context alone gives away. Unlike Ratio it does
  not move with a constant offset of the gender decision.

What the metrics can and cannot see (measured on the synthetic source, 300 images per bias
level, 2 seeds, attackers trained on the training images, Ratio from thresholded outputs;
tests/test_classify.py): with a planted bias of 0.9 vs 0, the masked-image gender AUC rises
from ~49 to ~75-89 and LK_M/LK_D from ~33-51 to ~93-96, but Leakage (``LK_M - LK_D``) does NOT
rise (+15..+18 at bias 0, -3..-2 at bias 0.9: LK_D saturates near its ceiling and the model's
object errors lower LK_M), and Ratio FALLS (the man output is on and the woman output off for
every masked image, r = inf, at bias 0; 6-29 at bias 0.9). Ratio needs a gender imbalance to
read context bias: on a gender-balanced test set a model that reads gender from the context
splits its calls about evenly (r ~ 1), while a model that cannot read gender from a masked
image makes one constant call for all of them (r -> 0 or inf). COCO's test set is 2.3 : 1 men :
women; the synthetic source is balanced.

Model-level baselines (Table 1 rows Adversarial, DomDisc, DomInd, Upweight, Focal, CB,
GroupDRO; :mod:`biaslab.classify.methods`): the same head, features, validation split, Adam
and early stopping (on the inference outputs' BCE), with the method's output layout, loss
and inference rule; trained on Original (stage ``train_method``) and evaluated with the same
mAP / Ratio / Leakage code. The adversarial model has no gender outputs: its Ratio is n/a
(stored as null with ``ratio_na``, counted as missing). Measured on the planted-bias
synthetic source (bias 0.9, 300 images, 3 seeds, tests/test_classify_methods.py): Leakage
ERM -5.8 / -2.5 / -4.7, GroupDRO -8.3 / -3.6 / -8.8, Adversarial -9.2 / -24.9 / -16.5 (mAP
71 / 72 / 68 -> 68 / 70 / 65 and 67 / 66 / 65): both lower Leakage, the adversary by more
and at a larger mAP cost, the direction of paper 000 Table 1.

Determinism: given ``seed`` (validation split, initialisation, batch order) and one torch thread
the trained weights are bitwise reproducible on CPU.
"""
from __future__ import annotations

from biaslab.classify.blackout import blackout_persons, save_like, write_blackout_images
from biaslab.classify.evaluate import (attribute_leakage, evaluate, evaluate_outputs,
                                       gender_thresholds, json_record,
                                       object_predictions, ratio_flag, ratio_of,
                                       expected_ratio)
from biaslab.classify.manifest import (TEST_COLUMNS, encode_files, file_id, label_targets,
                                       manifest_features, model_features, object_matrix,
                                       select_labels, test_table, validation_split)
from biaslab.classify.methods import get_method
from biaslab.classify.model import (BACKBONE_FILE, CONFIG_FILE, GENDER_OF, GENDER_OUTPUTS,
                                    PAPER_BACKBONES, WEIGHTS_FILE, GenderObjectClassifier,
                                    TrainSettings, build_head, classifier_backbones)
from biaslab.classify.train import train_classifier, train_finetune
from biaslab.runtime.io import InputError

__all__ = ["GENDER_OUTPUTS", "TrainSettings", "select_labels", "label_targets", "validation_split",
           "test_table", "object_matrix", "save_like", "write_blackout_images", "model_features",
           "file_id", "encode_files", "manifest_features", "GenderObjectClassifier",
           "train_classifier", "train_finetune", "blackout_persons", "gender_thresholds",
           "ratio_of", "expected_ratio", "ratio_flag", "object_predictions", "evaluate",
           "evaluate_outputs", "attribute_leakage",
           "json_record",
           "get_method", "PAPER_BACKBONES", "classifier_backbones"]
