"""Experiments over several families: the layer above the tasks and the family packages.

    comparison   BERT and the models before it (ELMo, ULMFiT, SiATL, CoVe) on one
                 task (`run/compare_models.py`)
    zero_shot    zero-shot cross-lingual transfer of a multilingual BERT
                 (`run/zero_shot_transfer.py`)

An experiment may import anything in `modeling`; nothing in the library imports an
experiment (`tests/test_dependencies.py`). The package imports none of its modules, so
`modeling.registry.discover()` does not load them.
"""
