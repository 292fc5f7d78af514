"""GPT-2's input: raw text, byte-level BPE in the graph, packed into windows ("causal_lm").

Inputs are plain-text files in the corpus format (one sentence per line, a
blank line between documents), read as they are: tokenizing and packing
happen in `tf.data` (`data.pretraining.causal_packing`), so the demo job has
nothing to build. The vocabulary is GPT-2's pair of files, `vocab_file`
(`vocab.json`) and `merges_file` (`merges.txt`); the bundled corpus has its
own, learned by `run/create_vocab.py --vocab_type=byte_bpe`.

Training batches are shuffled windows (repeated); evaluation and baseline
batches read every window once, in file order, so the trainer's evaluation
and the unigram baseline score the same tokens.
"""

from data.pretraining import causal_packing
from data.tokenizers import byte_bpe
from modeling import registry
from modeling.recipes.pipelines.base import RawTextPipeline


@registry.pipelines.register("causal_lm")
class CausalLMPipeline(RawTextPipeline):
    """Raw text -> byte-level BPE windows (see the module docstring)."""

    data_options = ()

    demo_vocab_files = {"vocab_file": "data/sample/gpt2/vocab.json",
                        "merges_file": "data/sample/gpt2/merges.txt"}

    def _files(self):
        options = self.options
        if not options.vocab_file or not options.merges_file:
            raise byte_bpe.ByteBPEError(
                "the causal_lm pipeline needs --vocab_file (vocab.json) and --merges_file "
                "(merges.txt)")
        return options.vocab_file, options.merges_file

    def vocab_size(self):
        return len(byte_bpe.load_vocab(self._files()[0]))

    def input_fn(self, inputs, is_training, batch_size):
        vocab_file, merges_file = self._files()
        kwargs = {"seed": self.options.seed} if is_training else {}
        return causal_packing.causal_lm_input_fn_builder(
            inputs, vocab_file, merges_file, self.options.max_seq_length,
            is_training=is_training, batch_size=batch_size, **kwargs)
