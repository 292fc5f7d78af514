"""Fine-tuning tasks: a model, and a job that trains and evaluates it.

Each task registers a `FineTuningTask` in `modeling.registry.tasks`, so a
script or a notebook finds it by name:

    from modeling import registry
    task = registry.tasks.get("classification")
    result = task.run(task.job_class(task_name="mrpc", data_dir=..., do_train=True, ...))

The job dataclass holds the run script's flags as fields (the script fills
it with `run/common_flags.job_from_flags`), and `run(job)` is the whole run:
the library never reads absl flags.
"""

import dataclasses
from typing import Any, Callable

__all__ = ["FineTuningTask"]


@dataclasses.dataclass(frozen=True)
class FineTuningTask:
    """What `registry.tasks` holds for one fine-tuning task.

    Attributes:
        name: registry name ("classification").
        description: one line, for listings.
        model_class: the Keras task model (`from_config_object(config, ...)`).
        job_class: the job dataclass; its fields are the run script's flags.
        run: `run(job)` -> the task's results.
    """

    name: str
    description: str
    model_class: Any
    job_class: Any
    run: Callable
