"""Extracts pre-computed feature vectors from BERT (Google's extract_features).

    python run/extract_features.py --input_file=input.txt --output_file=features.jsonl \
      --vocab_file=vocab.txt --bert_config_file=bert_config.json \
      --init_checkpoint=bert_model.ckpt --layers=-1,-2,-3,-4 --max_seq_length=128

Input: one text per line, ``text_a ||| text_b`` for pairs. Output: Google's
JSON lines (``linex_index``, ``features`` with ``token`` and ``layers`` of
``index`` and ``values``), plus ``pooled_output`` and ``mean_pooled_output``
sentence vectors.
"""

import json
import os
import sys

from absl import app
from absl import flags

from data import tokenization
from modeling import checkpoints
from modeling import bert as config_lib
from modeling.serving import inference
from modeling.bert import BertEncoder

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "One text per line (text_a ||| text_b for pairs).")
flags.DEFINE_string("output_file", None, "JSON lines output.")
flags.DEFINE_string("layers", "-1,-2,-3,-4", "Comma-separated layer indexes.")
flags.DEFINE_string("bert_config_file", None, "bert_config.json (Google) or config.json (HF).")
flags.DEFINE_integer("max_seq_length", 128, "Longer inputs are truncated.")
flags.DEFINE_string("init_checkpoint", None, "Google TF1 checkpoint, own checkpoint or HF safetensors.")
flags.DEFINE_string("vocab_file", None, "The vocabulary file of the model.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models).")
flags.DEFINE_integer("batch_size", 32, "Batch size for predictions.")


def main(_):
    tokenization.validate_case_matches_checkpoint(FLAGS.do_lower_case, FLAGS.init_checkpoint)
    layers = [int(x) for x in FLAGS.layers.split(",")]
    bert_config = config_lib.load_bert_config(FLAGS.bert_config_file)
    for index in layers:
        if not -bert_config.num_hidden_layers <= index < bert_config.num_hidden_layers:
            raise ValueError("--layers has %d but the model has %d layers"
                             % (index, bert_config.num_hidden_layers))
    if FLAGS.max_seq_length > bert_config.max_position_embeddings:
        raise ValueError("--max_seq_length=%d exceeds max_position_embeddings=%d"
                         % (FLAGS.max_seq_length, bert_config.max_position_embeddings))
    tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
    encoder = BertEncoder.from_config_object(bert_config)
    checkpoints.init_from_checkpoint(encoder, FLAGS.init_checkpoint)
    with open(FLAGS.input_file, encoding="utf-8") as f:
        texts = [line.rstrip("\n") for line in f]
    tmp = FLAGS.output_file + ".tmp"
    with open(tmp, "w", encoding="utf-8") as out:
        for record in inference.extract_features(encoder, tokenizer, texts, layers,
                                                 FLAGS.max_seq_length, FLAGS.batch_size):
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    os.replace(tmp, FLAGS.output_file)
    print("Wrote features of %d inputs to %s" % (len(texts), FLAGS.output_file))


def _run(argv):
    try:
        main(argv)
    except (ValueError, FileNotFoundError) as e:
        print("extract_features: error: %s" % e, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    flags.mark_flags_as_required(["input_file", "output_file", "vocab_file",
                                  "bert_config_file", "init_checkpoint"])
    app.run(_run)
