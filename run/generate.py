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
from modeling import registry
from modeling.serving import generation

FLAGS = flags.FLAGS

# The registered decoders (`modeling.registry.decoders`), the default first.
flags.DEFINE_enum("recipe", registry.DEFAULT_DECODER,
                  registry.default_first(registry.decoders.names(), registry.DEFAULT_DECODER),
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


def main(_):
    decoder = registry.decoders.get(FLAGS.recipe)
    for name in decoder.required_flags:
        if not FLAGS[name].value:
            raise FlagError("--%s is required" % name)
    decoder.check(FLAGS)
    atomic.check_outputs([("--output_file", FLAGS.output_file)],
                         [("--input_file", FLAGS.input_file or "")] +
                         [("--" + name, FLAGS[name].value) for name in decoder.input_flags])
    prompts = _read_prompts()
    records = decoder.generate(FLAGS, prompts)
    generation.write_jsonl(records, FLAGS.output_file)
    print("Wrote %d generations to %s" % (len(records), FLAGS.output_file))


def _main(argv):
    try:
        main(argv)
    except generation.GenerationError as e:
        raise FlagError("--%s: %s" % (e.option, e)) from None


if __name__ == "__main__":
    script.run(_main)
