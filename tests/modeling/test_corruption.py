"""Randomised corruption: damaged inputs give the right result or one clear error.

Random byte flips, truncations, zeroed spans and inserted bytes (from fixed
seeds, so every failure replays) are applied to the files a run reads:
pre-training TFRecords, model configs, vocabularies, safetensors headers and
TensorFlow checkpoints. Each damaged file goes through what the scripts do
with it, and must end in either

* the correct result (the damage did not matter: the same records, the same
  encoder outputs, the same token ids), or
* an error the scripts report as one line (`run/script.py`'s
  `USER_ERRORS`), whose message names the damaged file,

never a traceback of another kind, never a hang (each case runs under an
alarm), never different numbers without an error.

Not covered, because the formats cannot tell: a flipped byte inside a
safetensors tensor's data (the format has no checksum) and a vocabulary
token changed into another valid token.
"""

import json
import os
import random
import shutil
import signal
import sys

import keras
import numpy as np
import pytest
import safetensors.numpy
import tensorflow as tf

from data import input_pipeline
from data import tfrecord_check
from data import tokenization
from data.pretraining import instances as pretraining_data
from data.pretraining import writer as pretraining_writer
from modeling import checkpoints
from modeling import bert as config_lib
from modeling.bert import BertEncoder
from modeling.checkpoints import name_tables
from modeling.checkpoints import targets
from modeling.serving import inference

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SAMPLE = os.path.join(REPO_ROOT, "data", "sample")
sys.path.insert(0, os.path.join(REPO_ROOT, "run"))
import script  # noqa: E402  pylint: disable=wrong-import-position

SEQ, PRED = 32, 5
CASES_PER_KIND = 40
SECONDS_PER_CASE = 60
TEXT = "The river runs to the sea. 今天天气很好。"


class _Timeout(Exception):
    pass


def _alarm(signum, frame):  # pylint: disable=unused-argument
    raise _Timeout()


def _corrupt(data, rng, region=None):
    """One random kind of damage to `data` (bytes), within `region` (start, end)."""
    data = bytearray(data)
    start, end = region or (0, len(data))
    kind = rng.choice(["flip", "flip", "truncate", "zero", "insert"])
    if kind == "flip":
        for _ in range(rng.randint(1, 3)):
            position = rng.randrange(start, end)
            data[position] ^= 1 << rng.randrange(8)
    elif kind == "truncate":
        del data[rng.randrange(start, end):]
    elif kind == "zero":
        position = rng.randrange(start, end)
        length = rng.randint(1, 16)
        data[position:position + length] = bytes(len(data[position:position + length]))
    else:
        position = rng.randrange(start, end)
        data[position:position] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
    return bytes(data), kind


def _outcome(run, damaged_names):
    """'same' or 'error' (a one-line user error naming a damaged file); fails otherwise."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(SECONDS_PER_CASE)
    try:
        same = run()
    except _Timeout:
        pytest.fail("hang: no result within %d s" % SECONDS_PER_CASE)
    except script.USER_ERRORS as e:
        message = script.one_line(e)
        assert "\n" not in message and message
        assert any(name in message for name in damaged_names), message
        return "error"
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert same, "silent garbage: no error, yet a different result"
    return "same"


@pytest.fixture(scope="module")
def artefacts(tmp_path_factory):
    base = tmp_path_factory.mktemp("corruption")
    vocab = str(base / "vocab.txt")
    shutil.copy(os.path.join(SAMPLE, "vocab.txt"), vocab)
    with open(vocab, encoding="utf-8") as f:
        vocab_size = sum(1 for _ in f)
    record = str(base / "train.tfrecord")
    options = pretraining_data.InstanceOptions(
        vocab_file=vocab, do_lower_case=True, max_seq_length=SEQ,
        max_predictions_per_seq=PRED, random_seed=5, dupe_factor=1, masked_lm_prob=0.15,
        short_seq_prob=0.1)
    pretraining_writer.create_pretraining_data(
        [os.path.join(SAMPLE, "sample_zh.txt")], [record], options)
    config_path = str(base / "bert_config.json")
    with open(config_path, "w") as f:
        json.dump({"attention_probs_dropout_prob": 0.1, "hidden_act": "gelu",
                   "hidden_dropout_prob": 0.1, "hidden_size": 16, "initializer_range": 0.02,
                   "intermediate_size": 32, "max_position_embeddings": SEQ,
                   "num_attention_heads": 2, "num_hidden_layers": 2, "type_vocab_size": 2,
                   "vocab_size": vocab_size}, f, indent=2)
    config = config_lib.load_bert_config(config_path)
    keras.utils.set_random_seed(3)
    encoder = BertEncoder.from_config_object(config)
    tokenizer = tokenization.FullTokenizer(vocab, do_lower_case=True)
    ids = np.array([tokenizer.convert_tokens_to_ids(
        ["[CLS]"] + tokenizer.tokenize(TEXT) + ["[SEP]"])], dtype=np.int32)
    encoder(_inputs(ids))
    prefix = checkpoints.save_google_checkpoint(encoder, str(base / "ckpt" / "bert_model.ckpt"))
    target = targets.find_target(encoder)
    table = name_tables.table_for(target, name_tables.HF_KEY, "test")
    safetensors_path = str(base / "model.safetensors")
    safetensors.numpy.save_file(
        {name: np.ascontiguousarray(value)
         for name, value in name_tables.table_arrays(target, table).items()},
        safetensors_path)
    return dict(base=str(base), vocab=vocab, record=record, config=config_path,
                ckpt=prefix, safetensors=safetensors_path, ids=ids,
                reference=_sequence_output(encoder, ids),
                records=[r.numpy() for r in tf.data.TFRecordDataset(record)])


def _inputs(ids):
    return {"input_ids": ids, "input_mask": np.ones_like(ids),
            "segment_ids": np.zeros_like(ids)}


def _sequence_output(encoder, ids):
    outputs = encoder(_inputs(ids), training=False)
    return np.asarray(outputs["sequence_output"])


def _encode(config_path, checkpoint, ids):
    config = config_lib.load_bert_config(config_path)
    encoder = BertEncoder.from_config_object(config)
    encoder(_inputs(ids))
    checkpoints.init_from_checkpoint(encoder, checkpoint)
    return _sequence_output(encoder, ids)


def _damaged_copy(source, directory, name, rng, region=None):
    with open(source, "rb") as f:
        data = f.read()
    damaged, kind = _corrupt(data, rng, region)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, name)
    with open(path, "wb") as f:
        f.write(damaged)
    return path, kind


def _report(kind_of_file, outcomes):
    print("%s: %s" % (kind_of_file, {o: outcomes.count(o) for o in sorted(set(outcomes))}))
    assert "error" in outcomes  # the damage was noticed at least sometimes


def test_damaged_tfrecords(artefacts):
    rng = random.Random(101)
    expected = {"input_ids": (SEQ, "--max_seq_length"),
                "masked_lm_positions": (PRED, "--max_predictions_per_seq")}
    outcomes = []
    for case in range(CASES_PER_KIND):
        path, _ = _damaged_copy(artefacts["record"], os.path.join(artefacts["base"], "tfr"),
                                "case%d.tfrecord" % case, rng)

        def run():
            tfrecord_check.verify_tfrecord_files([path], expected)
            dataset = input_pipeline.pretraining_dataset(path, SEQ, PRED, 8, False, repeat=False,
                                                         drop_remainder=False)
            batches = list(dataset)
            records = [r.numpy() for r in tf.data.TFRecordDataset(path)]
            return records == artefacts["records"] and sum(
                len(b["input_ids"]) for b in batches) == len(records)

        outcomes.append(_outcome(run, [os.path.basename(path)]))
    _report("tfrecord", outcomes)


def test_damaged_configs(artefacts):
    rng = random.Random(202)
    outcomes = []
    for case in range(CASES_PER_KIND):
        path, _ = _damaged_copy(artefacts["config"], os.path.join(artefacts["base"], "cfg"),
                                "case%d.json" % case, rng)

        def run():
            output = _encode(path, artefacts["ckpt"], artefacts["ids"])
            return np.allclose(output, artefacts["reference"], atol=1e-5)

        outcomes.append(_outcome(run, [os.path.basename(path), "bert_model.ckpt"]))
    _report("config", outcomes)


def test_damaged_vocabularies(artefacts):
    """Truncation, lost lines and foreign bytes; a token changed into another is undetectable."""
    rng = random.Random(303)
    with open(artefacts["vocab"], "rb") as f:
        original = f.read()
    with open(artefacts["config"]) as f:
        config_vocab_size = json.load(f)["vocab_size"]
    reference_ids = tokenization.FullTokenizer(artefacts["vocab"]).convert_tokens_to_ids(
        tokenization.FullTokenizer(artefacts["vocab"]).tokenize(TEXT))
    outcomes = []
    directory = os.path.join(artefacts["base"], "vocab")
    os.makedirs(directory, exist_ok=True)
    for case in range(CASES_PER_KIND):
        lines = original.split(b"\n")
        kind = case % 4
        if kind == 0:
            damaged = original[:rng.randrange(len(original))]
        elif kind == 1:
            del lines[rng.randrange(len(lines) - 1)]
            damaged = b"\n".join(lines)
        elif kind == 2:
            line = rng.randrange(len(lines) - 1)
            column = rng.randrange(len(lines[line]) + 1)
            lines[line] = lines[line][:column] + bytes([rng.choice([0, 1, 7, 27, 127])]) + \
                lines[line][column:]
            damaged = b"\n".join(lines)
        else:
            position = rng.randrange(len(original))
            damaged = original[:position] + bytes([rng.choice([0x80, 0xc3, 0xff])]) + \
                original[position + 1:]
        path = os.path.join(directory, "case%d.txt" % case)
        with open(path, "wb") as f:
            f.write(damaged)

        def run():
            tokenizer = tokenization.FullTokenizer(path, do_lower_case=True)
            inference.check_vocab_fits(len(tokenizer.vocab), config_vocab_size, path)
            ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(TEXT))
            return ids == reference_ids

        outcomes.append(_outcome(run, [os.path.basename(path)]))
    _report("vocab", outcomes)


def test_damaged_safetensors_headers(artefacts):
    """Damage in the 8-byte length and the JSON header (the data has no checksum)."""
    rng = random.Random(404)
    with open(artefacts["safetensors"], "rb") as f:
        header_end = 8 + int.from_bytes(f.read(8), "little")
    outcomes = []
    for case in range(CASES_PER_KIND):
        path, _ = _damaged_copy(artefacts["safetensors"], os.path.join(artefacts["base"], "st"),
                                "case%d.safetensors" % case, rng, region=(0, header_end))

        def run():
            output = _encode(artefacts["config"], path, artefacts["ids"])
            return np.allclose(output, artefacts["reference"], atol=1e-5)

        outcomes.append(_outcome(run, [os.path.basename(path)]))
    _report("safetensors", outcomes)


def test_damaged_tf_checkpoints(artefacts):
    """Damage anywhere in a checkpoint's data or index file (both carry checksums)."""
    rng = random.Random(505)
    source_dir = os.path.dirname(artefacts["ckpt"])
    outcomes = []
    for case in range(CASES_PER_KIND):
        directory = os.path.join(artefacts["base"], "ckpt_case%d" % case)
        shutil.copytree(source_dir, directory)
        suffix = ".index" if case % 2 else ".data-00000-of-00001"
        victim = os.path.join(directory, "bert_model.ckpt" + suffix)
        damaged, _ = _damaged_copy(victim, directory, "tmp", rng)
        os.replace(damaged, victim)
        prefix = os.path.join(directory, "bert_model.ckpt")

        def run():
            output = _encode(artefacts["config"], prefix, artefacts["ids"])
            return np.allclose(output, artefacts["reference"], atol=1e-5)

        outcomes.append(_outcome(run, ["ckpt_case%d" % case]))
    _report("checkpoint", outcomes)
