"""Datasets and labels: readers of COCO and OpenImages layouts (``coco``,
``openimages``), the synthetic generator with its planted bias (``synthetic``), the published
captioners' outputs (``published``), gender words and labels (``gender``, ``labels``) and the
training-set variants (``datasets``, ``variants``)."""
