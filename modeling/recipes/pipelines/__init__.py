"""Pre-training input pipelines, one module each, registered by name.

    base.py            `Pipeline` (the contract), `PipelineOptions`,
                       `RawTextPipeline` (the base of those reading raw text)
                       and `WordPipeline` (of those with a word vocabulary)
    static_masked.py   "static_masked": Google's TFRecords of masked-LM
                       instances (`create_pretraining_data.py`)
    dynamic_masked.py  "dynamic_masked": raw text tokenized, packed and
                       masked afresh in `tf.data` (RoBERTa)
"""

from modeling.recipes.pipelines.base import Pipeline
from modeling.recipes.pipelines.base import PipelineOptions
from modeling.recipes.pipelines.base import RawTextPipeline
from modeling.recipes.pipelines.base import WordPipeline

__all__ = ["Pipeline", "PipelineOptions", "RawTextPipeline", "WordPipeline"]
