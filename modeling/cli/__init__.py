"""The command-line layer: the scripts' process runtime and the package's console entry points.

`runtime` is what every `run/` script does around its `main` (a quiet
TensorFlow start, one-line errors, SIGTERM as an orderly exit, the CPU
settings); `entry` starts a `run/` script as an installed command
(``bert-run-classifier``, ...). Nothing here acts on import.
"""
