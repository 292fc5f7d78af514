"""Imported FIRST by every script in `run/`: starts the process runtime (`modeling.cli.runtime`).

    import script                      # quiet TensorFlow start, SIGTERM, CPU settings
    ...
    if __name__ == "__main__":
        script.run(main, required_flags=["input_file"])

Importing this file is what makes ``python run/X.py`` a script: SIGTERM
handling, TensorFlow's CPU settings and its quiet import happen here, before
the script's own imports. The functions are `modeling.cli.runtime`'s.
"""

from modeling.cli import runtime

runtime.start()

# pylint: disable=wrong-import-position,unused-import
from modeling.cli.runtime import USER_ERRORS, filtered_stderr, one_line, run, user_errors  # noqa: E402,F401
