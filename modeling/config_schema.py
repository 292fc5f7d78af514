"""What a model config file may hold and must hold: one schema per family.

A config file (`bert_config.json`, `albert_config.json`, HF `config.json`)
is checked against its family's `ConfigSchema` when it is read, before any
value is used:

* every key must be known: a field of the family's config, a key that
  Google's or Hugging Face's released files carry beside them (kept in the
  config's `extra` and written back), or a key this project itself writes.
  A misspelt key (`hiddensize`) is an error naming it and the closest known
  key, instead of being kept as an extra while the field silently takes its
  default;
* the structural fields (the ones that fix the shapes of the weights) must
  be present: without `hidden_size` a file would otherwise become a
  768-wide model;
* a `model_type` must be the family's.

Only files are checked this way; configs built in Python (`from_dict`,
`from_preset`, `replace`) keep their defaults and extras as before.

The allow-lists are those of real files: google-research/bert's and
google-research/albert's releases, and what `transformers` writes
(`PretrainedConfig.save_pretrained`), including keys older versions wrote.
"""

import difflib
import json
import os

__all__ = ["ConfigSchema", "GOOGLE_BERT_EXTRA_KEYS", "HF_COMMON_KEYS", "config_file_in",
           "keras_hub_backbone_config", "keras_hub_preset_config"]

# Keys of google-research/bert's released bert_config.json files beside the
# fields (the Chinese and multilingual models carry them; nothing reads them).
GOOGLE_BERT_EXTRA_KEYS = frozenset({
    "directionality",
    "pooler_fc_size",
    "pooler_num_attention_heads",
    "pooler_num_fc_layers",
    "pooler_size_per_head",
    "pooler_type",
})

# Keys any Hugging Face `config.json` may carry whatever the model: those of
# `PretrainedConfig` (identity, labels, special token ids, generation
# defaults of older versions) and bookkeeping keys older versions wrote.
HF_COMMON_KEYS = frozenset({
    "_attn_implementation_autoset",
    "_name_or_path",
    "_num_labels",
    "add_cross_attention",
    "architectures",
    "auto_map",
    "bad_words_ids",
    "begin_suppress_tokens",
    "bos_token_id",
    "chunk_size_feed_forward",
    "cross_attention_hidden_size",
    "decoder_start_token_id",
    "diversity_penalty",
    "do_sample",
    "dtype",
    "early_stopping",
    "encoder_no_repeat_ngram_size",
    "eos_token_id",
    "exponential_decay_length_penalty",
    "finetuning_task",
    "forced_bos_token_id",
    "forced_eos_token_id",
    "gradient_checkpointing",
    "id2label",
    "is_decoder",
    "is_encoder_decoder",
    "label2id",
    "length_penalty",
    "max_length",
    "min_length",
    "model_type",
    "no_repeat_ngram_size",
    "num_beam_groups",
    "num_beams",
    "num_labels",
    "num_return_sequences",
    "output_attentions",
    "output_hidden_states",
    "output_past",
    "output_scores",
    "pad_token_id",
    "prefix",
    "problem_type",
    "pruned_heads",
    "remove_invalid_values",
    "repetition_penalty",
    "return_dict",
    "return_dict_in_generate",
    "sep_token_id",
    "suppress_tokens",
    "task_specific_params",
    "temperature",
    "tf_legacy_loss",
    "tie_encoder_decoder",
    "tie_word_embeddings",
    "tokenizer_class",
    "top_k",
    "top_p",
    "torch_dtype",
    "torchscript",
    "transformers_version",
    "typical_p",
    "use_bfloat16",
    "use_cache",
    "xla_device",
})


def _quoted(names):
    return ", ".join("`%s`" % name for name in names)


class ConfigSchema:
    """The keys of one family's config files (see the module docstring).

    Args:
        family: the family's name as users know it ("BERT", "ALBERT", ...),
            for messages.
        fields: the config's own fields.
        required: the fields a file must have.
        extra_keys: other keys a real file may carry (kept as extras).
        model_types: the `model_type` values of the family's HF files
            (empty: any).
        alternatives: {required field: other keys that stand for it}, e.g.
            GPT-2's `n_ctx` for `n_positions`.
    """

    def __init__(self, family, fields, required, extra_keys=(), model_types=(),
                 alternatives=None):
        self.family = family
        self.fields = tuple(fields)
        self.required = tuple(required)
        self.known = frozenset(self.fields) | frozenset(extra_keys)
        self.model_types = tuple(model_types)
        self.alternatives = dict(alternatives or {})
        unknown_required = set(self.required) - set(self.fields)
        if unknown_required:
            raise ValueError("config_schema: required fields %s are not fields of %s"
                             % (sorted(unknown_required), family))

    def check_object(self, values):
        """Raises `ValueError` unless `values` is a JSON object (a dict)."""
        if not isinstance(values, dict):
            raise ValueError("expected a JSON object of %s config fields, got a JSON %s"
                             % (self.family, type(values).__name__))

    def check_model_type(self, values):
        """Raises `ValueError` when `values` has another family's `model_type`."""
        model_type = values.get("model_type")
        if self.model_types and model_type is not None \
                and model_type not in self.model_types:
            raise ValueError("`model_type` is %r, not %s" % (
                model_type, " or ".join(repr(t) for t in self.model_types)))

    def check_keys(self, values):
        """Raises `ValueError` naming every unknown key and its closest known key."""
        unknown = [key for key in values if key not in self.known]
        if not unknown:
            return
        parts = []
        for key in unknown:
            close = difflib.get_close_matches(str(key), sorted(self.known), n=1, cutoff=0.6)
            hint = " (did you mean `%s`?)" % close[0] if close else ""
            parts.append("`%s`%s" % (key, hint))
        raise ValueError("unknown %s config key%s %s; the %s fields are %s" % (
            self.family, "s" if len(unknown) > 1 else "", ", ".join(parts), self.family,
            _quoted(self.fields)))

    def missing(self, values):
        """The required fields `values` lacks (an alternative key counts)."""
        return [name for name in self.required
                if name not in values
                and not any(alt in values for alt in self.alternatives.get(name, ()))]

    def missing_error(self, missing):
        return ValueError("missing required %s field%s %s" % (
            self.family, "s" if len(missing) > 1 else "", _quoted(missing)))

    def read_file(self, path, build, error_class):
        """Reads a local config file: `build(values)` after `self.build`'s checks.

        Raises:
            FileNotFoundError: no such file.
            error_class: not JSON, or the values fail the checks; the one-line
                message names the file.
        """
        path = os.fspath(path)
        if not os.path.isfile(path):
            raise FileNotFoundError("%s config file not found: %s" % (self.family, path))
        try:
            with open(path, encoding="utf-8") as f:
                values = json.load(f)
        except RecursionError as e:
            raise error_class("%s config file %s is not valid JSON: nested too deeply"
                              % (self.family, path)) from e
        except (OSError, ValueError) as e:
            raise error_class("%s config file %s is not valid JSON: %s"
                              % (self.family, path, e)) from e
        try:
            return self.build(values, build, error_class)
        except (error_class, TypeError) as e:
            raise error_class("Invalid %s config file %s: %s" % (self.family, path, e)) from e

    def build(self, values, build, error_class):
        """Checks a parsed file's `values`, then returns `build(values)`.

        Order: a JSON object; the `model_type`; unknown keys; the values
        themselves (`build`, the config class's own checks); missing
        required fields. A `build` error that names a missing field (e.g.
        "`hidden_size` (100) must be a multiple of `num_attention_heads`
        (12)" where the 12 is only a default) becomes the missing-fields
        error, which is what the user has to fix.

        Errors are `error_class` (the family's config error) without the
        file name; the caller adds it.
        """
        try:
            self.check_object(values)
            self.check_model_type(values)
            self.check_keys(values)
        except ValueError as e:
            raise error_class(str(e)) from None
        missing = self.missing(values)
        try:
            config = build(values)
        except (error_class, TypeError) as e:
            if missing and any("`%s`" % name in str(e) for name in missing):
                raise error_class(str(self.missing_error(missing))) from e
            raise
        if missing:
            raise error_class(str(self.missing_error(missing)))
        return config


def config_file_in(path, file_name="config.json"):
    """`path` itself, or `path/file_name` when `path` is a model folder.

    Raises:
        FileNotFoundError: a folder without `file_name`.
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        candidate = os.path.join(path, file_name)
        if not os.path.isfile(candidate):
            raise FileNotFoundError("No %s in directory %s" % (file_name, path))
        return candidate
    return path


def keras_hub_backbone_config(path, backbone, error):
    """The backbone config of a keras-hub preset's `config.json` at `path`, else None.

    A preset's `config.json` names a `keras_hub` class and holds the
    backbone's constructor arguments under `config`; a family's config
    loader reads those with its `HFFormat.keras_hub_config` (so that
    `--bert_config_file=PRESET/config.json` works as the preset's folder
    does). Anything else (another file, unreadable JSON) is None: the
    family's own reader reports it. A preset of another backbone than
    `backbone` (the family's class name) is `error`, one line (the caller
    names the file).
    """
    if os.path.isdir(os.fspath(path)) or not os.path.isfile(os.fspath(path)):
        return None
    try:
        with open(path, encoding="utf-8") as f:
            values = json.load(f)
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(values, dict) or not str(values.get("module", "")).startswith("keras_hub"):
        return None
    if values.get("class_name") != backbone:
        raise error("a keras-hub %s, not a %s" % (values.get("class_name"), backbone))
    config = values.get("config")
    if not isinstance(config, dict):
        raise error("the keras-hub %s has no config object" % backbone)
    return config


def keras_hub_preset_config(path, backbone, config_from_keras_hub, error, label):
    """The family's config of a keras-hub preset's `config.json` at `path`, else None.

    `config_from_keras_hub` builds it from the backbone's values
    (`keras_hub_backbone_config`). A preset of another backbone, or one whose
    values the family refuses, is `error` naming the file:
    ``Invalid keras-hub <label> config <path>: ...``.
    """
    try:
        values = keras_hub_backbone_config(path, backbone, error)
        return None if values is None else config_from_keras_hub(values)
    except (error, TypeError, ValueError) as e:
        raise error("Invalid keras-hub %s config %s: %s" % (label, path, e)) from e
