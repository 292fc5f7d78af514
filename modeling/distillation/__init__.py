"""Knowledge distillation: a large teacher (or an ensemble) into a small student.

    losses     soft cross-entropy with a temperature (as a KL, 0 when the student
               matches), ensemble soft targets, cosine, hidden-state and
               attention-map MSE; every loss masks padding
    students   student configs and initialisation from a teacher (DistilBERT's
               every other layer), TinyBERT's layer mapping
    models     teacher + student Keras models for the one trainer:
               ClassifierDistiller (MT-DNN), MaskedLMDistiller (DistilBERT),
               TinyBertDistiller (TinyBERT)
    job        the run (`run/run_distillation.py`), registered as the task
               "distillation"
"""

from modeling.distillation import job  # registers the task  # pylint: disable=unused-import
from modeling.distillation import losses
from modeling.distillation import models
from modeling.distillation import students
from modeling.distillation.students import DistillationError

__all__ = ["DistillationError", "job", "losses", "models", "students"]
