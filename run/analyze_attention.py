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
`modeling.analysis.attention` / `modeling.analysis.probing`; the flags are the
fields of `modeling.analysis.attention.AttentionAnalysisSettings`.
"""

import json

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import common_flags
from modeling.analysis import attention
from modeling.analysis import probing

common_flags.define_job_flags(attention.AttentionAnalysisSettings)


def main(_):
    settings = common_flags.job_from_flags(attention.AttentionAnalysisSettings)
    common_flags.require(settings, "vocab_file", "bert_config_file")
    # The inputs are read (and checked) before the model is built.
    if settings.mode == "probe":
        sentences = probing.read_tagged_file(settings.input_file, settings.tag_scheme,
                                             settings.tag_column)[:settings.max_texts]
        if settings.probe_dev_file:
            train = sentences
            dev = probing.read_tagged_file(settings.probe_dev_file, settings.tag_scheme,
                                           settings.tag_column)
        else:
            train, dev = probing.split_sentences(sentences, settings.probe_dev_fraction,
                                                 settings.seed)
    else:
        texts = attention.read_texts(settings.input_file, settings.max_texts)
    encoder, tokenizer = attention.load_encoder(
        settings.model_family, settings.bert_config_file, settings.init_checkpoint,
        settings.vocab_file, settings.do_lower_case, settings.max_seq_length)
    if settings.mode == "probe":
        results = probing.probe_layers(
            encoder, tokenizer, train, dev, settings.max_seq_length,
            epochs=settings.probe_epochs, learning_rate=settings.probe_learning_rate,
            l2=settings.probe_l2, seed=settings.seed)
        probing.write_probe_results(results, settings.output_dir)
        print("majority tag %s: %.3f; dev accuracy per layer: %s" % (
            results["majority_tag"], results["majority_baseline_dev_accuracy"],
            " ".join("%d:%.3f" % (r["layer"], r["dev_accuracy"]) for r in results["layers"])))
    elif settings.mode == "maps":
        index = attention.write_maps(encoder, tokenizer, texts, settings.output_dir,
                                     settings.max_seq_length)
        print("Wrote %d attention maps to %s" % (len(index), settings.output_dir))
    else:
        stats = attention.corpus_statistics(encoder, tokenizer, texts, settings.max_seq_length)
        summary = attention.write_statistics(stats, settings.output_dir)
        print("Head patterns over %d texts: %s" % (summary["num_texts"],
                                                    json.dumps(summary["pattern_counts"])))


if __name__ == "__main__":
    script.run(main, required_flags=["mode", "input_file", "output_dir", "init_checkpoint"])
