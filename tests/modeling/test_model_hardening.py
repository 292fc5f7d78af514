"""Bad input refused at the start, in one line: TFRecord inputs
(`data.tfrecord_check`, the static-masked pipeline, the pre-training job) and
training values (`modeling.training.validation`)."""

import math
import os
import random
import shutil

import pytest
import tensorflow as tf

from data import tfrecord_check
from modeling import recipes
from modeling.bert.config import BertConfig
from modeling.recipes import pretraining
from modeling.recipes.pipelines.base import PipelineOptions
from modeling.training import validation

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# Google's create_pretraining_data.py output: 231 records, --max_seq_length=64,
# --max_predictions_per_seq=10 (tests/data/google_reference/README.md).
GOOGLE_TFRECORD = os.path.join(REPO_ROOT, "tests", "data", "google_reference",
                               "google_output.tfrecord")
GOOGLE_RECORDS = 231


@pytest.fixture(scope="module")
def google_bytes():
    with open(GOOGLE_TFRECORD, "rb") as f:
        return f.read()


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


# ------------------------------------------------------------------ framing


def test_counts_records_like_tf_data_and_checks_the_checksums(tmp_path):
    assert tfrecord_check.verify_tfrecord_files(GOOGLE_TFRECORD) == {
        GOOGLE_TFRECORD: GOOGLE_RECORDS}
    assert sum(1 for _ in tf.data.TFRecordDataset(GOOGLE_TFRECORD)) == GOOGLE_RECORDS
    # The checksum TFRecord writers store, against one written by TensorFlow.
    path = str(tmp_path / "one.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(b"hello")
    with open(path, "rb") as f:
        raw = f.read()
    assert int.from_bytes(raw[8:12], "little") == tfrecord_check.masked_crc32c(raw[:8])
    assert int.from_bytes(raw[-4:], "little") == tfrecord_check.masked_crc32c(b"hello")
    scan = tfrecord_check.scan_tfrecord_file(path)
    assert (scan.records, scan.size, scan.first_record) == (1, 21, b"hello")


@pytest.mark.parametrize("cut, where", [
    (5, "record 0 at byte 0: the file ends inside the record's 12-byte header"),
    (12, "record 0 at byte 0: a record of"),
    (300, "record 0 at byte 0: a record of"),
    (-1, "record 230 at byte 111602: a record of 483 bytes runs past the end of the file"),
])
def test_a_file_cut_inside_a_record_is_refused(tmp_path, google_bytes, cut, where):
    path = _write(tmp_path / "cut.tfrecord", google_bytes[:cut])
    with pytest.raises(tfrecord_check.TFRecordCheckError) as info:
        tfrecord_check.verify_tfrecord_files(path)
    message = str(info.value)
    assert message.startswith(path + ": truncated or not a TFRecord file (" + where)
    assert "\n" not in message


def test_a_file_that_is_no_tfrecord_file_is_refused(tmp_path, google_bytes):
    text = _write(tmp_path / "text.tfrecord", "one sentence per line\n".encode() * 20)
    noise = _write(tmp_path / "noise.tfrecord",
                   bytes(random.Random(0).randrange(256) for _ in range(4096)))
    # Whole records followed by something else.
    tail = _write(tmp_path / "tail.tfrecord", google_bytes + b"\n" * 40)
    for path, where in ((text, "record 0 at byte 0: the length's checksum does not match"),
                        (noise, "record 0 at byte 0:"),
                        (tail, "record 231 at byte 112101: the length's checksum")):
        with pytest.raises(tfrecord_check.TFRecordCheckError,
                           match="truncated or not a TFRecord file") as info:
            tfrecord_check.verify_tfrecord_files([path])
        assert str(info.value).startswith(path + ": truncated or not a TFRecord file ("
                                          + where)


def test_empty_files_warn_and_all_empty_is_an_error(tmp_path, caplog):
    empty = _write(tmp_path / "empty-0.tfrecord", b"")
    full = str(tmp_path / "full-1.tfrecord")
    shutil.copy(GOOGLE_TFRECORD, full)
    with caplog.at_level("WARNING"):
        counts = tfrecord_check.verify_tfrecord_files(str(tmp_path / "*.tfrecord"))
    assert counts == {empty: 0, full: GOOGLE_RECORDS}
    assert "%s: no records" % empty in caplog.text
    with pytest.raises(tfrecord_check.TFRecordCheckError) as info:
        tfrecord_check.verify_tfrecord_files(empty)
    assert str(info.value) == "%s: no records (every input file is empty)" % empty


def test_remote_paths_go_through_gfile(google_bytes):
    tf.io.gfile.makedirs("ram://hardening")
    for name, data in (("whole.tfrecord", google_bytes), ("cut.tfrecord", google_bytes[:-3])):
        with tf.io.gfile.GFile("ram://hardening/" + name, "wb") as f:
            f.write(data)
    assert tfrecord_check.verify_tfrecord_files(
        "ram://hardening/whole.tfrecord", {"input_ids": (64, "--max_seq_length")}) == {
            "ram://hardening/whole.tfrecord": GOOGLE_RECORDS}
    with pytest.raises(tfrecord_check.TFRecordCheckError,
                       match="ram://hardening/cut.tfrecord: truncated or not a TFRecord"):
        tfrecord_check.verify_tfrecord_files("ram://hardening/*.tfrecord")


# ----------------------------------------------------------------- features


def test_feature_lengths_kinds_and_names_are_checked_on_the_first_record(tmp_path):
    with pytest.raises(tfrecord_check.TFRecordCheckError) as info:
        tfrecord_check.verify_tfrecord_files(
            GOOGLE_TFRECORD, {"input_ids": (128, "--max_seq_length"),
                              "masked_lm_positions": (10, "--max_predictions_per_seq")})
    assert str(info.value) == (
        "%s: input_ids has 64 values per example but --max_seq_length=128 (the file was "
        "written with --max_seq_length=64?)" % GOOGLE_TFRECORD)
    with pytest.raises(tfrecord_check.TFRecordCheckError,
                       match="next_sentence_labels has 1 values per example, expected 2"):
        tfrecord_check.verify_tfrecord_files(GOOGLE_TFRECORD, {"next_sentence_labels": 2})
    with pytest.raises(tfrecord_check.TFRecordCheckError,
                       match="masked_lm_weights holds float values, expected int64"):
        tfrecord_check.verify_tfrecord_files(GOOGLE_TFRECORD,
                                             {"masked_lm_weights": (10, None, "int64")})
    with pytest.raises(tfrecord_check.TFRecordCheckError) as info:
        tfrecord_check.verify_tfrecord_files(GOOGLE_TFRECORD, {"label_ids": 1, "input_ids": 64,
                                                               "is_real_example": 1})
    assert str(info.value).startswith(
        "%s: features label_ids, is_real_example missing from its examples (they have: "
        "input_ids, input_mask, masked_lm_ids" % GOOGLE_TFRECORD)
    # A record that is no tf.train.Example.
    path = str(tmp_path / "strings.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(b"\xff\xff\xff not a protocol buffer")
    with pytest.raises(tfrecord_check.TFRecordCheckError,
                       match="strings.tfrecord: the first record is not a tf.train.Example"):
        tfrecord_check.verify_tfrecord_files(path, {"input_ids": 64})


# --------------------------------------------------------------- pipelines


def _pipeline(recipe, max_seq_length=64, max_predictions_per_seq=10, **options):
    return recipes.load_recipe(recipe).build_pipeline(PipelineOptions(
        max_seq_length=max_seq_length, max_predictions_per_seq=max_predictions_per_seq,
        **options))


def test_the_static_masked_pipeline_checks_its_tfrecords_against_the_flags(
        tmp_path, google_bytes, sample_corpus_files, sample_vocab_file):
    _pipeline("bert").check_inputs(GOOGLE_TFRECORD)
    with pytest.raises(ValueError, match="input_ids has 64 values per example but "
                                         "--max_seq_length=128"):
        _pipeline("bert", max_seq_length=128).check_inputs(GOOGLE_TFRECORD)
    with pytest.raises(ValueError, match="masked_lm_positions has 10 values per example but "
                                         r"--max_predictions_per_seq=20 \(the file was "
                                         "written with --max_predictions_per_seq=10"):
        _pipeline("bert", max_predictions_per_seq=20).check_inputs(GOOGLE_TFRECORD)
    cut = _write(tmp_path / "cut.tfrecord", google_bytes[:1000])
    with pytest.raises(ValueError, match="cut.tfrecord: truncated or not a TFRecord file"):
        _pipeline("bert").check_inputs(GOOGLE_TFRECORD + "," + cut)
    # Raw-text pipelines read text: no TFRecord check.
    _pipeline("roberta", vocab_file=sample_vocab_file).check_inputs(
        ",".join(sample_corpus_files))


def test_the_pretraining_job_refuses_bad_tfrecords_before_training(tmp_path, google_bytes):
    vocab_size = sum(1 for _ in open(os.path.join(pretraining.SAMPLE_DIR, "vocab.txt")))
    BertConfig(vocab_size=vocab_size, hidden_size=16, num_hidden_layers=1,
               num_attention_heads=2, intermediate_size=32, max_position_embeddings=128,
               type_vocab_size=2).to_json_file(str(tmp_path / "bert_config.json"))
    empty = _write(tmp_path / "empty.tfrecord", b"")
    cut = _write(tmp_path / "cut.tfrecord", google_bytes[:-1])

    def job(input_file, **changes):
        values = dict(
            input_file=input_file, output_dir=str(tmp_path / "out"),
            bert_config_file=str(tmp_path / "bert_config.json"), do_train=True,
            num_train_steps=2, num_warmup_steps=0, train_batch_size=2, eval_batch_size=2,
            max_eval_steps=1, max_seq_length=64, max_predictions_per_seq=10)
        values.update(changes)
        return pretraining.PretrainingJob(**values)

    with pytest.raises(ValueError, match="input_ids has 64 values per example but "
                                         "--max_seq_length=128"):
        pretraining.run(job(GOOGLE_TFRECORD, max_seq_length=128))
    with pytest.raises(ValueError, match="empty.tfrecord: no records"):
        pretraining.run(job(empty))
    with pytest.raises(ValueError, match="cut.tfrecord: truncated or not a TFRecord file"):
        pretraining.run(job(GOOGLE_TFRECORD, eval_input_file=cut, do_eval=True))
    assert not tf.io.gfile.glob(str(tmp_path / "out" / "ckpt*"))


# ------------------------------------------------------- training values


@pytest.mark.parametrize("values, message", [
    (dict(do_train=True, learning_rate=math.nan),
     "--learning_rate=nan: expected a finite positive number"),
    (dict(do_train=True, learning_rate=math.inf),
     "--learning_rate=inf: expected a finite positive number"),
    (dict(do_train=True, learning_rate=0.0),
     "--learning_rate=0.0: expected a finite positive number"),
    (dict(do_train=False, learning_rate=-1e-4),
     "--learning_rate=-0.0001: expected a finite number >= 0"),
    (dict(do_train=True, learning_rate="5e-5"),
     "--learning_rate=5e-5: expected a finite positive number"),
    (dict(do_train=True, train_batch_size=0), "--train_batch_size=0: expected a positive integer"),
    (dict(do_train=False, eval_batch_size=-8), "--eval_batch_size=-8: expected a positive integer"),
    (dict(do_train=False, predict_batch_size=2.5),
     "--predict_batch_size=2.5: expected a positive integer"),
    (dict(do_train=True, train_batch_size=True),
     "--train_batch_size=True: expected a positive integer"),
    (dict(do_train=True, num_train_steps=0),
     "--num_train_steps=0 with --do_train: expected a positive integer"),
    (dict(do_train=False, num_train_steps=-1), "--num_train_steps=-1: expected an integer >= 0"),
    (dict(do_train=True, num_warmup_steps=-10), "--num_warmup_steps=-10: expected an integer >= 0"),
    (dict(do_train=True, save_checkpoints_steps=0),
     "--save_checkpoints_steps=0: expected a positive integer"),
    (dict(do_train=True, gradient_accumulation_steps=0),
     "--gradient_accumulation_steps=0: expected a positive integer"),
    (dict(do_train=True, keep_checkpoint_max=0),
     "--keep_checkpoint_max=0: expected a positive integer"),
    (dict(do_train=True, log_steps=0), "--log_steps=0: expected a positive integer"),
    (dict(do_train=False, do_eval=True, max_eval_steps=0),
     "--max_eval_steps=0 with --do_eval: expected a positive integer"),
    (dict(do_train=True, num_train_epochs=0.0),
     "--num_train_epochs=0.0 with --do_train: expected a finite positive number"),
    (dict(do_train=True, num_train_epochs=math.nan),
     "--num_train_epochs=nan with --do_train: expected a finite positive number"),
    (dict(do_train=True, warmup_proportion=1.5),
     "--warmup_proportion=1.5: expected a number in [0, 1]"),
])
def test_unusable_training_values_name_the_flag(values, message):
    with pytest.raises(validation.TrainingValueError) as info:
        validation.validate_training_values(**values)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


def test_usable_training_values_pass():
    # The pre-training job's defaults, training and evaluating.
    job = pretraining.PretrainingJob(do_train=True, do_eval=True)
    validation.validate_training_values(
        do_train=job.do_train, do_eval=job.do_eval, learning_rate=job.learning_rate,
        num_train_steps=job.num_train_steps, num_warmup_steps=job.num_warmup_steps,
        train_batch_size=job.train_batch_size, eval_batch_size=job.eval_batch_size,
        save_checkpoints_steps=job.save_checkpoints_steps,
        gradient_accumulation_steps=job.gradient_accumulation_steps,
        max_eval_steps=job.max_eval_steps, keep_checkpoint_max=job.keep_checkpoint_max,
        log_steps=job.log_steps)
    # Evaluation only: no training steps, no epochs, a zero learning rate.
    validation.validate_training_values(do_train=False, do_eval=True, learning_rate=0.0,
                                        num_train_steps=0, num_train_epochs=0.0,
                                        max_eval_steps=10)
    # Fine-tuning's settings; numpy integers are integers.
    import numpy as np  # pylint: disable=g-import-not-at-top
    validation.validate_training_values(do_train=True, learning_rate=2e-5,
                                        num_train_epochs=3.0, warmup_proportion=0.1,
                                        train_batch_size=np.int64(32), predict_batch_size=8)
