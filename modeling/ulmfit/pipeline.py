"""ULMFiT's language-model input ("ulmfit"): the corpus as continuous BPTT streams.

AWD-LSTM (Merity et al. 2017) and ULMFiT (Howard & Ruder 2018) train the
language model by truncated backpropagation through time over one long text:
the corpus is cut into `batch_size` contiguous streams (the authors'
`batchify`), batch t + 1 of row i is the text right after batch t of row i,
and the LSTM's hidden state is carried from batch to batch
(`modeling.ulmfit.network`: the rows' `state_reset`).

Text (recipe data `layout`):

* "stream" (the default): each document is `<S>`, then every sentence's
  words (`data.word_vocab`: `BasicTokenizer`, CJK characters one by one)
  each followed by `</S>`, so a one-sentence document is the
  `<S> w_1 .. w_n </S>` that run_classifier's word input format gives the
  fine-tuned model. A pass is the documents one after the other (training:
  in a seeded shuffled order, each pass its own, as fastai's LM loader;
  evaluation: as read), `N` words; stream s is words `[s * n, (s + 1) * n)`
  with `n = N // streams` (the last `N mod streams` words are left out, as
  in `batchify`). Position t of a row reads stream word `i + t` and predicts
  word `i + t + 1` (`target_ids`); a step moves every stream on by the
  step's length, and a pass ends when the streams are spent (its last step
  shorter). The corpus is held in memory as int32 ids (4 bytes a word).
* "sentences": one sentence per example, `<S> w_1 .. w_n </S>`, cut to
  `--max_seq_length` words: the "elmo" pipeline's examples, shuffled, no
  state carried (the earlier form of this recipe).

Sequence lengths (the stream layout), AWD-LSTM's variable-length BPTT:
`bptt` is `--max_seq_length`; each training step draws its length as the
authors do (`bptt` with probability 0.95, else `bptt / 2`, then
`max(5, int(N(that, 5)))`), the same for every stream of the step. TPUs and
XLA want static shapes, so training rows are padded to `bptt + 15` (three
standard deviations; the 0.1% of draws above that are cut to it) with
`input_mask` 0 on the padding; the padded positions are neither scored nor
carried (the LSTMs run masked). `variable_bptt: false` trains on fixed
`bptt` rows. Evaluation (and the baselines) always reads fixed `bptt`
rows, each stream once, in order, as the authors evaluate.

Under a `tf.distribute` strategy each input pipeline reads every k-th
document (`input_pipeline_id` of k) and makes `per-replica batch x replicas
it feeds` streams; a step's rows go out stream by stream in batches of the
per-replica size, so replica r of the pipeline gets streams
`[r * per_replica, (r + 1) * per_replica)` at every step and carries their
states itself (each replica its own streams, as the "xlnet" pipeline does).
The tf.data service (which deals batches to whichever worker asks), TPUs and
`--use_xla` (the states' variables change shape) are refused for the stream
layout (`check_job`).

Features of the stream layout (int32): `input_ids`, `target_ids`,
`input_mask` (1 real) `[batch, width]`; `state_reset` `[batch]`, 1 on every
row of a pass's first step.
"""

import numpy as np
import tensorflow as tf

from data import corpus as corpus_lib
from data import input_pipeline
from data import word_vocab as vocab_lib
from modeling import registry
from modeling.elmo.pipeline import ElmoPipeline

__all__ = ["LAYOUTS", "MIN_LENGTH", "SIGMA", "UlmfitPipeline", "bptt_length", "bptt_steps",
           "document_ids", "split_streams", "stream_width"]

LAYOUTS = ("stream", "sentences")
MIN_LENGTH = 5   # AWD-LSTM: seq_len = max(5, int(N(bptt, 5)))
SIGMA = 5
# Training rows are padded to bptt + _WIDTH_SIGMAS * SIGMA words.
_WIDTH_SIGMAS = 3


def document_ids(sentences, vocab):
    """A document's stream words: `<S>`, then each sentence's word ids and `</S>` (int32)."""
    bos, eos = vocab.ids([vocab_lib.BOS, vocab_lib.EOS])
    ids = [bos]
    for words in sentences:
        ids.extend(vocab.ids(words))
        ids.append(eos)
    return np.asarray(ids, np.int32)


def split_streams(tokens, num_streams):
    """`[num_streams, n]`: the text cut into contiguous streams (AWD-LSTM's `batchify`).

    Stream s is `tokens[s * n:(s + 1) * n]`, `n = len(tokens) // num_streams`.
    """
    tokens = np.asarray(tokens, np.int32)
    n = len(tokens) // num_streams
    return tokens[:n * num_streams].reshape(num_streams, n)


def bptt_length(rng, bptt):
    """One training step's length, AWD-LSTM's draw (uncapped; `bptt_steps` caps it)."""
    base = bptt if rng.random() < 0.95 else bptt / 2.0
    return max(MIN_LENGTH, int(rng.normal(base, SIGMA)))


def stream_width(bptt, variable):
    """Words of a training row: `bptt`, plus three standard deviations when lengths vary."""
    return bptt + _WIDTH_SIGMAS * SIGMA if variable else bptt


def bptt_steps(streams, lengths, width):
    """Yields each step of a pass over `streams` (`[S, n]`) as NumPy arrays.

    Args:
        streams: `[S, n]` word ids (`split_streams`).
        lengths: iterator of the wanted step lengths (each cut to `width` and
            to what the streams have left).
        width: words per row (the padded shape).

    Yields:
        `(input_ids, target_ids, input_mask, state_reset)`: `[S, width]` x 3
        int32 and `[S]`; position t reads word `i + t`, predicts `i + t + 1`.
    """
    num_streams, n = streams.shape
    i = 0
    first = True
    while i < n - 1:
        length = min(next(lengths), width, n - 1 - i)
        inputs = np.zeros([num_streams, width], np.int32)
        targets = np.zeros([num_streams, width], np.int32)
        mask = np.zeros([num_streams, width], np.int32)
        inputs[:, :length] = streams[:, i:i + length]
        targets[:, :length] = streams[:, i + 1:i + 1 + length]
        mask[:, :length] = 1
        yield inputs, targets, mask, np.full([num_streams], int(first), np.int32)
        first = False
        i += length


@registry.pipelines.register("ulmfit")
class UlmfitPipeline(ElmoPipeline):
    """Raw text -> BPTT streams of word ids, or one sentence per example (module docstring).

    Recipe `data` options: `layout` ("stream" or "sentences"), `variable_bptt`
    (true: AWD-LSTM's length draws; false: fixed `--max_seq_length` rows).
    """

    data_options = ("layout", "variable_bptt")

    def __init__(self, recipe_data, options):
        super().__init__({}, options)
        self.data = dict(recipe_data or {})
        self.layout = self.data.get("layout", "stream")
        if self.layout not in LAYOUTS:
            raise ValueError("ulmfit recipe data: layout must be one of %s, got %r"
                             % (", ".join(LAYOUTS), self.layout))
        self.variable_bptt = self.data.get("variable_bptt", True)
        if not isinstance(self.variable_bptt, bool):
            raise ValueError("ulmfit recipe data: variable_bptt must be true or false, got %r"
                             % (self.variable_bptt,))
        if options.max_seq_length < 2:
            raise ValueError("--max_seq_length must be at least 2 (the BPTT length), got %d"
                             % options.max_seq_length)

    def check_job(self, job):
        """The stream layout's batches must reach each replica in order (module docstring)."""
        if self.layout != "stream":
            return
        if getattr(job, "data_service_address", None):
            raise ValueError(
                "--data_service_address: the ulmfit stream layout carries each row's LSTM "
                "state to the next batch, which the tf.data service (batches dealt to any "
                "worker) would break; leave it out, or use the recipe data layout "
                "\"sentences\"")
        strategy = getattr(job, "strategy_name", None)
        if strategy == "tpu":
            raise ValueError(
                "--distribution_strategy=tpu: the ulmfit stream layout keeps the LSTM states "
                "in variables of dynamic shape, not supported on TPUs; use one_device, "
                "mirrored or multi_worker_mirrored, or the recipe data layout \"sentences\"")
        if getattr(job, "use_xla", False):
            raise ValueError(
                "--use_xla: the ulmfit stream layout keeps the LSTM states in variables of "
                "dynamic shape, which XLA cannot assign; leave it out, or use the recipe data "
                "layout \"sentences\"")

    def _pass_tokens(self, documents, rng):
        """One pass's words: the documents in `rng`'s order (None: as read)."""
        order = np.arange(len(documents)) if rng is None else rng.permutation(len(documents))
        if not len(order):
            return np.zeros([0], np.int32)
        return np.concatenate([documents[j] for j in order])

    def input_fn(self, inputs, is_training, batch_size):
        if self.layout == "sentences":
            return super().input_fn(inputs, is_training, batch_size)
        files = corpus_lib.expand_file_patterns(inputs)
        vocab = self.vocabulary()
        bptt = self.options.max_seq_length
        variable = is_training and self.variable_bptt
        width = stream_width(bptt, variable) if is_training else bptt
        seed = self.options.seed if self.options.seed is not None else 0
        pipeline = self

        def input_fn(input_context=None):
            per_replica, replicas_here, shard, num_shards = batch_size, 1, 0, 1
            if input_context is not None:
                per_replica = input_context.get_per_replica_batch_size(batch_size)
                replicas_here = max(1, input_context.num_replicas_in_sync
                                    // input_context.num_input_pipelines)
                shard = input_context.input_pipeline_id
                num_shards = input_context.num_input_pipelines
            num_streams = per_replica * replicas_here

            def generate():
                documents = [document_ids(sentences, vocab) for j, sentences
                             in enumerate(pipeline._documents(files)) if j % num_shards == shard]
                total = sum(len(d) for d in documents)
                if total // num_streams < 2:
                    raise corpus_lib.CorpusError(
                        "%s: %d words for %d BPTT streams; expected at least %d (2 a stream: "
                        "lower the batch size)" % (",".join(files), total, num_streams,
                                                   2 * num_streams))
                pass_index = 0
                while True:
                    rng = np.random.default_rng([seed, shard, pass_index])
                    tokens = pipeline._pass_tokens(documents, rng if is_training else None)
                    if variable:
                        lengths = iter(lambda: bptt_length(rng, bptt), None)
                    else:
                        lengths = iter(lambda: bptt, None)
                    for ids, targets, mask, reset in bptt_steps(
                            split_streams(tokens, num_streams), lengths, width):
                        for s in range(num_streams):
                            yield {"input_ids": ids[s], "target_ids": targets[s],
                                   "input_mask": mask[s], "state_reset": reset[s]}
                    if not is_training:
                        return
                    pass_index += 1

            signature = {
                "input_ids": tf.TensorSpec([width], tf.int32),
                "target_ids": tf.TensorSpec([width], tf.int32),
                "input_mask": tf.TensorSpec([width], tf.int32),
                "state_reset": tf.TensorSpec([], tf.int32),
            }
            return input_pipeline.stream_dataset(generate, signature, per_replica)

        return input_fn
