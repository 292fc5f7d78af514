"""Extracts pre-computed feature vectors from BERT (Google's extract_features).

    python run/extract_features.py --input_file=input.txt --output_file=features.jsonl \
      --vocab_file=vocab.txt --bert_config_file=bert_config.json \
      --init_checkpoint=bert_model.ckpt --layers=-1,-2,-3,-4 --max_seq_length=128

Input: one text per line, ``text_a ||| text_b`` for pairs. Output: Google's
JSON lines (``linex_index``, ``features`` with ``token`` and ``layers`` of
``index`` and ``values``), plus ``pooled_output`` and ``mean_pooled_output``
sentence vectors. `--model_family=albert` reads an ALBERT encoder the same way
(`--bert_config_file` its albert_config.json).

A published HF or keras-hub folder as `--init_checkpoint` is enough, for
any family (BERT, RoBERTa, ALBERT, DistilBERT, XLNet, GPT, GPT-2): its
config, family and tokenizer are the folder's, tokens are HF's (special
tokens included), and `pooled_output` is there for families with a pooler
(`modeling.serving.folder_inference`):

    python run/extract_features.py --init_checkpoint=/models/roberta-base \
      --input_file=input.txt --output_file=features.jsonl

`--model_family=elmo` extracts a pre-trained ELMo biLM's word vectors
instead (`--bert_config_file` its elmo_options.json, `--vocab_file` its word
vocabulary, `--init_checkpoint` run_pretraining's output): layers are 0 (the
character-CNN token layer) to 2 (the top biLSTM layer), all by default, plus
each word's equal-weight mix `elmo_average` (`modeling.elmo.features`).

The flags are the fields of `modeling.serving.inference.FeatureExtractionSettings`,
which the family's `feature_extractor` gets.
"""

import json

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import common_flags
from data import atomic
from data import tokenization
from modeling import registry
from modeling.pretrained import folders
from modeling.serving import folder_inference
from modeling.serving import inference

common_flags.define_job_flags(inference.FeatureExtractionSettings)


def main(_):
    settings = common_flags.job_from_flags(inference.FeatureExtractionSettings)
    folder = folders.published_folder(settings)
    if folder is None:
        common_flags.require(settings, "vocab_file", "bert_config_file")
        tokenization.validate_case_matches_checkpoint(settings.do_lower_case,
                                                      settings.init_checkpoint)
    atomic.check_outputs([("--output_file", settings.output_file)],
                         [("--input_file", settings.input_file),
                          ("--vocab_file", settings.vocab_file or ""),
                          ("--bert_config_file", settings.bert_config_file or ""),
                          ("--init_checkpoint", settings.init_checkpoint or "")])
    layers = settings.layer_indexes()
    if folder is not None:
        texts, records, what = folder_inference.folder_features(folder, settings, layers)
    else:
        extract = registry.families.get(settings.model_family).feature_extractor
        texts, records, what = extract(settings, layers)
    with atomic.atomic_output(settings.output_file) as out:
        for record in records:
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    print("Wrote %s of %d inputs to %s" % (what, len(texts), settings.output_file))


if __name__ == "__main__":
    script.run(main, required_flags=["input_file", "output_file", "init_checkpoint"])
