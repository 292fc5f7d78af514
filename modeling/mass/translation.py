"""Fine-tuning a pre-trained MASS model as a translator, scored by BLEU: what `run/run_translation.py` runs.

    from modeling.mass import translation
    results = translation.run(translation.TranslationJob(
        output_dir="/tmp/mass_mt", init_checkpoint="/tmp/mass"))   # run_pretraining's output
    results["bleu"], results["copy_source_bleu"]

Data: a parallel file of `source<TAB>target` lines (the bundled
`data/sample/parallel_en_zh.tsv`: English and Chinese), split
deterministically: every `eval_every`-th pair (the 10th, 20th, ...) is held
out, the others are trained on.

The translation is MASS's own task with the whole target sentence as the
fragment (Song et al. 2019 fine-tune the same way): the encoder reads
`[CLS] source [SEP]` with the source's language id, the decoder is fed
`[MASK] y_1 .. y_n` at positions 1 .. n+1 with the target's language id
and predicts `y_1 .. y_n [SEP]`, exactly the features of the "mass"
pipeline. So the model is the pre-training model (`MassNetwork` + a
`MassObjective` named "translation"), trained by the project's one
`Trainer` (checkpoints, resume, TensorBoard in `output_dir`) from
`init_checkpoint` (a MASS pre-training directory or `ckpt-N` prefix; the
network's weights are loaded, the optimizer's are not). `run(job)` is
`TranslationRunner(job).run()`: the common job shape
(`modeling.training.job.JobRunner`) with translation's hooks.

After training, the held-out sources are translated (beam search,
`modeling.mass.decoding`) and scored with corpus BLEU (sacreBLEU through
`modeling.mass.bleu`, its "zh" tokenizer: character-level for Chinese)
against the references, beside the baseline of copying the source
unchanged. Written to `output_dir` (each atomically):

    translation_results.json   BLEU, its parts, the copy baseline, held-out
                               loss/accuracy and their unigram baseline
    translations.tsv           source, reference, hypothesis per held-out pair
"""

import dataclasses
import json
import os
from typing import Optional

import numpy as np
import tensorflow as tf

from data import atomic
from data import tokenization
from data.parallel_text import ParallelFileError
from data.parallel_text import read_pairs
from data.parallel_text import split_pairs
from data.pretraining.baselines import unigram_statistics
from modeling import checkpoints
from modeling.mass import bleu
from modeling.mass import decoding
from modeling.mass.config import load_mass_config
from modeling.mass.network import MassNetwork
from modeling.mass.objective import MassObjective
from modeling.mass.pipeline import special_ids
from modeling.objectives.base import Pretrainer
from modeling.training import distribute
from modeling.training import job as job_lib
from modeling.training.options import option

__all__ = ["ParallelFileError", "TranslationJob", "TranslationRunner", "detokenize",
           "encode_pairs", "read_parallel_file", "run", "split_pairs"]

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAMPLE_PARALLEL_FILE = os.path.join(REPO_ROOT, "data", "sample", "parallel_en_zh.tsv")
SAMPLE_VOCAB_FILE = os.path.join(REPO_ROOT, "data", "sample", "vocab.txt")


@dataclasses.dataclass
class TranslationJob:
    """A translation fine-tune and its BLEU evaluation (see the module docstring)."""

    output_dir: Optional[str] = option(None, "Checkpoints and results of the fine-tune.")
    init_checkpoint: Optional[str] = option(
        None, "The MASS pre-training output directory (or a ckpt-N prefix in it).")
    config_file: Optional[str] = option(
        None, "mass_config.json (default: the one beside --init_checkpoint).")
    parallel_file: str = option(
        SAMPLE_PARALLEL_FILE, "source<TAB>target lines; every --eval_every-th pair is held out.")
    vocab_file: str = option(SAMPLE_VOCAB_FILE, "The WordPiece vocabulary.")
    do_lower_case: bool = option(True, "Lower-case the text.")
    source_language_id: int = option(
        0, "Language id of the sources (the pre-training's: 0 English, 1 Chinese).")
    target_language_id: int = option(1, "Language id of the targets.")
    eval_every: int = option(10, "Hold out every N-th pair.")
    max_seq_length: int = option(
        32, "Longest source (and target) in tokens, [CLS] and [SEP] included.")
    train_batch_size: int = option(32, "Batch size.")
    learning_rate: float = option(1e-3, "Peak learning rate (AdamW).")
    num_train_steps: int = option(1000, "Training steps.")
    num_warmup_steps: int = option(100, "Warm-up steps.")
    save_checkpoints_steps: int = option(1000, "How often to save a checkpoint.")
    log_steps: int = option(100, "How often to log.")
    beam_size: int = option(4, "Beam size (1: greedy).")
    length_penalty: float = option(
        0.6, "GNMT length penalty alpha of the beam search (0: none).")
    max_decode_length: Optional[int] = option(
        None, "Most tokens per translation (default: max_seq_length - 1).")
    bleu_tokenize: str = option("zh", "BLEU tokenization (zh: character level for Chinese).",
                                choices=("zh", "13a", "none"))
    seed: Optional[int] = option(12345, "Random seed.")

    # What `JobRunner` asks of a job besides the fields: one device in float32,
    # and the trainer's and optimizer's defaults but for `log_steps`.
    mixed_precision = None

    def get_strategy(self):
        return distribute.get_strategy("one_device")

    def optimizer_options(self):
        return {}

    def trainer_options(self):
        return {"log_steps": self.log_steps}


def read_parallel_file(path):
    """`[(source, target)]` of a `source<TAB>target` file; blank lines are skipped.

    Raises:
        ParallelFileError: naming the file and line of a line without exactly
            one tab, with an empty side, or not UTF-8.
    """
    pairs = [(source, target) for _, source, target in read_pairs(path)]
    if not pairs:
        raise ParallelFileError("%s: no sentence pairs; expected source<TAB>target lines"
                                % path)
    return pairs


def encode_pairs(pairs, tokenizer, ids, max_seq_length, source_language_id,
                 target_language_id, decoder_length=None):
    """NumPy features of translation pairs (see the module docstring).

    Sources and targets are cut to `max_seq_length - 2` tokens. The decoder
    side is `decoder_length` long (default: the longest target and its
    [SEP]; at most `max_seq_length - 1`), so short targets do not pay for
    the encoder's length at every decoder layer.
    """
    def token_ids(text):
        return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))[:max_seq_length - 2]

    sources = [token_ids(source) for source, _ in pairs]
    targets = [token_ids(target) for _, target in pairs]
    if decoder_length is None:
        decoder_length = max(len(t) for t in targets) + 1
    n, length, dec_len = len(pairs), max_seq_length, min(decoder_length, max_seq_length - 1)
    features = {name: np.zeros([n, length], np.int32)
                for name in ("input_ids", "input_mask", "segment_ids")}
    for name in ("decoder_input_ids", "decoder_position_ids", "decoder_input_mask",
                 "decoder_segment_ids", "decoder_target_ids"):
        features[name] = np.zeros([n, dec_len], np.int32)
    features["decoder_target_weights"] = np.zeros([n, dec_len], np.float32)
    for i, (src, tgt) in enumerate(zip(sources, targets)):
        enc = [ids["cls"]] + src + [ids["sep"]]
        features["input_ids"][i, :len(enc)] = enc
        features["input_mask"][i, :len(enc)] = 1
        features["segment_ids"][i, :len(enc)] = source_language_id
        tgt = tgt[:dec_len - 1]
        k = len(tgt) + 1
        features["decoder_input_ids"][i, :k] = [ids["mask"]] + tgt
        features["decoder_position_ids"][i, :k] = np.arange(1, k + 1)
        features["decoder_input_mask"][i, :k] = 1
        features["decoder_segment_ids"][i, :k] = target_language_id
        features["decoder_target_ids"][i, :k] = tgt + [ids["sep"]]
        features["decoder_target_weights"][i, :k] = 1.0
    return features


def detokenize(tokens):
    """WordPiece tokens -> text: `##` pieces joined, CJK characters without spaces."""
    text = ""
    for token in tokens:
        if token.startswith("##"):
            text += token[2:]
        elif text and not (bleu._is_cjk(token[0]) or bleu._is_cjk(text[-1])):  # pylint: disable=protected-access
            text += " " + token
        else:
            text += token
    return text


def _config(job):
    path = job.config_file
    if not path:
        if not job.init_checkpoint:
            raise ValueError("--config_file is required without --init_checkpoint")
        directory = (job.init_checkpoint if os.path.isdir(job.init_checkpoint)
                     else os.path.dirname(job.init_checkpoint))
        path = os.path.join(directory, "mass_config.json")
        if not os.path.isfile(path):
            raise FileNotFoundError("--init_checkpoint=%s: no mass_config.json beside it; give "
                                    "--config_file" % job.init_checkpoint)
    return load_mass_config(path)


def _dataset(features, batch_size, seed, input_context=None):
    if input_context is not None:
        batch_size = input_context.get_per_replica_batch_size(batch_size)
    d = tf.data.Dataset.from_tensor_slices(features)
    if input_context is not None and input_context.num_input_pipelines > 1:
        d = d.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
    n = len(features["input_ids"])
    return d.shuffle(n, seed=seed).repeat().batch(batch_size, drop_remainder=True)


class TranslationRunner(job_lib.JobRunner):
    """`run`'s steps: the common job shape (`modeling.training.job`) with translation's hooks.

    It always trains (for `num_train_steps`), evaluates (the teacher-forced
    held-out loss beside its unigram baseline) and predicts (the held-out
    translations); `finish` scores them with BLEU and writes the results.
    The parallel file is read and encoded by `check`, so that a bad line is
    refused before anything is written.
    """

    modes = ()
    training = evaluating = predicting = True

    def check(self):
        job = self.job
        if not job.output_dir:
            raise ValueError("--output_dir is required")
        for name in ("parallel_file", "vocab_file"):
            if not os.path.isfile(getattr(job, name)):
                raise FileNotFoundError("--%s=%s: no such file" % (name, getattr(job, name)))
        if job.bleu_tokenize not in bleu.TOKENIZERS:
            raise ValueError("--bleu_tokenize=%s: expected one of %s"
                             % (job.bleu_tokenize, ", ".join(bleu.TOKENIZERS)))
        if job.beam_size < 1:
            raise ValueError("--beam_size=%r: expected at least 1" % (job.beam_size,))
        if job.init_checkpoint:
            checkpoints.resolve_checkpoint(job.init_checkpoint)  # a missing one fails now
        self.config = config = _config(job)
        self.check_max_seq_length(config)
        for name in ("source_language_id", "target_language_id"):
            if not 0 <= getattr(job, name) < config.type_vocab_size:
                raise ValueError("--%s=%d: the model has %d language ids (type_vocab_size)"
                                 % (name, getattr(job, name), config.type_vocab_size))
        pairs = read_parallel_file(job.parallel_file)
        train_pairs, self.eval_pairs = split_pairs(pairs, job.eval_every)
        if not train_pairs or not self.eval_pairs:
            raise ParallelFileError("%s: %d pairs are too few to hold out every %d-th"
                                    % (job.parallel_file, len(pairs), job.eval_every))
        self.tokenizer = tokenization.FullTokenizer(job.vocab_file, job.do_lower_case)
        if len(self.tokenizer.vocab) != config.vocab_size:
            raise ValueError("--vocab_file=%s has %d tokens but the model config's vocab_size "
                             "is %d" % (job.vocab_file, len(self.tokenizer.vocab),
                                        config.vocab_size))
        self.ids = ids = special_ids(job.vocab_file)
        # One decoder length for both parts: the longest target of the file.
        decoder_length = encode_pairs(pairs, self.tokenizer, ids, job.max_seq_length, 0, 0)[
            "decoder_input_ids"].shape[1]
        self.train_features, self.eval_features = (
            encode_pairs(part, self.tokenizer, ids, job.max_seq_length, job.source_language_id,
                         job.target_language_id, decoder_length)
            for part in (train_pairs, self.eval_pairs))

    def prepare(self):
        config_path = os.path.join(self.job.output_dir, "mass_config.json")
        if not os.path.exists(config_path):
            self.config.to_json_file(config_path)
        return len(self.train_features["input_ids"])

    def training_steps(self, num_examples):
        return self.job.num_train_steps, self.job.num_warmup_steps

    def build_model(self):
        network = MassNetwork.from_config_object(self.config)
        return Pretrainer(network, [MassObjective(self.config.vocab_size, name="translation")],
                          name="mass_translator")

    def init_model(self, model):
        self.init_pretrainer(model)

    def train_input_fn(self):
        job = self.job
        return lambda input_context=None: _dataset(
            self.train_features, job.train_batch_size, job.seed, input_context)

    def evaluate(self, trainer):
        """The held-out teacher-forced loss beside its unigram baseline."""
        train_features, eval_features = self.train_features, self.eval_features
        results = trainer.evaluate(
            lambda input_context=None: tf.data.Dataset.from_tensor_slices(eval_features).batch(
                self.job.train_batch_size), max_steps=None)
        targets = lambda f: f["decoder_target_ids"][f["decoder_target_weights"] > 0]  # pylint: disable=g-long-lambda
        stats = unigram_statistics([targets(train_features)], [targets(eval_features)],
                                   num_classes=self.config.vocab_size, what="translation")
        results["unigram_baseline_translation_loss"] = stats.cross_entropy
        results["unigram_baseline_translation_accuracy"] = stats.accuracy
        return results

    def predict(self, trainer):
        """The translations of the held-out sources (beam search)."""
        job, ids, eval_features = self.job, self.ids, self.eval_features
        network = trainer.model.encoder
        max_length = job.max_decode_length or job.max_seq_length - 1
        hypotheses = []
        for start in range(0, len(self.eval_pairs), 64):
            sources = {k: eval_features[k][start:start + 64]
                       for k in ("input_ids", "input_mask", "segment_ids")}
            decoded = decoding.beam_search(
                network, sources, start_id=ids["mask"], eos_id=ids["sep"],
                max_length=max_length, beam_size=job.beam_size,
                length_penalty=job.length_penalty, target_language=job.target_language_id)
            for hypothesis in decoded:
                tokens = [t for t in hypothesis.tokens if t != ids["sep"]]
                hypotheses.append(detokenize(self.tokenizer.convert_ids_to_tokens(tokens)))
        return hypotheses

    def finish(self, trainer, eval_results, predictions):
        """BLEU of the translations and of copying the source; both files written."""
        job, eval_pairs, hypotheses = self.job, self.eval_pairs, predictions
        results = eval_results
        references = [target for _, target in eval_pairs]
        sources_text = [source for source, _ in eval_pairs]
        model_bleu = bleu.corpus_bleu(hypotheses, references, tokenize=job.bleu_tokenize)
        copy_bleu = bleu.corpus_bleu(sources_text, references, tokenize=job.bleu_tokenize)
        results.update({
            "bleu": model_bleu.score,
            "bleu_precisions": model_bleu.precisions,
            "bleu_bp": model_bleu.bp,
            "bleu_signature": "sacreBLEU %s, beam %d, length penalty %g"
                              % (model_bleu.signature, job.beam_size, job.length_penalty),
            "copy_source_bleu": copy_bleu.score,
            "num_train_pairs": int(len(self.train_features["input_ids"])),
            "num_eval_pairs": len(eval_pairs),
        })
        atomic.write_text(os.path.join(job.output_dir, "translation_results.json"),
                          json.dumps(results, indent=2, sort_keys=True) + "\n")
        atomic.write_text(os.path.join(job.output_dir, "translations.tsv"), "".join(
            "%s\t%s\t%s\n" % row for row in zip(sources_text, references, hypotheses)))
        print("***** Translation results (%d held-out pairs) *****" % len(eval_pairs))
        print("  %s" % model_bleu)
        print("  copy-the-source baseline: BLEU = %.2f" % copy_bleu.score)
        print("  held-out translation_loss = %.4f vs unigram baseline %.4f"
              % (results["translation_loss"], results["unigram_baseline_translation_loss"]))
        return results


def run(job):
    """Fine-tunes, translates the held-out pairs, scores them; returns the results dict."""
    return TranslationRunner(job).run()
