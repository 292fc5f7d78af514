"""CVT (Clark et al. 2018, "Semi-Supervised Sequence Modeling with Cross-View Training").

A BiLSTM sequence tagger trained on labelled sentences as usual and on
unlabelled sentences by cross-view training: auxiliary prediction modules
that see restricted views of the first BiLSTM layer (forward-only,
backward-only, future, past) learn to match the primary module's
predictions, which are held fixed.

    model      `CvtTagger` (`modeling.cvt.model`)
    data       `modeling.cvt.data`: word ids (ELMo's word vocabulary), TFRecords,
               the demo's generated sentences
    task       "cvt" (`modeling.cvt.job`: `CvtJob`, `run`; `run/run_cvt.py`)
"""

from modeling.cvt import job  # registers the task "cvt"  # noqa: F401
from modeling.cvt.job import CvtJob
from modeling.cvt.model import AUXILIARY_VIEWS
from modeling.cvt.model import CvtTagger
from modeling.cvt.model import PredictionModule

__all__ = ["AUXILIARY_VIEWS", "CvtJob", "CvtTagger", "PredictionModule", "job"]
