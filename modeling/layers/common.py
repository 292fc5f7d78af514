"""Constants shared by every layer (Google's numerics)."""

# Keras serialisation package name of every layer and model of the project.
PACKAGE = "bert_family"
# What google-research/bert adds to the scores of masked positions. A finite
# adder (rather than -inf) keeps fully-masked rows finite (uniform) and is
# representable in float16.
MASK_ADDER = -10000.0
LAYER_NORM_EPSILON = 1e-12
