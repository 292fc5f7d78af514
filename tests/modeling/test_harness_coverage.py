"""Every built-in family and objective goes through the shared harness.

A family or objective registered under `modeling/` without a case in
`tests/harness.py`'s runs (`test_encoders.py`, `test_<family>_harness.py`) makes
this test fail, so the harness's checks cannot be skipped by forgetting them.

The harness drives Transformer encoders (`[batch, seq]` token ids, attention
maps, an embedding table). A family outside that contract names the module
that tests it instead (`OWN_CHECKS`): ELMo reads characters of words and
has no attention; `tests/modeling/elmo/test_elmo.py` checks its directions by perturbation,
its character CNN and its objective against NumPy. ULMFiT's AWD-LSTM reads
word ids but has no attention either; `tests/modeling/ulmfit/test_ulmfit.py` checks its
dropouts, its forward LM by perturbation and its tied softmax against NumPy.
"""

import glob
import os

import test_distilbert_harness
import test_encoders
import test_gpt_harness
import test_gpt2_harness
import test_mass_harness
import test_roberta_harness
import test_xlnet_harness

from modeling import registry

# family or objective -> the test module that checks it instead of the harness.
OWN_CHECKS = {"elmo": "test_elmo.py", "bidirectional_lm": "test_elmo.py",
              "ulmfit": "test_ulmfit.py", "word_lm": "test_ulmfit.py"}
# CoVe's encoder-decoder: directions, attention and decoder causality by perturbation.
OWN_CHECKS.update({"cove": "test_cove.py", "translation": "test_cove.py"})


def _built_in(table):
    # Parts registered by users' modules (some tests register their own) are
    # not the harness's business.
    return [name for name, part in table.items()
            if getattr(part, "__module__", "").startswith("modeling.")
            or getattr(getattr(part, "build_encoder", None), "__module__", "").startswith(
                "modeling.")]


def test_every_family_and_objective_has_a_harness_case():
    encoder_cases = [case.name for case in test_encoders.ENCODER_CASES
                     + test_distilbert_harness.ENCODER_CASES
                     + test_gpt2_harness.ENCODER_CASES
                     + test_gpt_harness.ENCODER_CASES
                     + test_mass_harness.ENCODER_CASES
                     + test_roberta_harness.ENCODER_CASES
                     + test_xlnet_harness.ENCODER_CASES]
    objective_cases = [case.name for case in test_encoders.OBJECTIVE_CASES
                       + test_distilbert_harness.OBJECTIVE_CASES
                       + test_gpt2_harness.OBJECTIVE_CASES
                       + test_gpt_harness.OBJECTIVE_CASES
                       + test_mass_harness.OBJECTIVE_CASES
                       + test_roberta_harness.OBJECTIVE_CASES
                       + test_xlnet_harness.OBJECTIVE_CASES]
    tests_root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    for name, module in OWN_CHECKS.items():
        found = glob.glob(os.path.join(tests_root, "**", module), recursive=True)
        assert len(found) == 1, (name, module, found)
        text = open(found[0], encoding="utf-8").read()
        assert name in text, (name, module)
    for family in _built_in(registry.families):
        assert family in OWN_CHECKS or any(name.startswith(family) for name in encoder_cases), \
            family
    for objective in _built_in(registry.objectives):
        assert objective in OWN_CHECKS or any(name.split("/")[0] == objective
                                              for name in objective_cases), objective
