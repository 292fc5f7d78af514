"""Google's pre-training TFRecords: instances masked once, `dupe_factor` times.

Inputs are TFRecord patterns written by `run/create_pretraining_data.py`
(feature names `input_ids`, `input_mask`, `segment_ids`,
`masked_lm_positions`, `masked_lm_ids`, `masked_lm_weights`,
`next_sentence_labels`). The recipe's `data` holds the options of
`create_pretraining_data.py` that the demo job uses to make them (masking
strategy, sentence objective, Chinese word segmentation, `short_seq_prob`:
Google's 0.1 unless the recipe says otherwise, SpanBERT's 0).
"""

import os

from absl import logging

from data import input_pipeline
from data import corpus
from data import tfrecord_check
from data import tokenization
from data.pretraining import instances
from data.pretraining import writer
from modeling import registry
from modeling.recipes.pipelines.base import Pipeline


@registry.pipelines.register("static_masked")
class StaticMaskedPipeline(Pipeline):
    """TFRecords of statically masked instances (see the module docstring)."""

    # The TFRecords hold ids already: a vocabulary is only read for the demo.
    required_vocab_files = ()
    # `create_pretraining_data.py`'s recipe options (`InstanceOptions`).
    data_options = ("do_whole_word_mask", "masking", "sentence_objective",
                    "chinese_word_segmentation", "span_geometric_p", "max_span_length",
                    "max_ngram", "replace_per_unit", "short_seq_prob")

    # The demo job's data: ten differently masked copies of the training
    # text (Google's dupe_factor), five of the held-out text (more masked
    # positions to score; the text itself is never trained on).
    demo_dupe_factor = {"train": 10, "eval": 5}
    demo_seeds = {"train": 12345, "eval": 54321}

    def vocab_size(self):
        return len(tokenization.load_vocab(self.options.vocab_file))

    def demo_inputs(self, train_texts, eval_texts, work_dir):
        options = self.options
        tag = "seq%d_pred%d" % (options.max_seq_length, options.max_predictions_per_seq)
        tag += "".join("_%s-%s" % (k, v) for k, v in sorted(self.data.items()))
        data = dict(self.data)
        short_seq_prob = data.pop("short_seq_prob", 0.1)
        outputs = []
        for split, texts in (("train", train_texts), ("eval", eval_texts)):
            path = os.path.join(work_dir, "sample_%s_%s.tfrecord" % (split, tag))
            if not os.path.exists(path):
                instance_options = instances.InstanceOptions(
                    vocab_file=options.vocab_file, do_lower_case=options.do_lower_case,
                    max_seq_length=options.max_seq_length,
                    max_predictions_per_seq=options.max_predictions_per_seq,
                    random_seed=self.demo_seeds[split],
                    dupe_factor=self.demo_dupe_factor[split], masked_lm_prob=0.15,
                    short_seq_prob=short_seq_prob, do_whole_word_mask=False, **data)
                summary = writer.create_pretraining_data(list(texts), [path], instance_options)
                logging.info("Built %s: %d instances", path, summary.instances)
            outputs.append(path)
        return outputs[0], outputs[1]

    # The flag that sets each feature's length, for messages.
    _LENGTH_FLAGS = {
        "input_ids": "--max_seq_length", "input_mask": "--max_seq_length",
        "segment_ids": "--max_seq_length",
        "masked_lm_positions": "--max_predictions_per_seq",
        "masked_lm_ids": "--max_predictions_per_seq",
        "masked_lm_weights": "--max_predictions_per_seq",
    }

    def expected_features(self):
        """What each record must hold (`tfrecord_check`): the features, lengths
        and kinds that `input_fn` parses with this run's flags."""
        spec = input_pipeline.pretraining_feature_spec(
            self.options.max_seq_length, self.options.max_predictions_per_seq)
        return {name: (int(feature.shape[0]), self._LENGTH_FLAGS.get(name),
                       "float" if feature.dtype.is_floating else "int64")
                for name, feature in spec.items()}

    def check_inputs(self, inputs):
        """The patterns match files, and every file is a whole TFRecord file
        whose first example has the features and lengths of this run's
        `--max_seq_length` / `--max_predictions_per_seq` (one line naming the
        file otherwise; all files empty is an error)."""
        corpus.expand_file_patterns(inputs)
        self.check_vocab_files()
        tfrecord_check.verify_tfrecord_files(inputs, self.expected_features())

    def input_fn(self, inputs, is_training, batch_size):
        options = self.options
        kwargs = {"seed": options.seed} if is_training else {"repeat": True}
        return input_pipeline.pretraining_input_fn_builder(
            inputs, options.max_seq_length, options.max_predictions_per_seq,
            is_training=is_training, batch_size=batch_size, **kwargs)
