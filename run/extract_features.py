"""Extracts pre-computed feature vectors from BERT (Google's extract_features).

    python run/extract_features.py --input_file=input.txt --output_file=features.jsonl \
      --vocab_file=vocab.txt --bert_config_file=bert_config.json \
      --init_checkpoint=bert_model.ckpt --layers=-1,-2,-3,-4 --max_seq_length=128

Input: one text per line, ``text_a ||| text_b`` for pairs. Output: Google's
JSON lines (``linex_index``, ``features`` with ``token`` and ``layers`` of
``index`` and ``values``), plus ``pooled_output`` and ``mean_pooled_output``
sentence vectors.

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
from modeling import checkpoints
from modeling import bert as config_lib
from modeling.serving import inference
from modeling.bert import BertEncoder

FLAGS = flags.FLAGS
flags.DEFINE_string("input_file", None, "One text per line (text_a ||| text_b for pairs).")
flags.DEFINE_string("output_file", None, "JSON lines output.")
flags.DEFINE_string("layers", None, "Comma-separated layer indexes (default: -1,-2,-3,-4; "
                    "for --model_family=elmo every layer, 0 = token layer).")
flags.DEFINE_enum("model_family", "bert", ["bert", "elmo"],
                  "bert: a BERT encoder's WordPiece vectors; elmo: an ELMo biLM's word vectors.")
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
    if FLAGS.model_family == "elmo":
        return _extract_elmo(layers)
    layers = layers or [-1, -2, -3, -4]
    bert_config = config_lib.load_bert_config(FLAGS.bert_config_file)
    for index in layers:
        if not -bert_config.num_hidden_layers <= index < bert_config.num_hidden_layers:
            raise ValueError("--layers has %d but the model has %d layers"
                             % (index, bert_config.num_hidden_layers))
    if FLAGS.max_seq_length > bert_config.max_position_embeddings:
        raise ValueError("--max_seq_length=%d exceeds max_position_embeddings=%d"
                         % (FLAGS.max_seq_length, bert_config.max_position_embeddings))
    tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
    inference.check_vocab_fits(len(tokenizer.vocab), bert_config.vocab_size,
                               FLAGS.vocab_file, FLAGS.bert_config_file)
    texts = inference.read_input_lines(FLAGS.input_file)
    encoder = BertEncoder.from_config_object(bert_config)
    checkpoints.init_from_checkpoint(encoder, FLAGS.init_checkpoint)
    with atomic.atomic_output(FLAGS.output_file) as out:
        for record in inference.extract_features(encoder, tokenizer, texts, layers,
                                                 FLAGS.max_seq_length, FLAGS.batch_size,
                                                 FLAGS.precision):
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    print("Wrote features of %d inputs to %s" % (len(texts), FLAGS.output_file))


def _extract_elmo(layers):
    from modeling.elmo import ElmoNetwork, load_elmo_config  # pylint: disable=g-import-not-at-top
    from modeling.elmo import features as elmo_features  # pylint: disable=g-import-not-at-top
    from modeling.elmo import vocabulary as vocab_lib  # pylint: disable=g-import-not-at-top
    from modeling.tasks import word_input_format  # pylint: disable=g-import-not-at-top

    network = ElmoNetwork.from_config_object(load_elmo_config(FLAGS.bert_config_file))
    word_input_format.load_network_weights(network, FLAGS.init_checkpoint)
    tokenizer = word_input_format.WordTokenizer(vocab_lib.WordVocabulary(FLAGS.vocab_file),
                                                FLAGS.do_lower_case)
    texts = inference.read_input_lines(FLAGS.input_file)
    with atomic.atomic_output(FLAGS.output_file) as out:
        for record in elmo_features.extract_features(network, tokenizer, texts, layers,
                                                     FLAGS.max_seq_length, FLAGS.batch_size):
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    print("Wrote ELMo features of %d inputs to %s" % (len(texts), FLAGS.output_file))


if __name__ == "__main__":
    script.run(main, required_flags=["input_file", "output_file", "vocab_file",
                                     "bert_config_file", "init_checkpoint"])
