"""Published models in and out: one folder is enough.

    from modeling.pretrained import from_pretrained, save_pretrained
    model, tokenizer = from_pretrained("roberta-base/")        # an HF folder
    ids, segments = tokenizer.encode("Hello world", "Second sentence")
    outputs = model({"input_ids": [ids], "segment_ids": [segments]})
    save_pretrained(model, tokenizer, "out/", output_format="hf")   # AutoModel reads it

`from_pretrained` accepts an HF model folder, a keras-hub preset folder, a
Google release folder or this project's own output directory
(`modeling.pretrained.folders`), finds the family, config, weights and
tokenizer there, builds the family's encoder (or a pretrainer with the
named objectives' heads) and loads the weights with the same checks as
every `--init_checkpoint` (`modeling.checkpoints.init_from_checkpoint`).
`save_pretrained` writes HF, keras-hub or Google folders
(`modeling.pretrained.export`).
"""

from modeling.pretrained.folders import FolderError
from modeling.pretrained.folders import ModelFolder
from modeling.pretrained.folders import inspect
from modeling.pretrained.formats import HFFormat
from modeling.pretrained.formats import TokenizerFormatError
from modeling.pretrained.formats import UnknownModelTypeError
from modeling.pretrained.loading import Pretrained
from modeling.pretrained.loading import from_pretrained
from modeling.pretrained.loading import load_pretrained

__all__ = ["FolderError", "HFFormat", "ModelFolder", "Pretrained", "TokenizerFormatError",
           "UnknownModelTypeError", "from_pretrained", "inspect", "load_pretrained",
           "save_pretrained"]


def save_pretrained(*args, **kwargs):
    """`modeling.pretrained.export.save_pretrained` (imported on use: it needs more packages)."""
    from modeling.pretrained import export  # pylint: disable=import-outside-toplevel
    return export.save_pretrained(*args, **kwargs)
