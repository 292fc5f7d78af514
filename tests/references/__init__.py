"""Independent float64 NumPy forward passes, one module per model family.

Each module reads plain arrays only (never the project's layers) and offers
`params_from_<family>(encoder)`, which reads a Keras encoder's variables at
their documented paths, and `forward(params, ...)`. `tests/harness.py`
compares encoders against them (see its docstring).
"""
