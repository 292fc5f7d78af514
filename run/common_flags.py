"""The command line of every job script, derived from the library's job dataclasses.

A training script defines its flags from its job's fields and builds the job
from them (`modeling.training.options`)::

    common_flags.define_job_flags(ner_job.NerJob)

    def main(_):
        ner_job.run(common_flags.job_from_flags(ner_job.NerJob))

or, when that is all its `main` does, in one line (`job_main`)::

    main = common_flags.job_main(ner_job.NerJob, ner_job.run)

The names, defaults and help texts live once, on the dataclass fields
(`TrainerSettings` holds the trainer's: ``--distribution_strategy``,
``--use_xla``, ``--mixed_precision``, ...), so a flag's default cannot drift
from the library's. The library never reads absl's FLAGS.
"""

from absl import flags

# Not `modeling.training.settings` at import time: it imports TensorFlow, which
# create_pretraining_data.py loads only when something needs it.
from modeling.training import options

FLAGS = flags.FLAGS

__all__ = ["define_job_flags", "define_trainer_flags", "job_from_flags", "job_main",
           "present_flag_values"]


def define_job_flags(job_class, exclude=()):
    """A flag for each field of `job_class` (help, default and kind from the field)."""
    return options.define_flags(job_class, FLAGS, exclude=exclude)


def define_trainer_flags():
    """The trainer's flags alone (`TrainerSettings`): benchmarks/bench_training.py's."""
    from modeling.training import settings  # pylint: disable=g-import-not-at-top
    return define_job_flags(settings.TrainerSettings)


def job_from_flags(job_class, **overrides):
    """A `job_class` dataclass whose fields take the values of the same-named flags.

    An `--init_checkpoint` that names a model folder fills the config,
    vocabulary and family flags left empty (`modeling.pretrained.folders.fill_settings`).
    """
    from modeling.pretrained import folders  # pylint: disable=import-outside-toplevel
    return folders.fill_settings(options.job_from_flags(job_class, FLAGS, **overrides))


def job_main(job_class, run, show=None):
    """Defines `job_class`'s flags; returns a script's `main`, which calls `run` (the job
    module's ``run``) with the job of the flags, prints ``show(result)`` when `show` is
    given (a table of the results), and returns None (absl's exit status 0)."""
    define_job_flags(job_class)

    def main(_):
        result = run(job_from_flags(job_class))
        if show is not None:
            print(show(result))

    return main


def present_flag_values(job_class):
    """{field: value} of the `job_class` fields whose flags were given explicitly."""
    return options.present_values(job_class, FLAGS)


def require(settings, *names):
    """Each named field is set, after a model folder filled what it could (one-line error)."""
    for name in names:
        if not getattr(settings, name):
            raise ValueError("--%s is required (or give --init_checkpoint as a model folder "
                             "holding it)" % name)
