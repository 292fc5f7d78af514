"""Fill-mask: top-k vocabulary predictions at every [MASK], through the MLM head.

    python run/predict_masked.py --bert_config_file=chinese_L-12_H-768_A-12/bert_config.json \
      --vocab_file=chinese_L-12_H-768_A-12/vocab.txt \
      --init_checkpoint=chinese_L-12_H-768_A-12/bert_model.ckpt \
      --text="今天天气很[MASK]。" --text="The capital of France is [MASK]." --top_k=5

Input: repeated --text, or --input_file with one text per line (``text_a |||
text_b`` for a pair). Works with Google's checkpoints (which carry the
cls/predictions head), this project's own pre-training checkpoints, and HF
BERT safetensors. Prints a table; --output_file writes JSON lines.
"""

import json

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

from absl import flags
import keras

from data import atomic
from data import tokenization
from modeling import checkpoints
from modeling import bert as config_lib
from modeling.serving import inference
from modeling import recipes

FLAGS = flags.FLAGS
flags.DEFINE_string("bert_config_file", None, "bert_config.json (Google) or config.json (HF).")
flags.DEFINE_string("vocab_file", None, "The vocabulary file of the model.")
flags.DEFINE_string("init_checkpoint", None, "Google TF1 checkpoint, own checkpoint or HF safetensors.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models).")
flags.DEFINE_multi_string("text", [], "A text with one or more [MASK] (repeatable).")
flags.DEFINE_string("input_file", None, "One text per line.")
flags.DEFINE_string("output_file", None, "Write JSON lines here.")
flags.DEFINE_integer("top_k", 5, "Predictions per [MASK].", lower_bound=1)
flags.DEFINE_integer("max_seq_length", 128, "Longer inputs are truncated.")
flags.DEFINE_enum("precision", "fp32", ["fp32", "bf16"],
                  "bf16: compute in bfloat16 (float32 weights; faster on CPUs with "
                  "AVX512-BF16 or AMX, and on GPUs/TPUs); probabilities within ~1e-2.")


def main(_):
    tokenization.validate_case_matches_checkpoint(FLAGS.do_lower_case, FLAGS.init_checkpoint)
    bert_config = config_lib.load_bert_config(FLAGS.bert_config_file)
    tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
    inference.check_vocab_fits(len(tokenizer.vocab), bert_config.vocab_size,
                               FLAGS.vocab_file, FLAGS.bert_config_file)
    if FLAGS.output_file:
        atomic.check_outputs([("--output_file", FLAGS.output_file)],
                             [("--input_file", FLAGS.input_file or ""),
                              ("--vocab_file", FLAGS.vocab_file)])
    texts = list(FLAGS.text)
    if FLAGS.input_file:
        texts.extend(inference.read_input_lines(FLAGS.input_file, skip_blank=True))
    if not texts:
        raise ValueError("Give --text or --input_file.")
    if FLAGS.precision == "bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    model = recipes.build_bert_pretrainer(bert_config)
    checkpoints.init_from_checkpoint(model, FLAGS.init_checkpoint)
    results = inference.fill_mask(model, tokenizer, texts, FLAGS.top_k, FLAGS.max_seq_length)
    for result in results:
        print(result["text"])
        if not result["masks"]:
            print("  (no [MASK] in this text)")
        for mask in result["masks"]:
            cells = "  ".join("%s %.3f" % (p["token"], p["probability"])
                              for p in mask["predictions"])
            print("  [MASK] at %3d: %s" % (mask["position"], cells))
    if FLAGS.output_file:
        with atomic.atomic_output(FLAGS.output_file) as f:
            for result in results:
                record = {"text": result["text"], "masks": result["masks"]}
                f.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    script.run(main, required_flags=["bert_config_file", "vocab_file", "init_checkpoint"])
