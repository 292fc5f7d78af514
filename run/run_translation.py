"""Fine-tunes a pre-trained MASS model as a translator and reports BLEU on held-out pairs.

    python run/run_pretraining.py --recipe=mass --output_dir=/tmp/mass
    python run/run_translation.py --init_checkpoint=/tmp/mass --output_dir=/tmp/mass_mt

With the defaults it fine-tunes on the bundled English-Chinese pairs
(`data/sample/parallel_en_zh.tsv`, every tenth pair held out), translates
the held-out English sentences with beam search and prints their corpus
BLEU (sacrebleu-style, character level for Chinese) beside the baseline of
copying the source. `--output_dir` gets the checkpoints, TensorBoard logs,
`translation_results.json` and `translations.tsv`. The work is
`modeling.mass.translation`.
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

from absl import flags

from modeling.mass import translation

FLAGS = flags.FLAGS

_DEFAULTS = translation.TranslationJob()

flags.DEFINE_string("output_dir", None, "Checkpoints and results of the fine-tune.")
flags.DEFINE_string("init_checkpoint", None,
                    "The MASS pre-training output directory (or a ckpt-N prefix in it).")
flags.DEFINE_string("config_file", None,
                    "mass_config.json (default: the one beside --init_checkpoint).")
flags.DEFINE_string("parallel_file", _DEFAULTS.parallel_file,
                    "source<TAB>target lines; every --eval_every-th pair is held out.")
flags.DEFINE_string("vocab_file", _DEFAULTS.vocab_file, "The WordPiece vocabulary.")
flags.DEFINE_bool("do_lower_case", _DEFAULTS.do_lower_case, "Lower-case the text.")
flags.DEFINE_integer("source_language_id", _DEFAULTS.source_language_id,
                     "Language id of the sources (the pre-training's: 0 English, 1 Chinese).")
flags.DEFINE_integer("target_language_id", _DEFAULTS.target_language_id,
                     "Language id of the targets.")
flags.DEFINE_integer("eval_every", _DEFAULTS.eval_every, "Hold out every N-th pair.")
flags.DEFINE_integer("max_seq_length", _DEFAULTS.max_seq_length,
                     "Longest source (and target) in tokens, [CLS] and [SEP] included.")
flags.DEFINE_integer("train_batch_size", _DEFAULTS.train_batch_size, "Batch size.")
flags.DEFINE_float("learning_rate", _DEFAULTS.learning_rate, "Peak learning rate (AdamW).")
flags.DEFINE_integer("num_train_steps", _DEFAULTS.num_train_steps, "Training steps.")
flags.DEFINE_integer("num_warmup_steps", _DEFAULTS.num_warmup_steps, "Warm-up steps.")
flags.DEFINE_integer("save_checkpoints_steps", _DEFAULTS.save_checkpoints_steps,
                     "How often to save a checkpoint.")
flags.DEFINE_integer("log_steps", _DEFAULTS.log_steps, "How often to log.")
flags.DEFINE_integer("beam_size", _DEFAULTS.beam_size, "Beam size (1: greedy).")
flags.DEFINE_float("length_penalty", _DEFAULTS.length_penalty,
                   "GNMT length penalty alpha of the beam search (0: none).")
flags.DEFINE_integer("max_decode_length", None,
                     "Most tokens per translation (default: max_seq_length - 1).")
flags.DEFINE_enum("bleu_tokenize", _DEFAULTS.bleu_tokenize, ["zh", "13a", "none"],
                  "BLEU tokenization (zh: character level for Chinese).")
flags.DEFINE_integer("seed", _DEFAULTS.seed, "Random seed.")


def main(_):
    job = translation.TranslationJob(**{
        field: FLAGS[field].value for field in (
            "output_dir", "init_checkpoint", "config_file", "parallel_file", "vocab_file",
            "do_lower_case", "source_language_id", "target_language_id", "eval_every",
            "max_seq_length", "train_batch_size", "learning_rate", "num_train_steps",
            "num_warmup_steps", "save_checkpoints_steps", "log_steps", "beam_size",
            "length_penalty", "max_decode_length", "bleu_tokenize", "seed")})
    translation.run(job)


if __name__ == "__main__":
    script.run(main, required_flags=["output_dir"])
