"""RoBERTa's input: raw text tokenized in the graph, packed, masked afresh each epoch.

Inputs are plain-text files (one sentence per line, a blank line between
documents); `data.pretraining.dynamic_masking` tokenizes them with the
in-graph WordPiece tokenizer, packs whole sentences into FULL-SENTENCES
windows (the recipe's `packing`: or DOC-SENTENCES, or fixed "blocks" of the
token stream) and draws a new mask every time a window is seen, with the
feature names of the static pipeline.
"""

from data import tokenization
from data.pretraining import dynamic_masking
from modeling import registry
from modeling.recipes.pipelines.base import RawTextPipeline


@registry.pipelines.register("dynamic_masked")
class DynamicMaskedPipeline(RawTextPipeline):
    """Raw text, masked in `tf.data` (see the module docstring)."""

    data_options = ("packing",)

    def vocab_size(self):
        return len(tokenization.load_vocab(self.options.vocab_file))

    def input_fn(self, inputs, is_training, batch_size):
        options = self.options
        return dynamic_masking.roberta_input_fn_builder(
            inputs, options.vocab_file, options.do_lower_case, options.max_seq_length,
            options.max_predictions_per_seq, is_training=is_training,
            batch_size=batch_size, packing=self.data.get("packing", "full_sentences"),
            seed=options.seed, repeat=True)
