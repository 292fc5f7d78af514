"""Looks inside an encoder: attention maps, per-head statistics, layer-wise probes.

    python run/analyze_attention.py --mode=maps --input_file=sentences.txt \
      --init_checkpoint=$BERT/bert_model.ckpt --bert_config_file=$BERT/bert_config.json \
      --vocab_file=$BERT/vocab.txt --output_dir=/tmp/attention

`--mode` picks the analysis:

* ``maps``: ``attention_map_<N>.png`` per line of `--input_file` (one text a
  line, ``text_a ||| text_b`` for pairs): a grid of heat maps, a row per
  layer and a column per head, tokens on both axes; ``attention_maps.json``.
* ``stats``: per-head statistics over the texts of `--input_file` (entropy,
  share on [CLS] / [SEP] / punctuation / itself / previous / next token,
  mean offset, same-segment share of pairs) and the pattern class of each
  head (diagonal, vertical, block, heterogeneous; `modeling.analysis.attention`
  has the thresholds): ``attention_stats.json``, ``stat_<name>.png``,
  ``pattern.png``.
* ``probe``: `--input_file` is a CoNLL-style tagged file (token first, tag
  last); a linear probe per layer (0 = embeddings) on the frozen features of
  each word's first word piece, trained on the sentences not held out
  (`--probe_dev_fraction`, or `--probe_dev_file`): ``probe_results.json``
  (accuracy per layer and the majority-tag baseline), ``probe_accuracy.png``.

Every picture is also a TensorBoard image in ``--output_dir/tensorboard``.
`--init_checkpoint`: a Google TF1 checkpoint, HF safetensors or this
project's own; `--model_family=bert|albert`. The work is
`modeling.analysis.attention` / `modeling.analysis.probing`.
"""

import json

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

from absl import flags

from modeling import registry
from modeling.analysis import attention
from modeling.analysis import probing

FLAGS = flags.FLAGS
flags.DEFINE_enum("mode", None, ["maps", "stats", "probe"],
                  "maps: heat-map grids per text; stats: per-head statistics and pattern "
                  "classes over a corpus; probe: a linear probe per layer on a tagged file.")
flags.DEFINE_string("input_file", None,
                    "maps/stats: one text per line (text_a ||| text_b for pairs); "
                    "probe: a CoNLL-style tagged file.")
flags.DEFINE_string("output_dir", None, "Where the JSON, PNGs and tensorboard/ go.")
flags.DEFINE_enum("model_family", registry.DEFAULT_FAMILY, attention.attention_families(),
                  "The encoder's family.")
flags.DEFINE_string("bert_config_file", None, "bert_config.json (Google), config.json (HF) "
                    "or albert_config.json.")
flags.DEFINE_string("init_checkpoint", None,
                    "Google TF1 checkpoint, this project's checkpoint or HF safetensors.")
flags.DEFINE_string("vocab_file", None, "The vocabulary file of the model.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models).")
flags.DEFINE_integer("max_seq_length", 128, "Longer inputs are truncated.")
flags.DEFINE_integer("max_texts", None, "Use only the first N texts/sentences of --input_file.")
flags.DEFINE_string("probe_dev_file", None, "probe: held-out tagged file (default: a part of "
                    "--input_file, see --probe_dev_fraction).")
flags.DEFINE_float("probe_dev_fraction", 0.2, "probe: share of sentences held out.")
flags.DEFINE_enum("tag_scheme", "any", list(probing.TAG_SCHEMES),
                  "probe: any (POS and other tags) or bio/bioes (checked).")
flags.DEFINE_integer("tag_column", -1, "probe: the tag's column, 0-based (-1: the last; "
                     "CoNLL-2003's part-of-speech tags: 1).")
flags.DEFINE_integer("probe_epochs", 30, "probe: passes over the training words.")
flags.DEFINE_float("probe_learning_rate", 0.01, "probe: Adam learning rate.")
flags.DEFINE_float("probe_l2", 1e-3, "probe: L2 penalty on the weights.")
flags.DEFINE_integer("seed", 0, "probe: seed of the split and of the probe's batch order.")


def main(_):
    # The inputs are read (and checked) before the model is built.
    if FLAGS.mode == "probe":
        sentences = probing.read_tagged_file(FLAGS.input_file, FLAGS.tag_scheme,
                                             FLAGS.tag_column)[:FLAGS.max_texts]
        if FLAGS.probe_dev_file:
            train = sentences
            dev = probing.read_tagged_file(FLAGS.probe_dev_file, FLAGS.tag_scheme,
                                           FLAGS.tag_column)
        else:
            train, dev = probing.split_sentences(sentences, FLAGS.probe_dev_fraction, FLAGS.seed)
    else:
        texts = attention.read_texts(FLAGS.input_file, FLAGS.max_texts)
    encoder, tokenizer = attention.load_encoder(
        FLAGS.model_family, FLAGS.bert_config_file, FLAGS.init_checkpoint, FLAGS.vocab_file,
        FLAGS.do_lower_case, FLAGS.max_seq_length)
    if FLAGS.mode == "probe":
        results = probing.probe_layers(
            encoder, tokenizer, train, dev, FLAGS.max_seq_length, epochs=FLAGS.probe_epochs,
            learning_rate=FLAGS.probe_learning_rate, l2=FLAGS.probe_l2, seed=FLAGS.seed)
        probing.write_probe_results(results, FLAGS.output_dir)
        print("majority tag %s: %.3f; dev accuracy per layer: %s" % (
            results["majority_tag"], results["majority_baseline_dev_accuracy"],
            " ".join("%d:%.3f" % (r["layer"], r["dev_accuracy"]) for r in results["layers"])))
    elif FLAGS.mode == "maps":
        index = attention.write_maps(encoder, tokenizer, texts, FLAGS.output_dir,
                                     FLAGS.max_seq_length)
        print("Wrote %d attention maps to %s" % (len(index), FLAGS.output_dir))
    else:
        stats = attention.corpus_statistics(encoder, tokenizer, texts, FLAGS.max_seq_length)
        summary = attention.write_statistics(stats, FLAGS.output_dir)
        print("Head patterns over %d texts: %s" % (summary["num_texts"],
                                                    json.dumps(summary["pattern_counts"])))


if __name__ == "__main__":
    script.run(main, required_flags=["mode", "input_file", "output_dir", "vocab_file",
                                     "bert_config_file", "init_checkpoint"])
