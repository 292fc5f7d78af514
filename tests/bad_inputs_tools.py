# coding=utf-8
"""Bad-input cases of the retrieval, conversion and serving scripts (build_index, match, convert_checkpoint, data_service, zero_shot_transfer).

Registered with `bad_inputs_kit.case`; `tests/test_bad_inputs.py` runs them.
"""

import os

from bad_inputs_kit import assert_error, case, run_script  # pylint: disable=unused-import
