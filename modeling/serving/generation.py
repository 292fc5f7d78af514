"""Text generation with a causal LM (GPT-2): greedy or sampled, with a key/value cache.

Why a cache: a causal network's keys and values at a position never change
once computed (a position sees only the past), so each new token needs one
position's worth of work instead of re-running the whole sequence.
`generate(..., use_cache=True)` runs the prompt once (`call_with_cache`),
then one `decode_step` per token, reusing the cached keys and values;
`use_cache=False` recomputes the whole sequence at every step (the
reference: the tests check both give the same tokens and logits).

Decoding, per prompt:

* greedy: the most likely token (the lowest id on a tie);
* sample: `softmax(logits / temperature)`, restricted to the `top_k` most
  likely tokens (0: all) and then to the smallest set whose probability
  reaches `top_p` (1.0: all), drawn with NumPy's PCG64 seeded by
  `(seed, prompt index)`, so a prompt's sample does not depend on the
  others or on how prompts are batched.

Generation of a prompt stops after `eos_id` (included in the generated ids;
a collection of ids: after any of them) or `max_new_tokens`. Prompts are run
in batches, left-padded: padded positions are masked out of attention and
the real ones keep positions 0, 1, ... (`position_ids`), so a batched prompt
gets what it would alone.
An empty prompt starts from `bos_id` (GPT-2's unconditional samples start
from `<|endoftext|>`); that token is not part of the prompt's ids.

`load_generator(config_file, init_checkpoint, vocab_file, merges_file)`
builds the network and tokenizer from files (this project's pre-training
output, or an HF folder with vocabulary files given beside it);
`load_folder_generator(folder)` from a published HF folder alone
(`modeling.pretrained`), whose tokenizer is the family's HF-equal one:
GPT-2's byte-level BPE, or GPT's own `</w>` BPE for an `openai-gpt` folder
(a byte-level BPE would read GPT's merges into other ids).
`run/generate.py` takes the folder's way when the vocabulary flags are empty
or name the folder's own files. `generate_records` / `write_jsonl` produce
`run/generate.py`'s JSON lines. A causal-LM family offers itself to
`run/generate.py --recipe=NAME` by registering `causal_lm_decoder(NAME)` in
`modeling.registry.decoders`.
"""

import dataclasses
import json
import os
from typing import Any, List, Optional

import numpy as np
import tensorflow as tf

from data import atomic
from modeling import registry
from modeling.training.options import option

__all__ = ["DecodingOptions", "GenerationError", "GenerationSettings", "Generator",
           "causal_lm_decoder", "filter_logits", "generate", "generate_records",
           "load_folder_generator", "load_generator", "write_jsonl"]

DECODING_MODES = ("greedy", "sample")


class GenerationError(ValueError):
    """An invalid generation option or input; `option` names the argument.

    A fault of one prompt has `option` "prompt", that prompt's `index` and
    the `detail` said of it (the message is "prompt INDEX DETAIL"), so that
    a caller can name the prompt its own way (`run/generate.py`: the line of
    `--input_file`).
    """

    def __init__(self, option, message, index=None):
        self.option = option
        self.index = index
        self.detail = message
        super().__init__(message if index is None else "prompt %d %s" % (index, message))


@dataclasses.dataclass
class DecodingOptions:
    """How tokens are chosen (see the module docstring)."""

    max_new_tokens: int = 32
    decoding: str = "greedy"
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0

    def validate(self):
        if isinstance(self.max_new_tokens, bool) or not isinstance(self.max_new_tokens, int) \
                or self.max_new_tokens < 1:
            raise GenerationError("max_new_tokens", "max_new_tokens must be a positive "
                                  "integer, got %r" % (self.max_new_tokens,))
        if self.decoding not in DECODING_MODES:
            raise GenerationError("decoding", "decoding must be one of %s, got %r"
                                  % ("|".join(DECODING_MODES), self.decoding))
        if not self.temperature > 0:
            raise GenerationError("temperature", "temperature must be > 0, got %r"
                                  % (self.temperature,))
        if isinstance(self.top_k, bool) or not isinstance(self.top_k, int) or self.top_k < 0:
            raise GenerationError("top_k", "top_k must be an integer >= 0 (0: no limit), "
                                  "got %r" % (self.top_k,))
        if not 0 < self.top_p <= 1:
            raise GenerationError("top_p", "top_p must be in (0, 1], got %r" % (self.top_p,))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise GenerationError("seed", "seed must be an integer >= 0, got %r" % (self.seed,))
        return self


def filter_logits(logits, temperature=1.0, top_k=0, top_p=1.0):
    """Probabilities of one row of logits after temperature, top-k and top-p.

    Returns a float64 vector summing to 1 (tokens filtered out have 0).
    """
    scaled = np.asarray(logits, np.float64) / temperature
    if 0 < top_k < scaled.size:
        kth = np.partition(scaled, -top_k)[-top_k]
        scaled = np.where(scaled < kth, -np.inf, scaled)
    probs = np.exp(scaled - np.max(scaled))
    probs /= probs.sum()
    if top_p < 1.0:
        order = np.argsort(-probs, kind="stable")
        cumulative = np.cumsum(probs[order])
        # Keep tokens until the kept mass reaches top_p (the crossing one too).
        drop = order[(cumulative - probs[order]) >= top_p]
        probs[drop] = 0.0
        probs /= probs.sum()
    return probs


@dataclasses.dataclass
class GenerationResult:
    generated_ids: List[int]
    logits: Optional[List[np.ndarray]] = None  # one [vocab] row per generated token


def _step_functions(network):
    cached = getattr(network, "_generation_steps", None)
    if cached is None:
        prefill = tf.function(
            lambda ids, mask, positions: network.call_with_cache(
                ids, None, input_mask=mask, position_ids=positions),
            reduce_retracing=True)
        step = tf.function(
            lambda ids, cache, mask, positions: network.call_with_cache(
                ids, cache, input_mask=mask, position_ids=positions),
            reduce_retracing=True)

        def full(ids, mask, positions):
            outputs = network({"input_ids": ids, "input_mask": mask,
                               "position_ids": positions}, training=False)
            return network.logits(outputs["sequence_output"][:, -1:])[:, 0]

        cached = (prefill, step, tf.function(full, reduce_retracing=True))
        network._generation_steps = cached  # pylint: disable=protected-access
    return cached


def generate(network, prompts, options=None, eos_id=None, bos_id=None, use_cache=True,
             batch_size=8, return_logits=False, first_index=0):
    """Generates a continuation of each prompt.

    Args:
        network: a `GPT2Network` (anything with `call_with_cache`, `logits`
            and the encoder contract).
        prompts: list of lists of token ids.
        options: `DecodingOptions` (default: greedy, 32 tokens).
        eos_id: stop a prompt's generation after this token, or after any
            of a collection of ids (None: never).
        bos_id: the token an empty prompt starts from.
        use_cache: key/value cache (True) or full recomputation (False).
        batch_size: prompts run together.
        return_logits: also return each step's logits (float32 `[vocab]`).
        first_index: index of `prompts[0]` in the caller's list (seeds).

    Returns:
        list of `GenerationResult`, one per prompt.
    """
    options = (options or DecodingOptions()).validate()
    limit = network.n_positions
    for i, prompt in enumerate(prompts):
        length = max(1, len(prompt))
        if not prompt and bos_id is None:
            raise GenerationError("prompt", "is empty and there is no bos id to start from",
                                  index=first_index + i)
        if length >= limit:
            # The prompt alone fills the model: no max_new_tokens would fit.
            raise GenerationError(
                "prompt", "has %d tokens, and the model has %d positions (n_positions): no "
                "room for a generated token; expected a prompt of at most %d tokens"
                % (length, limit, limit - 1), index=first_index + i)
        if length + options.max_new_tokens > limit:
            raise GenerationError(
                "max_new_tokens", "prompt %d has %d tokens; with max_new_tokens=%d that "
                "exceeds the model's %d positions; expected max_new_tokens <= %d (or a "
                "shorter prompt)" % (first_index + i, length, options.max_new_tokens, limit,
                                     limit - length))
    stops = frozenset() if eos_id is None else frozenset(
        [eos_id] if isinstance(eos_id, (int, np.integer)) else eos_id)
    results = []
    for start in range(0, len(prompts), batch_size):
        results.extend(_generate_batch(network, prompts[start:start + batch_size], options,
                                       stops, bos_id, use_cache, return_logits,
                                       first_index + start))
    return results


def _generate_batch(network, prompts, options, stops, bos_id, use_cache, return_logits,
                    first_index):
    prefill, step, full = _step_functions(network)
    rows = [list(p) if p else [bos_id] for p in prompts]
    batch = len(rows)
    width = max(len(r) for r in rows)
    ids = np.zeros([batch, width], np.int32)
    mask = np.zeros([batch, width], np.int32)
    for b, r in enumerate(rows):
        ids[b, width - len(r):] = r
        mask[b, width - len(r):] = 1
    positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0).astype(np.int32)
    rngs = [np.random.Generator(np.random.PCG64([options.seed, first_index + b]))
            for b in range(batch)]
    results = [GenerationResult([], [] if return_logits else None) for _ in range(batch)]
    done = np.zeros([batch], bool)
    cache = None
    if use_cache:
        outputs = prefill(tf.constant(ids), tf.constant(mask), tf.constant(positions))
        logits = outputs["logits"][:, -1].numpy()
        cache = outputs["cache"]
    else:
        logits = full(tf.constant(ids), tf.constant(mask), tf.constant(positions)).numpy()
    for step_index in range(options.max_new_tokens):
        chosen = np.zeros([batch], np.int32)
        for b in range(batch):
            if done[b]:
                continue
            if options.decoding == "greedy":
                token = int(np.argmax(logits[b]))
            else:
                probs = filter_logits(logits[b], options.temperature, options.top_k,
                                      options.top_p)
                token = int(rngs[b].choice(probs.size, p=probs))
            chosen[b] = token
            results[b].generated_ids.append(token)
            if return_logits:
                results[b].logits.append(np.array(logits[b]))
            if token in stops:
                done[b] = True
        if done.all() or step_index == options.max_new_tokens - 1:
            break
        # Finished rows keep decoding a pad token; their results are final.
        next_positions = positions[:, -1:] + 1
        mask = np.concatenate([mask, np.ones([batch, 1], np.int32)], axis=1)
        positions = np.concatenate([positions, next_positions], axis=1)
        ids = np.concatenate([ids, chosen[:, None]], axis=1)
        if use_cache:
            outputs = step(tf.constant(chosen[:, None]), cache, tf.constant(mask),
                           tf.constant(next_positions))
            logits = outputs["logits"][:, -1].numpy()
            cache = outputs["cache"]
        else:
            logits = full(tf.constant(ids), tf.constant(mask), tf.constant(positions)).numpy()
    return results


# ------------------------------------------------------------------ files


@dataclasses.dataclass
class Generator:
    """A network and its tokenizer, as `load_generator` makes them."""

    network: object
    tokenizer: object
    eos_id: Any  # an id, a tuple of ids (stop after any), or None
    bos_id: Optional[int]


def load_generator(config_file, init_checkpoint, vocab_file, merges_file, family=None):
    """Builds a GPT-2 (or GPT) network from a config file and a checkpoint, and its tokenizer.

    Args:
        config_file: an HF GPT-2 `config.json` (or its folder), or the one
            `run_pretraining.py --recipe=gpt2` writes (the same format).
        init_checkpoint: an HF `model.safetensors` (or its folder), or this
            project's checkpoint folder / `ckpt-N` prefix; anything
            `modeling.checkpoints.init_from_checkpoint` reads.
        vocab_file, merges_file: the byte-level BPE files.
        family: the decoder's model family, "gpt2" or "gpt" (any registered
            family whose network has `call_with_cache` and `logits`); None:
            `registry.DEFAULT_DECODER` (GPT-2).

    The eos/bos ids are the config's, else the vocabulary's `<|endoftext|>`.
    """
    from data.tokenizers import byte_bpe  # pylint: disable=g-import-not-at-top
    from modeling import checkpoints  # pylint: disable=g-import-not-at-top

    # Errors name the argument (= run/generate.py's flag) they come from.
    try:
        family = registry.families.get(family or registry.DEFAULT_DECODER)
        config = family.load_config(config_file)
    except (ValueError, OSError) as e:
        raise GenerationError("config_file", str(e)) from e
    try:
        vocab = byte_bpe.load_vocab(vocab_file)
    except byte_bpe.ByteBPEError as e:
        raise GenerationError("vocab_file", str(e)) from e
    try:
        byte_bpe.check_merges(vocab, byte_bpe.load_merges(merges_file), vocab_file, merges_file)
    except byte_bpe.ByteBPEError as e:
        raise GenerationError("merges_file", str(e)) from e
    tokenizer = byte_bpe.ByteBPETokenizer(vocab_file, merges_file)
    if tokenizer.vocab_size > config.vocab_size:
        raise GenerationError("vocab_file", "%s has %d tokens but the model (%s) has "
                              "vocab_size %d" % (vocab_file, tokenizer.vocab_size,
                                                 config_file, config.vocab_size))
    network = family.build_encoder(config)
    try:
        checkpoints.init_from_checkpoint(network, init_checkpoint)
    except (ValueError, OSError, TypeError) as e:
        raise GenerationError("init_checkpoint", str(e)) from e

    def usable(token_id):
        return token_id if token_id is not None and token_id < config.vocab_size else None

    eos_id = usable(getattr(config, "eos_token_id", None))
    if eos_id is None:
        eos_id = tokenizer.eos_id
    bos_id = usable(getattr(config, "bos_token_id", None))
    if bos_id is None:
        bos_id = eos_id
    return Generator(network, tokenizer, eos_id, bos_id)


def load_folder_generator(path, family=None):
    """A `Generator` from an HF model folder alone: its config, weights and tokenizer.

    Args:
        path: an HF folder (`config.json` with `model_type`, safetensors,
            tokenizer files), or a weights file inside one.
        family: the decoder's family name; the folder's must be the same
            (None: whatever the folder is).

    The prompt's ids are the folder's tokenizer's, equal to HF's
    `AutoTokenizer` of the folder (`modeling.pretrained`). The eos and bos
    ids are where HF's `generate` reads them, never the tokenizer's: the
    folder's `generation_config.json` when it has one (an eos list stops at
    any of its ids; an absent key is no id), else `config.json`. GPT's
    config has none, so its generation runs to `max_new_tokens` (as HF's
    does) and an empty prompt has nothing to start from.
    """
    from modeling import pretrained  # pylint: disable=g-import-not-at-top
    try:
        folder = pretrained.inspect(path)
    except ValueError as e:
        raise GenerationError("init_checkpoint", str(e)) from e
    if folder.family.name not in registry.decoders:
        causal = [name for name in registry.decoders.names()
                  if name in registry.families and registry.families.get(name).hf is not None]
        raise GenerationError(
            "init_checkpoint", "%s is a %s model, not a causal LM that generates text; "
            "expected a folder of %s" % (folder.path, folder.family.name, ", ".join(causal)))
    if family is not None and folder.family.name != family:
        raise GenerationError(
            "recipe", "%s is a %s model; --recipe=%s generates with %s models (give "
            "--recipe=%s, or leave it out)" % (folder.path, folder.family.name, family, family,
                                              folder.family.name))
    try:
        loaded = pretrained.load_pretrained(path)
    except (ValueError, OSError, TypeError) as e:
        raise GenerationError("init_checkpoint", str(e)) from e
    network, config = loaded.model, loaded.config
    if not (hasattr(network, "call_with_cache") and hasattr(network, "logits")):
        raise GenerationError("init_checkpoint", "%s: the %s family's network is not a causal "
                              "LM (no call_with_cache/logits)" % (folder.path, folder.family.name))
    vocab_size = config.vocab_size

    def usable(token_id):
        return token_id if isinstance(token_id, int) and not isinstance(token_id, bool) and \
            0 <= token_id < vocab_size else None

    ids = _generation_ids(folder.path, config)
    eos = ids.get("eos_token_id")
    eos_ids = tuple(i for i in map(usable, eos if isinstance(eos, list) else [eos])
                    if i is not None)
    bos_id = usable(ids.get("bos_token_id"))
    eos_id = eos_ids[0] if len(eos_ids) == 1 else (eos_ids or None)
    return Generator(network, loaded.tokenizer, eos_id,
                     bos_id if bos_id is not None else (eos_ids[0] if eos_ids else None))


def _generation_ids(folder, config):
    """`{"eos_token_id", "bos_token_id"}` as HF's `generate` reads them from a folder: its
    `generation_config.json` if there is one (a missing key is no id), else the config."""
    path = os.path.join(folder, "generation_config.json")
    if not os.path.isfile(path):
        return {name: getattr(config, name, None) for name in ("eos_token_id", "bos_token_id")}
    try:
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
    except (OSError, ValueError) as e:
        raise GenerationError("init_checkpoint", "%s: not a readable JSON file: %s"
                              % (path, str(e).splitlines()[0] if str(e) else type(e).__name__)) \
            from None
    if not isinstance(values, dict):
        raise GenerationError("init_checkpoint", "%s: expected a JSON object, got %s"
                              % (path, type(values).__name__))
    return values


def _prompt_ids(tokenizer, prompt):
    """The prompt's ids: a folder's tokenizer gives `Encoded` (HF's ids of the prompt)."""
    encoded = tokenizer.encode(prompt)
    return list(getattr(encoded, "input_ids", encoded))


def _decode(tokenizer, ids):
    """`ids` as text without special tokens (HF's `skip_special_tokens=True`), for either
    kind of tokenizer (a folder's `PretrainedTokenizer` decodes every id it is given)."""
    specials = getattr(tokenizer, "special_tokens", None)
    if isinstance(specials, dict) and hasattr(tokenizer, "build_inputs"):
        special_ids = {tokenizer.vocab[t] for t in specials.values() if t in tokenizer.vocab}
        return tokenizer.decode([i for i in ids if i not in special_ids])
    return tokenizer.decode(ids, skip_special_tokens=True)


def generate_records(generator, prompts, options, batch_size=8):
    """One dict per prompt: `prompt`, `prompt_ids`, `generated_ids`, `text`.

    `text` is the generated part only, decoded without special tokens.
    """
    tokenizer = generator.tokenizer
    encoded = [_prompt_ids(tokenizer, p) for p in prompts]
    results = generate(generator.network, encoded, options, eos_id=generator.eos_id,
                       bos_id=generator.bos_id, batch_size=batch_size)
    return [{"prompt": prompt, "prompt_ids": ids, "generated_ids": result.generated_ids,
             "text": _decode(tokenizer, result.generated_ids)}
            for prompt, ids, result in zip(prompts, encoded, results)]


@dataclasses.dataclass
class GenerationSettings:
    """`run/generate.py`'s flags: what a `registry.Decoder` gets as `settings`.

    `recipe` names the decoder (`registry.decoders`); the decoder's
    `required_flags` and `input_flags` are names of these fields.
    """

    # The registered decoders, the default first.
    recipe: str = option(
        registry.DEFAULT_DECODER, "gpt2, gpt: a causal LM (GPT-2, or the 2018 GPT) continues "
        "the prompt; unilm: a UNILM seq2seq model writes the target of each prompt (the "
        "source).",
        choices=lambda: registry.default_first(registry.decoders.names(),
                                               registry.DEFAULT_DECODER))
    init_checkpoint: Optional[str] = option(
        None, "An HF GPT-2 or GPT (openai-gpt) folder, which alone is enough (its config and "
        "tokenizer are used), or its model.safetensors, or a checkpoint folder / ckpt-N "
        "prefix written by run_pretraining.py --recipe=gpt2.")
    config_file: Optional[str] = option(
        None, "The model's config.json (HF's, or the one run_pretraining.py wrote).")
    vocab_file: Optional[str] = option(None, "Byte-level BPE vocab.json.")
    merges_file: Optional[str] = option(None, "Byte-level BPE merges.txt.")
    input_file: Optional[str] = option(None, "Prompts, one per line (or use --prompt).")
    prompt: Optional[str] = option(None, "One prompt (or use --input_file).")
    output_file: Optional[str] = option(None, "Where to write the JSON lines.")
    max_new_tokens: int = option(32, "Most tokens generated per prompt.")
    decoding: str = option("greedy", "greedy or sample (gpt2); greedy or beam (unilm).")
    beam_size: int = option(4, "unilm, --decoding=beam: hypotheses kept per step.")
    length_penalty: float = option(
        0.0, "unilm, --decoding=beam: finished hypotheses rank by score / length^this.")
    do_lower_case: bool = option(
        True, "unilm: lower-case the input (uncased vocabularies).")
    temperature: float = option(1.0, "Sampling temperature (> 0).")
    top_k: int = option(0, "Sample among the k most likely tokens (0: all).")
    top_p: float = option(1.0, "Sample within the smallest set of probability >= p.")
    seed: int = option(
        0, "Sampling seed (each prompt's draw also depends on its line).")


def causal_lm_decoder(family):
    """The `registry.Decoder` of `run/generate.py --recipe=FAMILY` for a causal-LM family.

    Its network must have `call_with_cache` and `logits` (`generate`) and read
    byte-level BPE (`--vocab_file`, `--merges_file`); `--decoding` is greedy
    or sample, with `--temperature`, `--top_k`, `--top_p` and `--seed`. An HF
    folder as `--init_checkpoint` read whole needs no other file flag (its own
    tokenizer reads the prompts, and a file it lacks is named as the folder's);
    anything else needs `--config_file`, `--vocab_file` and `--merges_file`.
    """

    def options(settings):
        return DecodingOptions(
            max_new_tokens=settings.max_new_tokens, decoding=settings.decoding,
            temperature=settings.temperature, top_k=settings.top_k, top_p=settings.top_p,
            seed=settings.seed).validate()

    def check(settings):
        options(settings)
        if not _folder_tokenizer_wanted(settings):
            for name in _FILE_FLAGS:
                if not getattr(settings, name):
                    raise ValueError("--%s is required (or give --init_checkpoint as an HF "
                                     "model folder)" % name)

    def generate_from_files(settings, prompts):
        if _folder_tokenizer_wanted(settings):
            generator = load_folder_generator(settings.init_checkpoint, family=family)
        else:
            generator = load_generator(settings.config_file, settings.init_checkpoint,
                                       settings.vocab_file, settings.merges_file, family=family)
        return generate_records(generator, prompts, options(settings))

    return registry.Decoder(
        name=family,
        required_flags=("init_checkpoint", "output_file"),
        input_flags=("init_checkpoint", "vocab_file", "merges_file", "config_file"),
        check=check, generate=generate_from_files)


_FILE_FLAGS = ("config_file", "vocab_file", "merges_file")


def _folder_tokenizer_wanted(settings):
    """Whether `--init_checkpoint` is an HF folder read whole (`folders.published_folder`):
    then the folder's HF-equal tokenizer reads the prompts."""
    from modeling.pretrained import folders  # pylint: disable=g-import-not-at-top
    try:
        folder = folders.published_folder(settings, _FILE_FLAGS)
    except ValueError as e:
        raise GenerationError("init_checkpoint", str(e)) from e
    return folder is not None and folder.kind == folders.HF


def write_jsonl(records, path):
    """Writes one JSON object per line to a temporary file, then renames it to `path`."""
    atomic.write_text(path, "".join(json.dumps(record, ensure_ascii=False) + "\n"
                                    for record in records))
