"""Extracts pre-computed feature vectors from BERT (Google's extract_features).

    python run/extract_features.py --input_file=input.txt --output_file=features.jsonl \
      --vocab_file=vocab.txt --bert_config_file=bert_config.json \
      --init_checkpoint=bert_model.ckpt --layers=-1,-2,-3,-4 --max_seq_length=128

Input: one text per line, ``text_a ||| text_b`` for pairs. Output: Google's
JSON lines (``linex_index``, ``features`` with ``token`` and ``layers`` of
``index`` and ``values``), plus ``pooled_output`` and ``mean_pooled_output``
sentence vectors. `--model_family=albert` reads an ALBERT encoder the same way
(`--bert_config_file` its albert_config.json).

`--model_family=elmo` extracts a pre-trained ELMo biLM's word vectors
instead (`--bert_config_file` its elmo_options.json, `--vocab_file` its word
vocabulary, `--init_checkpoint` run_pretraining's output): layers are 0 (the
character-CNN token layer) to 2 (the top biLSTM layer), all by default, plus
each word's equal-weight mix `elmo_average` (`modeling.elmo.features`).
"""

import json

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

from absl import flags

from data import atomic
from data import tokenization
from modeling import registry

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "One text per line (text_a ||| text_b for pairs).")
flags.DEFINE_string("output_file", None, "JSON lines output.")
flags.DEFINE_string("layers", None, "Comma-separated layer indexes (default: -1,-2,-3,-4; "
                    "for --model_family=elmo every layer, 0 = token layer).")
flags.DEFINE_enum("model_family", registry.DEFAULT_FAMILY,
                  registry.default_first(registry.families_with("feature_extractor")),
                  "bert: a BERT encoder's WordPiece vectors (albert: an ALBERT encoder's); "
                  "elmo: an ELMo biLM's word vectors.")
flags.DEFINE_string("bert_config_file", None, "bert_config.json (Google) or config.json (HF).")
flags.DEFINE_integer("max_seq_length", 128, "Longer inputs are truncated.")
flags.DEFINE_string("init_checkpoint", None, "Google TF1 checkpoint, own checkpoint or HF safetensors.")
flags.DEFINE_string("vocab_file", None, "The vocabulary file of the model.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models).")
flags.DEFINE_integer("batch_size", 32, "Batch size for predictions.")
flags.DEFINE_enum("precision", "fp32", ["fp32", "bf16"],
                  "bf16: compute in bfloat16 (float32 weights; faster on CPUs with "
                  "AVX512-BF16 or AMX, and on GPUs/TPUs).")


def main(_):
    tokenization.validate_case_matches_checkpoint(FLAGS.do_lower_case, FLAGS.init_checkpoint)
    atomic.check_outputs([("--output_file", FLAGS.output_file)],
                         [("--input_file", FLAGS.input_file), ("--vocab_file", FLAGS.vocab_file),
                          ("--bert_config_file", FLAGS.bert_config_file)])
    try:
        layers = None if FLAGS.layers is None else [int(x) for x in FLAGS.layers.split(",")]
    except ValueError:
        raise ValueError("--layers=%s: expected comma-separated integers such as -1,-2"
                         % FLAGS.layers) from None
    extract = registry.families.get(FLAGS.model_family).feature_extractor
    texts, records, what = extract(FLAGS, layers)
    with atomic.atomic_output(FLAGS.output_file) as out:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    print("Wrote %s of %d inputs to %s" % (what, len(texts), FLAGS.output_file))


if __name__ == "__main__":
    script.run(main, required_flags=["input_file", "output_file", "vocab_file",
                                     "bert_config_file", "init_checkpoint"])
