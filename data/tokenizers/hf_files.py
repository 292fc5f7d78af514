"""The files of a Hugging Face tokenizer folder, written as every family writes them.

* `write_bpe_files`: `vocab.json` (one line, `ensure_ascii=False`) and
  `merges.txt` (a header line, then one `left right` merge a line, each line
  ending in a newline: HF skips the first line and needs the last newline).
* `write_json`: a settings file (`indent=2`, a final newline).
* `write_settings`: `tokenizer_config.json` and `special_tokens_map.json`.

Each returns the paths it wrote, in that order; files are written whole
(`data.atomic`).
"""

import json
import os

from data import atomic

__all__ = ["MERGES_HEADER", "write_bpe_files", "write_json", "write_settings"]

MERGES_HEADER = "#version: 0.2"


def write_bpe_files(folder, vocab, merges, header=MERGES_HEADER):
    """Writes `vocab.json` (token -> id) and `merges.txt` (`[(left, right), ...]`)."""
    vocab_path = os.path.join(folder, "vocab.json")
    atomic.write_text(vocab_path, json.dumps(vocab, ensure_ascii=False) + "\n")
    merges_path = os.path.join(folder, "merges.txt")
    atomic.write_text(merges_path, header + "\n" + "".join("%s %s\n" % pair for pair in merges))
    return [vocab_path, merges_path]


def write_json(folder, name, values, ensure_ascii=True):
    """Writes `values` to `folder/name` as indented JSON; returns the path."""
    path = os.path.join(folder, name)
    atomic.write_text(path, json.dumps(values, indent=2, ensure_ascii=ensure_ascii) + "\n")
    return path


def write_settings(folder, settings, special_map, ensure_ascii=True):
    """Writes `tokenizer_config.json` (`settings`) and `special_tokens_map.json`."""
    return [write_json(folder, "tokenizer_config.json", settings, ensure_ascii),
            write_json(folder, "special_tokens_map.json", special_map, ensure_ascii)]
