"""Fill-mask: top-k vocabulary predictions at every [MASK], through the MLM head.

    python run/predict_masked.py --bert_config_file=chinese_L-12_H-768_A-12/bert_config.json \
      --vocab_file=chinese_L-12_H-768_A-12/vocab.txt \
      --init_checkpoint=chinese_L-12_H-768_A-12/bert_model.ckpt \
      --text="今天天气很[MASK]。" --text="The capital of France is [MASK]." --top_k=5

Input: repeated --text, or --input_file with one text per line (``text_a |||
text_b`` for a pair). Works with Google's checkpoints (which carry the
cls/predictions head), this project's own pre-training checkpoints, and HF
BERT safetensors. Prints a table; --output_file writes JSON lines. The flags
are the fields of `modeling.serving.inference.FillMaskSettings`.
"""

import json

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import keras

import common_flags
from data import atomic
from data import tokenization
from modeling import checkpoints
from modeling import bert as config_lib
from modeling.serving import inference
from modeling import recipes

common_flags.define_job_flags(inference.FillMaskSettings)


def main(_):
    settings = common_flags.job_from_flags(inference.FillMaskSettings)
    common_flags.require(settings, "bert_config_file", "vocab_file")
    tokenization.validate_case_matches_checkpoint(settings.do_lower_case,
                                                  settings.init_checkpoint)
    bert_config = config_lib.load_bert_config(settings.bert_config_file)
    tokenizer = tokenization.FullTokenizer(settings.vocab_file, settings.do_lower_case)
    inference.check_vocab_fits(len(tokenizer.vocab), bert_config.vocab_size,
                               settings.vocab_file, settings.bert_config_file)
    if settings.output_file:
        atomic.check_outputs([("--output_file", settings.output_file)],
                             [("--input_file", settings.input_file or ""),
                              ("--vocab_file", settings.vocab_file)])
    texts = list(settings.text)
    if settings.input_file:
        texts.extend(inference.read_input_lines(settings.input_file, skip_blank=True))
    if not texts:
        raise ValueError("Give --text or --input_file.")
    if settings.precision == "bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")
    model = recipes.build_bert_pretrainer(bert_config)
    checkpoints.init_from_checkpoint(model, settings.init_checkpoint)
    results = inference.fill_mask(model, tokenizer, texts, settings.top_k,
                                  settings.max_seq_length)
    for result in results:
        print(result["text"])
        if not result["masks"]:
            print("  (no [MASK] in this text)")
        for mask in result["masks"]:
            cells = "  ".join("%s %.3f" % (p["token"], p["probability"])
                              for p in mask["predictions"])
            print("  [MASK] at %3d: %s" % (mask["position"], cells))
    if settings.output_file:
        with atomic.atomic_output(settings.output_file) as f:
            for result in results:
                record = {"text": result["text"], "masks": result["masks"]}
                f.write(json.dumps(record, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    script.run(main, required_flags=["init_checkpoint"])
