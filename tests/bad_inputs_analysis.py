# coding=utf-8
"""Bad-input cases of the analysis and inspection scripts (analyze_attention, analyze_shortcuts, probe_cloze, prune_heads, compare_models, predict_masked).

Registered with `bad_inputs_kit.case`; `tests/test_bad_inputs.py` runs them.
"""

import os

from bad_inputs_kit import assert_error, case, run_script  # pylint: disable=unused-import
