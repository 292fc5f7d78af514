"""Generates text with GPT-2: an HF GPT-2 folder or this project's pre-trained one.

    python run/generate.py --init_checkpoint=/models/gpt2/model.safetensors \
      --config_file=/models/gpt2/config.json --vocab_file=/models/gpt2/vocab.json \
      --merges_file=/models/gpt2/merges.txt --prompt="The baker opens" \
      --output_file=/tmp/out.jsonl --max_new_tokens=20

    python run/generate.py --init_checkpoint=output/pretraining_sample \
      --config_file=output/pretraining_sample/config.json \
      --vocab_file=data/sample/gpt2/vocab.json --merges_file=data/sample/gpt2/merges.txt \
      --input_file=prompts.txt --output_file=/tmp/out.jsonl --decoding=sample \
      --temperature=0.8 --top_k=40 --top_p=0.95 --seed=1

UNILM (`--recipe=unilm`): a model pre-trained with --recipe=unilm and
fine-tuned with --recipe=unilm_seq2seq completes `[CLS] source [SEP]` with a
target, greedily or by beam search (`modeling.unilm.decoding`); the config is
its bert_config.json and the vocabulary its WordPiece vocab.txt:

    python run/generate.py --recipe=unilm --init_checkpoint=output/unilm_seq2seq \
      --config_file=output/unilm_seq2seq/bert_config.json \
      --vocab_file=data/sample/vocab.txt --input_file=sources.txt \
      --output_file=/tmp/out.jsonl --decoding=beam --beam_size=4

Writes one JSON line per prompt, `{"prompt", "prompt_ids", "generated_ids",
"text"}` (`generated_ids` and `text` exclude the prompt; UNILM adds the
`score`, the log-probability of the output), to a temporary file renamed to
--output_file when complete. A bad flag is one line naming it. The work is
`modeling.serving.generation` (GPT-2) and `modeling.unilm.decoding`.
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

from absl import flags

from data import atomic
from modeling.serving import generation
from modeling.unilm import decoding as unilm_decoding

FLAGS = flags.FLAGS

flags.DEFINE_enum("recipe", "gpt2", ["gpt2", "gpt", "unilm"],
                  "gpt2, gpt: a causal LM (GPT-2, or the 2018 GPT) continues the prompt; "
                  "unilm: a UNILM seq2seq model writes the target of each prompt (the source).")
flags.DEFINE_string("init_checkpoint", None,
                    "HF GPT-2 model.safetensors (or its folder), or a checkpoint folder / "
                    "ckpt-N prefix written by run_pretraining.py --recipe=gpt2.")
flags.DEFINE_string("config_file", None,
                    "The model's config.json (HF's, or the one run_pretraining.py wrote).")
flags.DEFINE_string("vocab_file", None, "Byte-level BPE vocab.json.")
flags.DEFINE_string("merges_file", None, "Byte-level BPE merges.txt.")
flags.DEFINE_string("input_file", None, "Prompts, one per line (or use --prompt).")
flags.DEFINE_string("prompt", None, "One prompt (or use --input_file).")
flags.DEFINE_string("output_file", None, "Where to write the JSON lines.")
flags.DEFINE_integer("max_new_tokens", 32, "Most tokens generated per prompt.")
flags.DEFINE_string("decoding", "greedy", "greedy or sample (gpt2); greedy or beam (unilm).")
flags.DEFINE_integer("beam_size", 4, "unilm, --decoding=beam: hypotheses kept per step.")
flags.DEFINE_float("length_penalty", 0.0,
                   "unilm, --decoding=beam: finished hypotheses rank by score / length^this.")
flags.DEFINE_bool("do_lower_case", True, "unilm: lower-case the input (uncased vocabularies).")
flags.DEFINE_float("temperature", 1.0, "Sampling temperature (> 0).")
flags.DEFINE_integer("top_k", 0, "Sample among the k most likely tokens (0: all).")
flags.DEFINE_float("top_p", 1.0, "Sample within the smallest set of probability >= p.")
flags.DEFINE_integer("seed", 0, "Sampling seed (each prompt's draw also depends on its line).")


class FlagError(ValueError):
    pass


def _read_prompts():
    if (FLAGS.input_file is None) == (FLAGS.prompt is None):
        raise FlagError("give exactly one of --input_file and --prompt")
    if FLAGS.prompt is not None:
        return [FLAGS.prompt]
    try:
        with open(FLAGS.input_file, encoding="utf-8") as f:
            return [line.rstrip("\r\n") for line in f]
    except (OSError, UnicodeDecodeError) as e:
        raise FlagError("--input_file: cannot read %s: %s" % (FLAGS.input_file, e)) from e


def main_unilm():
    for name in ("init_checkpoint", "config_file", "vocab_file", "output_file"):
        if not FLAGS[name].value:
            raise FlagError("--%s is required" % name)
    if FLAGS.decoding not in ("greedy", "beam"):
        raise FlagError("--decoding=%s: --recipe=unilm decodes with greedy or beam"
                        % FLAGS.decoding)
    if FLAGS.beam_size < 1:
        raise FlagError("--beam_size=%d: expected a positive integer" % FLAGS.beam_size)
    if FLAGS.max_new_tokens < 1:
        raise FlagError("--max_new_tokens=%d: expected a positive integer"
                        % FLAGS.max_new_tokens)
    atomic.check_outputs([("--output_file", FLAGS.output_file)],
                         [("--input_file", FLAGS.input_file or ""),
                          ("--vocab_file", FLAGS.vocab_file),
                          ("--config_file", FLAGS.config_file)])
    prompts = _read_prompts()
    try:
        decoder, tokenizer = unilm_decoding.load_decoder(
            FLAGS.config_file, FLAGS.init_checkpoint, FLAGS.vocab_file, FLAGS.do_lower_case)
        records = unilm_decoding.generate_records(
            decoder, tokenizer, prompts, FLAGS.decoding, FLAGS.beam_size,
            FLAGS.max_new_tokens, FLAGS.length_penalty)
    except unilm_decoding.DecoderLoadError as e:
        raise FlagError("--%s: %s" % (e.option, e)) from None
    except ValueError as e:
        raise FlagError(str(e)) from None
    generation.write_jsonl(records, FLAGS.output_file)
    print("Wrote %d generations to %s" % (len(records), FLAGS.output_file))


def main(_):
    if FLAGS.recipe == "unilm":
        return main_unilm()
    for name in ("init_checkpoint", "config_file", "vocab_file", "merges_file",
                 "output_file"):
        if not FLAGS[name].value:
            raise FlagError("--%s is required" % name)
    options = generation.DecodingOptions(
        max_new_tokens=FLAGS.max_new_tokens, decoding=FLAGS.decoding,
        temperature=FLAGS.temperature, top_k=FLAGS.top_k, top_p=FLAGS.top_p,
        seed=FLAGS.seed).validate()
    atomic.check_outputs([("--output_file", FLAGS.output_file)],
                         [("--input_file", FLAGS.input_file or ""),
                          ("--vocab_file", FLAGS.vocab_file),
                          ("--merges_file", FLAGS.merges_file),
                          ("--config_file", FLAGS.config_file)])
    prompts = _read_prompts()
    generator = generation.load_generator(FLAGS.config_file, FLAGS.init_checkpoint,
                                          FLAGS.vocab_file, FLAGS.merges_file,
                                          family=FLAGS.recipe)
    records = generation.generate_records(generator, prompts, options)
    generation.write_jsonl(records, FLAGS.output_file)
    print("Wrote %d generations to %s" % (len(records), FLAGS.output_file))


def _main(argv):
    try:
        main(argv)
    except generation.GenerationError as e:
        raise FlagError("--%s: %s" % (e.option, e)) from None


if __name__ == "__main__":
    script.run(_main)
