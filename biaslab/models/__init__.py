"""Small models that other components use as instruments: frozen image and
text backbones (``features``), the gender classifiers over masked captions (``textclf``), the
prompt-adherence scorer (``clipscorer``) and the object predictor (``objects``)."""
