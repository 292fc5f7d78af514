"""The files of a Hugging Face tokenizer folder, written as every family writes them.

* `write_bpe_files`: `vocab.json` (one line, `ensure_ascii=False`) and
  `merges.txt` (a header line, then one `left right` merge a line, each line
  ending in a newline: HF skips the first line and needs the last newline).
* `write_json`: a settings file (`indent=2`, a final newline).
* `write_settings`: `tokenizer_config.json` and `special_tokens_map.json`.

Each returns the paths it wrote, in that order; files are written whole
(`data.atomic`). `read_vocab_json` and `read_merges_lines` read a
`vocab.json` and a `merges.txt` back, with one-line errors.
"""

import json
import os

from data import atomic

__all__ = ["MERGES_HEADER", "read_merges_lines", "read_vocab_json", "write_bpe_files",
           "write_json", "write_settings"]

MERGES_HEADER = "#version: 0.2"


def read_vocab_json(vocab_file, error):
    """Reads a BPE `vocab.json`: a non-empty JSON object token -> non-negative integer id.

    Anything else raises `error` (a `ValueError` class) with a one-line message
    naming the file.
    """
    vocab_file = os.fspath(vocab_file)
    try:
        with open(vocab_file, encoding="utf-8") as f:
            vocab = json.load(f)
    except FileNotFoundError:
        raise error("vocab file not found: %s" % vocab_file) from None
    except (OSError, ValueError) as e:
        raise error("vocab file %s is not readable JSON: %s"
                    % (vocab_file, str(e).partition("\n")[0])) from None
    if not isinstance(vocab, dict) or not vocab:
        raise error("vocab file %s must hold a non-empty JSON object {token: id}" % vocab_file)
    bad = [k for k, v in vocab.items() if isinstance(v, bool) or not isinstance(v, int) or v < 0]
    if bad:
        raise error("vocab file %s: token %r has id %r, not a non-negative integer"
                    % (vocab_file, bad[0], vocab[bad[0]]))
    return vocab


def read_merges_lines(merges_file, error):
    """The lines of a `merges.txt`, split at each newline (a final newline gives a last "");
    a missing or unreadable file raises `error` with a one-line message naming it."""
    try:
        with open(merges_file, encoding="utf-8") as f:
            return f.read().split("\n")
    except FileNotFoundError:
        raise error("merges file not found: %s" % merges_file) from None
    except (OSError, UnicodeDecodeError) as e:
        raise error("merges file %s is not readable UTF-8 text: %s" % (merges_file, e)) from None


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
