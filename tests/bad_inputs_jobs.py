# coding=utf-8
"""Bad-input cases of the fine-tuning jobs (run_classifier, run_ner, run_siamese, run_multitask, run_cvt, run_distillation, run_siatl, run_translation).

Registered with `bad_inputs_kit.case`; `tests/test_bad_inputs.py` runs them.
"""

import os

from bad_inputs_kit import assert_error, case, run_script  # pylint: disable=unused-import
