"""Fine-tuning data: DataProcessors, feature conversion and TFRecords.

google-research/bert's `run_classifier.py` API and semantics, as a library,
one module per concern:

    base       InputExample, InputFeatures, DataProcessor (and SplitProcessor,
               one reader for the three splits), the task types,
               DataError/ProcessorError and the readers whose rows know
               their file and line
    glue       Google's GLUE/XNLI processors (cola, mnli, mrpc, xnli, sst2,
               qqp, stsb)
    generic    GenericProcessor: any tsv/csv/jsonl, configured by arguments
    ids        IdsProcessor: inputs that already are token ids
    choice     MultipleChoiceProcessor: a context and N candidates (JSON lines),
               ARCT and SWAG in their own layouts, and their TFRecords
    transformations  GPT's input transformations (start/delimiter/extract
               tokens; one sequence per text, order or candidate) and their
               TFRecords
    loading    processors by name, and from the user's own file
               (``path/to/my_task.py:MyProcessor``)
    features   examples -> features -> TFRecords -> tf.data (Google's
               convert_single_example, file_based_* functions)

Everything is re-exported here, so ``from data import processors`` and
``processors.MrpcProcessor``, ``processors.DataProcessor`` (which user
processor files subclass), ``processors.convert_single_example`` ... work as
they did when this was one module. Packing (``[CLS] a [SEP] b [SEP]``) lives
in `data.packing`.
"""

from data.processors.base import (CLASSIFICATION, MULTI_LABEL, REGRESSION, TASK_TYPES,
                                  DataError, DataProcessor, IdsInputExample, InputExample,
                                  InputFeatures, PaddingInputExample, ProcessorError, Record,
                                  Row, SplitProcessor)
from data.processors.features import (classifier_feature_spec, convert_examples_to_features,
                                      convert_single_example,
                                      file_based_convert_examples_to_features,
                                      file_based_input_fn_builder, infer_task_type,
                                      pad_examples)
# Google's module-private name, which code written against its module calls.
from data.processors.features import _truncate_seq_pair  # noqa: F401
from data.processors.choice import (ArctProcessor, ChoiceExample, MultipleChoiceProcessor,
                                    SwagProcessor, convert_choice_example,
                                    file_based_convert_choice_examples)
from data.processors.generic import GenericColumns, GenericProcessor
from data.processors.glue import (ColaProcessor, GlueTsvProcessor, MnliMismatchedProcessor,
                                  MnliProcessor, MrpcProcessor, QqpProcessor, Sst2Processor,
                                  StsbProcessor, XnliProcessor)
from data.processors.ids import IdsProcessor
from data.processors.loading import (PROCESSORS, get_processor_class, load_processor_class,
                                     register_processor)

__all__ = [
    "CLASSIFICATION", "MULTI_LABEL", "REGRESSION", "TASK_TYPES",
    "DataError", "ProcessorError", "Row", "Record",
    "InputExample", "IdsInputExample", "PaddingInputExample", "InputFeatures",
    "DataProcessor", "SplitProcessor", "GlueTsvProcessor", "XnliProcessor", "MnliProcessor",
    "MnliMismatchedProcessor", "MrpcProcessor", "ColaProcessor", "Sst2Processor",
    "QqpProcessor", "StsbProcessor", "GenericColumns", "GenericProcessor", "IdsProcessor",
    "ChoiceExample", "MultipleChoiceProcessor", "ArctProcessor", "SwagProcessor",
    "convert_choice_example", "file_based_convert_choice_examples",
    "PROCESSORS", "register_processor", "load_processor_class", "get_processor_class",
    "convert_single_example", "convert_examples_to_features",
    "file_based_convert_examples_to_features", "file_based_input_fn_builder",
    "classifier_feature_spec", "infer_task_type", "pad_examples",
]
