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

A published HF or keras-hub folder of a masked-LM family (BERT, RoBERTa,
ALBERT, DistilBERT) as `--init_checkpoint` is enough: its tokenizer reads the
text (HF's tokens; `[MASK]` stands for the folder's mask token, `<mask>`
for RoBERTa) and the family's MLM head predicts
(`modeling.serving.folder_inference`):

    python run/predict_masked.py --init_checkpoint=/models/roberta-base \
      --text="The capital of France is <mask>."
"""

import json

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import common_flags
from data import atomic
from data import tokenization
from modeling import checkpoints
from modeling import bert as config_lib
from modeling.pretrained import folders
from modeling.serving import folder_inference
from modeling.serving import inference
from modeling import recipes

common_flags.define_job_flags(inference.FillMaskSettings)


def main(_):
    settings = common_flags.job_from_flags(inference.FillMaskSettings)
    folder = folders.published_folder(settings)
    if folder is None:
        results = _from_files(settings)
    else:
        if settings.output_file:
            atomic.check_outputs([("--output_file", settings.output_file)],
                                 [("--input_file", settings.input_file or ""),
                                  ("--init_checkpoint", settings.init_checkpoint)])
        results = folder_inference.folder_fill_mask(folder, settings, _texts(settings))
    _report(settings, results)


def _texts(settings):
    texts = list(settings.text)
    if settings.input_file:
        texts.extend(inference.read_input_lines(settings.input_file, skip_blank=True))
    if not texts:
        raise ValueError("Give --text or --input_file.")
    return texts


def _from_files(settings):
    """Google's way: a WordPiece vocabulary, a BERT config and a checkpoint."""
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
                              ("--vocab_file", settings.vocab_file),
                              ("--bert_config_file", settings.bert_config_file),
                              ("--init_checkpoint", settings.init_checkpoint)])
    texts = _texts(settings)
    model = recipes.build_bert_pretrainer(bert_config)
    checkpoints.init_from_checkpoint(model, settings.init_checkpoint)
    return inference.fill_mask(model, tokenizer, texts, settings.top_k, settings.max_seq_length,
                               precision=settings.precision)


def _report(settings, results):
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
