"""Generates text with GPT-2 or GPT: an HF folder or this project's pre-trained model.

An HF GPT-2 or GPT (`openai-gpt`) folder alone is enough: its config, weights
and tokenizer (HF's ids) are the folder's, and generation stops where HF's
`generate` stops (the eos ids of its `generation_config.json`, else of its
`config.json`):

    python run/generate.py --init_checkpoint=/models/gpt2 --prompt="The baker opens" \
      --output_file=/tmp/out.jsonl --max_new_tokens=20

Files given explicitly win over the folder's; anything other than an HF
folder needs all three of --config_file, --vocab_file, --merges_file:

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
`modeling.serving.generation` (GPT-2) and `modeling.unilm.decoding`; the flags
are the fields of `modeling.serving.generation.GenerationSettings`.
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import common_flags
from data import atomic
from modeling import registry
from modeling.serving import generation

common_flags.define_job_flags(generation.GenerationSettings)


class FlagError(ValueError):
    pass


def _read_prompts(settings):
    if (settings.input_file is None) == (settings.prompt is None):
        raise FlagError("give exactly one of --input_file and --prompt")
    if settings.prompt is not None:
        return [settings.prompt]
    try:
        with open(settings.input_file, encoding="utf-8") as f:
            return [line.rstrip("\r\n") for line in f]
    except (OSError, UnicodeDecodeError) as e:
        raise FlagError("--input_file: cannot read %s: %s" % (settings.input_file, e)) from e


def main(_):
    settings = common_flags.job_from_flags(generation.GenerationSettings)
    decoder = registry.decoders.get(settings.recipe)
    for name in decoder.required_flags:
        if not getattr(settings, name):
            raise FlagError("--%s is required" % name)
    decoder.check(settings)
    atomic.check_outputs([("--output_file", settings.output_file)],
                         [("--input_file", settings.input_file or "")] +
                         [("--" + name, getattr(settings, name)) for name in decoder.input_flags])
    prompts = _read_prompts(settings)
    try:
        records = decoder.generate(settings, prompts)
    except generation.GenerationError as e:
        if e.option != "prompt" or e.index is None:
            raise
        where = ("--prompt" if settings.prompt is not None else
                 "--input_file=%s line %d" % (settings.input_file, e.index + 1))
        raise FlagError("%s: the prompt %s" % (where, e.detail)) from None
    generation.write_jsonl(records, settings.output_file)
    print("Wrote %d generations to %s" % (len(records), settings.output_file))


def _main(argv):
    try:
        main(argv)
    except generation.GenerationError as e:
        raise FlagError("--%s: %s" % (e.option, e)) from None


if __name__ == "__main__":
    script.run(_main)
