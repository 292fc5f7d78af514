"""What a family registers to read and write published model folders.

A family whose released weights live in Hugging Face folders registers an
`HFFormat` on its `registry.Family` (`Family.hf`): which `model_type`s of
HF's `config.json` it reads, how HF's config maps to its own and back,
which name table of `Family.name_tables` holds the tensor names, how the
tokenizer of such a folder is read and written, and HF's class names
(`architectures`) of the models it writes. `modeling.pretrained.folders`
tells a folder's family from its `model_type` through these registrations,
so no shared module lists families by name.

Tokenizers of published folders implement `PretrainedTokenizer`
(`modeling.pretrained.tokenizers`): ids equal to HF's tokenizer of the
same folder, special tokens and pair framing included.
"""

import dataclasses
import os
from typing import Callable, Optional

__all__ = ["HFFormat", "TokenizerFormatError", "UnknownModelTypeError",
           "keras_hub_tokenizer_file"]


class TokenizerFormatError(ValueError):
    """A model folder's tokenizer files are missing or unreadable (one line, names the file)."""


def keras_hub_tokenizer_file(folder, name, what):
    """The path of a keras-hub preset's `assets/tokenizer/<name>`.

    Raises:
        TokenizerFormatError: no such file (naming it and `what` it holds).
    """
    path = os.path.join(folder, "assets", "tokenizer", name)
    if not os.path.isfile(path):
        raise TokenizerFormatError("%s: no such file (the keras-hub preset's %s)" % (path, what))
    return path


class UnknownModelTypeError(ValueError):
    """A `config.json` whose `model_type` no registered family reads."""


@dataclasses.dataclass(frozen=True)
class HFFormat:
    """A family's Hugging Face folder format (`Family.hf`).

    Attributes:
        model_types: HF `model_type` values the family reads ("roberta",).
            The first is the one it writes.
        config_from_hf: `dict -> config`: the family's config from HF's
            parsed `config.json` (raises the family's config error, one line).
        config_to_hf: `config -> dict`: HF's `config.json` content for the
            family's config (with `model_type`; `architectures` is added by
            the writer).
        read_tokenizer: `(folder, config) -> PretrainedTokenizer`: the
            tokenizer of an HF folder (`vocab.txt`, `vocab.json` +
            `merges.txt`, `spiece.model`, `tokenizer.json`, with
            `tokenizer_config.json` / `special_tokens_map.json`);
            `TokenizerFormatError` naming the missing file.
        architectures: model role -> HF class name written in
            `architectures`: "encoder" (`RobertaModel`), "masked_lm"
            (`RobertaForMaskedLM`), "causal_lm", "classifier"
            (`RobertaForSequenceClassification`); roles the family lacks
            are absent.
        table: the key of `Family.name_tables` holding HF's names.
        classifier_table: `() -> {HF name: (attribute, transpose)}`: where a
            fine-tuned `BertClassifier`'s head (`output_weights`,
            `output_bias`) goes in HF's `*ForSequenceClassification`, or None
            when that layout is another head (RoBERTa's two-layer one).
        build_classifier: `(config, num_labels) -> model`: a fresh fine-tuned
            classifier of the family that `classifier_table` writes, when it is
            not `BertClassifier` (a run_classifier.py checkpoint is restored
            into it); None: `BertClassifier`.
        with_prefix: the prefix HF's task models put before the encoder's
            names (`roberta.`), used when writing a model with heads.
        keras_hub_backbone: keras-hub's backbone class of the family
            (`BertBackbone`), for preset folders in and out; None: keras-hub
            has none.
        keras_hub_config: `backbone config dict -> config` (the `config` of a
            preset's `config.json`), for presets in.
        keras_hub_tokenizer: `(folder, tokenizer config dict, config) ->
            PretrainedTokenizer` of a preset folder.
        keras_hub_arrays: `{HF name: array} -> {HF name: array}`: the HF
            weights rewritten, exactly, into what keras-hub's converter
            reads (RoBERTa's token-type row, which keras-hub drops, folded
            into the position table); None: as they are.
        keras_hub_weights: `{variable path: array} -> {name: array}`: a
            preset's backbone weights (attention kernels merged to 2-D)
            rewritten, exactly, into what the family's `"keras_hub"` table
            reads (RoBERTa's position rows moved past the padding id, its
            token-type row, which keras-hub lacks, added as zeros); None: as
            they are.
    """

    model_types: tuple
    config_from_hf: Callable
    config_to_hf: Callable
    read_tokenizer: Callable
    architectures: dict = dataclasses.field(default_factory=dict)
    table: str = "hf"
    classifier_table: Optional[Callable] = None
    build_classifier: Optional[Callable] = None
    with_prefix: str = ""
    keras_hub_backbone: Optional[str] = None
    keras_hub_config: Optional[Callable] = None
    keras_hub_tokenizer: Optional[Callable] = None
    keras_hub_arrays: Optional[Callable] = None
    keras_hub_weights: Optional[Callable] = None
