"""Fine-tuning data: GLUE/XNLI layouts, conversion, TFRecords, errors, user processors."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from data import processors
from data import tokenization

from conftest import write_lines

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat",
         "a", "dog", "ran", "far", "away", ",", ".", "un", "##happy", "red", "blue"]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = write_lines(tmp_path_factory.mktemp("vocab") / "vocab.txt", VOCAB)
    return tokenization.FullTokenizer(path, do_lower_case=True)


def _ids(*tokens):
    return [VOCAB.index(t) for t in tokens]


# ------------------------------------------------------------ GLUE layouts


def test_mrpc_layout(tmp_path):
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"
    write_lines(tmp_path / "train.tsv", [header, "1\t11\t12\tThe cat sat.\tA cat sat.",
                                         "0\t13\t14\tA dog ran.\tThe mat."])
    write_lines(tmp_path / "dev.tsv", [header, "1\t1\t2\tx\ty"])
    write_lines(tmp_path / "test.tsv", ["index\t#1 ID\t#2 ID\t#1 String\t#2 String",
                                        "0\t5\t6\tred\tblue"])
    p = processors.MrpcProcessor()
    train = p.get_train_examples(str(tmp_path))
    assert [(e.guid, e.text_a, e.text_b, e.label) for e in train] == [
        ("train-1", "The cat sat.", "A cat sat.", "1"), ("train-2", "A dog ran.", "The mat.", "0")]
    assert train[0].source == "%s:2" % (tmp_path / "train.tsv")
    assert [(e.guid, e.label) for e in p.get_dev_examples(str(tmp_path))] == [("dev-1", "1")]
    test = p.get_test_examples(str(tmp_path))
    assert [(e.guid, e.text_a, e.text_b, e.label) for e in test] == [("test-1", "red", "blue", "0")]
    assert p.get_labels() == ["0", "1"] and p.eval_metrics == ("accuracy", "f1")


def test_cola_layout(tmp_path):
    # Train/dev have no header; test has one.
    write_lines(tmp_path / "train.tsv", ["gj04\t1\t\tThe cat sat.", "gj04\t0\t*\tCat the sat."])
    write_lines(tmp_path / "test.tsv", ["index\tsentence", "0\tA dog ran."])
    p = processors.ColaProcessor()
    train = p.get_train_examples(str(tmp_path))
    assert [(e.guid, e.text_a, e.text_b, e.label) for e in train] == [
        ("train-0", "The cat sat.", None, "1"), ("train-1", "Cat the sat.", None, "0")]
    test = p.get_test_examples(str(tmp_path))
    assert [(e.guid, e.text_a, e.label) for e in test] == [("test-1", "A dog ran.", "0")]
    assert p.eval_metrics == ("accuracy", "mcc")


def test_mnli_layout(tmp_path):
    cols = ["index", "promptID", "pairID", "genre", "s1bp", "s2bp", "s1p", "s2p",
            "sentence1", "sentence2", "label1", "gold_label"]
    row = ["7", "p", "q", "fiction", "", "", "", "", "The cat sat.", "A cat sat.", "neutral",
           "entailment"]
    write_lines(tmp_path / "train.tsv", ["\t".join(cols), "\t".join(row)])
    write_lines(tmp_path / "dev_matched.tsv", ["\t".join(cols), "\t".join(row)])
    write_lines(tmp_path / "dev_mismatched.tsv", ["\t".join(cols), "\t".join(row[:-1] + ["neutral"])])
    write_lines(tmp_path / "test_matched.tsv", ["\t".join(cols[:10]), "\t".join(row[:10])])
    p = processors.MnliProcessor()
    (ex,) = p.get_train_examples(str(tmp_path))
    assert (ex.guid, ex.text_a, ex.text_b, ex.label) == ("train-7", "The cat sat.", "A cat sat.",
                                                         "entailment")
    assert p.get_dev_examples(str(tmp_path))[0].guid == "dev-7"
    (test,) = p.get_test_examples(str(tmp_path))
    assert (test.guid, test.label) == ("test-7", "contradiction")
    mm = processors.get_processor_class("MNLI-MM")()
    assert mm.get_dev_examples(str(tmp_path))[0].label == "neutral"


def test_xnli_layout(tmp_path):
    os.makedirs(tmp_path / "multinli")
    write_lines(tmp_path / "multinli" / "multinli.train.zh.tsv",
                ["premise\thypo\tlabel", "猫坐着\t猫\tcontradictory", "狗\t狗跑\tentailment"])
    dev = ["language\tgold_label\ts1bp\ts2bp\ts1p\ts2p\tsentence1\tsentence2",
           "en\tneutral\t\t\t\t\tThe cat.\tA cat.", "zh\tneutral\t\t\t\t\t猫\t一只猫"]
    write_lines(tmp_path / "xnli.dev.tsv", dev)
    p = processors.XnliProcessor()
    train = p.get_train_examples(str(tmp_path))
    assert [(e.guid, e.text_a, e.text_b, e.label) for e in train] == [
        ("train-1", "猫坐着", "猫", "contradiction"), ("train-2", "狗", "狗跑", "entailment")]
    (ex,) = p.get_dev_examples(str(tmp_path))
    assert (ex.guid, ex.text_a, ex.text_b, ex.label) == ("dev-2", "猫", "一只猫", "neutral")
    assert [e.guid for e in processors.XnliProcessor("en").get_dev_examples(str(tmp_path))] == ["dev-1"]


def test_sst2_qqp_stsb_layouts(tmp_path):
    sst, qqp, sts = (tmp_path / n for n in ("SST-2", "QQP", "STS-B"))
    for d in (sst, qqp, sts):
        os.makedirs(d)
    write_lines(sst / "train.tsv", ["sentence\tlabel", "a red cat \t1"])
    write_lines(sst / "test.tsv", ["index\tsentence", "3\ta blue dog"])
    p = processors.get_processor_class("SST-2")()
    assert [(e.text_a, e.label) for e in p.get_train_examples(str(sst))] == [("a red cat ", "1")]
    assert [(e.guid, e.text_a) for e in p.get_test_examples(str(sst))] == [("test-3", "a blue dog")]

    write_lines(qqp / "dev.tsv", ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate",
                                  "9\t1\t2\tWhy?\tHow?\t0"])
    write_lines(qqp / "test.tsv", ["id\tquestion1\tquestion2", "4\tWhat?\tWho?"])
    p = processors.get_processor_class("qqp")()
    (ex,) = p.get_dev_examples(str(qqp))
    assert (ex.guid, ex.text_a, ex.text_b, ex.label) == ("dev-9", "Why?", "How?", "0")
    (ex,) = p.get_test_examples(str(qqp))
    assert (ex.guid, ex.text_a, ex.text_b) == ("test-4", "What?", "Who?")

    header = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2\tscore"
    write_lines(sts / "train.tsv", [header, "0\tmain\tf\t2012\t1\tnone\tnone\tA cat.\tThe cat.\t4.2"])
    write_lines(sts / "test.tsv", [header.rsplit("\t", 1)[0], "0\tmain\tf\t2012\t1\tn\tn\tA.\tB."])
    p = processors.get_processor_class("sts-b")()
    assert p.task_type == processors.REGRESSION and p.get_labels() is None
    (ex,) = p.get_train_examples(str(sts))
    assert (ex.text_a, ex.text_b, ex.label) == ("A cat.", "The cat.", 4.2)
    assert p.get_test_examples(str(sts))[0].label == 0.0
    write_lines(sts / "dev.tsv", [header, "0\tmain\tf\t2012\t1\tnone\tnone\tA.\tB.\thigh"])
    with pytest.raises(processors.DataError, match=r"dev\.tsv:2: the label 'high' is not a number"):
        p.get_dev_examples(str(sts))
    for score in ("nan", "inf", "-Infinity"):
        write_lines(sts / "dev.tsv", [header, "0\tmain\tf\t2012\t1\tn\tn\tA.\tB.\t" + score])
        with pytest.raises(processors.DataError,
                           match=r"dev\.tsv:2: the label '%s' is not a finite number" % score):
            p.get_dev_examples(str(sts))


def test_read_tsv_keeps_quotes_and_knows_lines(tmp_path):
    path = write_lines(tmp_path / "x.tsv", ['a "quoted\tb', "", "c\td"])
    rows = processors.DataProcessor._read_tsv(path)
    assert rows == [['a "quoted', "b"], ["c", "d"]]
    assert [r.line_number for r in rows] == [1, 3] and rows[1].location == path + ":3"
    csv_path = write_lines(tmp_path / "x.csv", ['"multi', 'line",2', "x,3"])
    rows = processors.DataProcessor._read_csv(csv_path)
    assert rows == [["multi\nline", "2"], ["x", "3"]] and [r.line_number for r in rows] == [1, 3]


# ----------------------------------------------------------------- registry


def test_task_names_and_unknown_task():
    for name, cls in (("cola", processors.ColaProcessor), ("MRPC", processors.MrpcProcessor),
                      ("mnli", processors.MnliProcessor), ("XNLI", processors.XnliProcessor),
                      ("sst2", processors.Sst2Processor), ("qqp", processors.QqpProcessor),
                      ("STSB", processors.StsbProcessor), ("generic", processors.GenericProcessor),
                      ("ids", processors.IdsProcessor)):
        assert processors.get_processor_class(name) is cls
    with pytest.raises(processors.ProcessorError, match="Task not found: boolq.*cola"):
        processors.get_processor_class("boolq")


USER_PROCESSOR = '''
import os
from data import processors


class MyProcessor(processors.DataProcessor):
    """Reads "label<TAB>text" lines."""

    def _examples(self, data_dir, name):
        examples = []
        for row in self._read_tsv(os.path.join(data_dir, name + ".tsv")):
            label = self._check_label(self._field(row, 0, "2 columns: label, text"), row)
            examples.append(processors.InputExample(
                "%s-%d" % (name, row.line_number), self._field(row, 1, "2 columns: label, text"),
                label=label, source=row.location))
        return examples

    def get_train_examples(self, data_dir):
        return self._examples(data_dir, "train")

    def get_dev_examples(self, data_dir):
        return self._examples(data_dir, "dev")

    def get_test_examples(self, data_dir):
        return self._examples(data_dir, "test")

    def get_labels(self):
        return ["pos", "neg"]
'''


def test_user_processor_loaded_from_a_file(tmp_path):
    module = tmp_path / "elsewhere" / "my_task.py"
    os.makedirs(module.parent)
    module.write_text(USER_PROCESSOR)
    cls = processors.get_processor_class(task_name="ignored", processor="%s:MyProcessor" % module)
    assert cls.__name__ == "MyProcessor" and issubclass(cls, processors.DataProcessor)
    write_lines(tmp_path / "train.tsv", ["pos\tthe cat sat", "neg\ta dog ran"])
    examples = cls().get_train_examples(str(tmp_path))
    assert [(e.guid, e.text_a, e.label) for e in examples] == [
        ("train-1", "the cat sat", "pos"), ("train-2", "a dog ran", "neg")]
    write_lines(tmp_path / "dev.tsv", ["pos\tok", "maybe\tbad"])
    with pytest.raises(processors.DataError) as e:
        cls().get_dev_examples(str(tmp_path))
    assert "dev.tsv:2: label 'maybe' is not one of the labels of this task: 'pos', 'neg'" in str(e.value)

    with pytest.raises(processors.ProcessorError, match="defines no 'Other'.*MyProcessor"):
        processors.load_processor_class("%s:Other" % module)
    with pytest.raises(processors.ProcessorError, match="does not exist"):
        processors.load_processor_class("%s:MyProcessor" % (tmp_path / "missing.py"))
    with pytest.raises(processors.ProcessorError, match="path/to/file.py:ClassName"):
        processors.load_processor_class(str(module))
    broken = tmp_path / "broken.py"
    broken.write_text("x = 1\ndef f(:\n")
    with pytest.raises(processors.ProcessorError, match=r"broken\.py:2.*SyntaxError"):
        processors.load_processor_class("%s:X" % broken)
    failing = tmp_path / "failing.py"
    failing.write_text("import os\nraise RuntimeError('no config')\n")
    with pytest.raises(processors.ProcessorError, match=r"failing\.py:2\).*RuntimeError: no config"):
        processors.load_processor_class("%s:X" % failing)
    # A module path works too.
    assert processors.load_processor_class("data.processors:ColaProcessor") is processors.ColaProcessor


# -------------------------------------------------------------- bad input


def test_malformed_rows_and_bad_labels_name_file_and_line(tmp_path):
    header = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"
    write_lines(tmp_path / "train.tsv", [header, "1\t1\t2\ta\tb", "0\t3\tonly three"])
    with pytest.raises(processors.DataError) as e:
        processors.MrpcProcessor().get_train_examples(str(tmp_path))
    message = str(e.value)
    assert "train.tsv:3" in message and "5 columns: Quality" in message and "has 3 column(s)" in message

    write_lines(tmp_path / "dev.tsv", [header, "1\t1\t2\ta\tb", "yes\t1\t2\ta\tb"])
    with pytest.raises(processors.DataError) as e:
        processors.MrpcProcessor().get_dev_examples(str(tmp_path))
    assert "dev.tsv:3: label 'yes' is not one of the labels of this task: '0', '1'" in str(e.value)

    with pytest.raises(processors.DataError, match="does not exist"):
        processors.MrpcProcessor().get_test_examples(str(tmp_path))
    (tmp_path / "bad.tsv").write_bytes(b"ok\n\xff\xfe\n")
    with pytest.raises(processors.DataError, match=r"bad\.tsv:2: not valid UTF-8"):
        processors.DataProcessor._read_tsv(str(tmp_path / "bad.tsv"))


def test_conversion_rejects_unknown_labels_naming_the_example(tokenizer):
    example = processors.InputExample("dev-4", "the cat", label="2", source="dev.tsv:5")
    with pytest.raises(processors.DataError) as e:
        processors.convert_single_example(0, example, ["0", "1"], 16, tokenizer)
    assert "example dev-4 (dev.tsv:5): label '2' is not one of the labels of this task: '0', '1'" in str(e.value)


# -------------------------------------------------------------- conversion


def test_truncate_seq_pair_pops_from_the_longer_one_at_the_end():
    a, b = list("abcdef"), list("xyz")
    processors._truncate_seq_pair(a, b, 6)
    assert (a, b) == (list("abc"), list("xyz"))
    a, b = list("abcd"), list("wxyz")
    processors._truncate_seq_pair(a, b, 5)  # equal lengths: b loses first
    assert (a, b) == (list("abc"), list("wx"))
    a, b = list("ab"), list("vwxyz")
    processors._truncate_seq_pair(a, b, 10)
    assert (a, b) == (list("ab"), list("vwxyz"))
    a, b = list("abc"), list("xyz")
    processors._truncate_seq_pair(a, b, 0)
    assert (a, b) == ([], [])


def test_convert_pair_and_single_with_truncation(tokenizer):
    pair = processors.InputExample("t-1", "The cat sat on the mat.", "A dog ran", label="1")
    f = processors.convert_single_example(0, pair, ["0", "1"], 10, tokenizer)
    # 7 tokens budget: a = the cat sat on the mat . (7), b = a dog ran (3) -> a loses 3.
    assert f.input_ids == _ids("[CLS]", "the", "cat", "sat", "on", "[SEP]", "a", "dog", "ran", "[SEP]")
    assert f.segment_ids == [0] * 6 + [1] * 4
    assert f.input_mask == [1] * 10 and f.label_id == 1 and f.is_real_example

    single = processors.InputExample("t-2", "Unhappy red cat", label="0")
    f = processors.convert_single_example(1, single, ["0", "1"], 8, tokenizer)
    assert f.input_ids == _ids("[CLS]", "un", "##happy", "red", "cat", "[SEP]") + [0, 0]
    assert f.input_mask == [1] * 6 + [0, 0] and f.segment_ids == [0] * 8 and f.label_id == 0
    f = processors.convert_single_example(2, single, ["0", "1"], 4, tokenizer)
    assert f.input_ids == _ids("[CLS]", "un", "##happy", "[SEP]")

    pad = processors.convert_single_example(3, processors.PaddingInputExample(), ["0", "1"], 5, tokenizer)
    assert pad.input_ids == [0] * 5 and pad.label_id == 0 and not pad.is_real_example

    unlabeled = processors.InputExample("test-1", "cat", label=None)
    assert processors.convert_single_example(4, unlabeled, ["0", "1"], 5, tokenizer).label_id == 0


def test_multi_label_and_regression_features(tokenizer):
    labels = ["red", "blue", "cat"]
    ex = processors.InputExample("m-1", "the cat", label=["cat", "red"])
    f = processors.convert_single_example(0, ex, labels, 6, tokenizer)
    assert f.label_id == [1, 0, 1]
    assert processors.infer_task_type(labels, [ex]) == processors.MULTI_LABEL
    assert processors.infer_task_type(None) == processors.REGRESSION
    pad = processors.convert_single_example(0, processors.PaddingInputExample(), labels, 6,
                                            tokenizer, task_type=processors.MULTI_LABEL)
    assert pad.label_id == [0, 0, 0]
    with pytest.raises(processors.DataError, match="'dog' is not one of the labels"):
        processors.convert_single_example(
            0, processors.InputExample("m-2", "x", label=["dog"]), labels, 6, tokenizer)
    f = processors.convert_single_example(0, processors.InputExample("r", "a", "b", "3.5"),
                                          None, 6, tokenizer)
    assert f.label_id == 3.5 and f.segment_ids == [0, 0, 0, 1, 1, 0]


def _read_all(input_fn):
    batches = list(input_fn())
    return {k: np.concatenate([b[k].numpy() for b in batches]) for k in batches[0]}


def test_tfrecord_round_trip_through_the_input_fn(tmp_path, tokenizer):
    examples = [processors.InputExample("e-%d" % i, "the cat sat " * (i + 1), "a dog" if i % 2 else None,
                                        label=str(i % 2)) for i in range(5)]
    padded = processors.pad_examples(examples, 4)
    assert len(padded) == 8 and isinstance(padded[-1], processors.PaddingInputExample)
    path = str(tmp_path / "out" / "eval.tf_record")
    assert processors.file_based_convert_examples_to_features(
        padded, ["0", "1"], 12, tokenizer, path) == 8
    assert sorted(os.listdir(tmp_path / "out")) == ["eval.tf_record"]  # no temporary left
    expected = processors.convert_examples_to_features(padded, ["0", "1"], 12, tokenizer)
    got = _read_all(processors.file_based_input_fn_builder(
        path, 12, is_training=False, drop_remainder=True, batch_size=4))
    assert set(got) == {"input_ids", "input_mask", "segment_ids", "label_ids", "is_real_example"}
    assert got["input_ids"].dtype == np.int32 and got["input_ids"].shape == (8, 12)
    np.testing.assert_array_equal(got["input_ids"], [f.input_ids for f in expected])
    np.testing.assert_array_equal(got["input_mask"], [f.input_mask for f in expected])
    np.testing.assert_array_equal(got["segment_ids"], [f.segment_ids for f in expected])
    np.testing.assert_array_equal(got["label_ids"], [0, 1, 0, 1, 0, 0, 0, 0])
    np.testing.assert_array_equal(got["is_real_example"], [1] * 5 + [0] * 3)

    # Google's feature layout: int64 lists, label_ids and is_real_example of length 1.
    record = next(iter(tf.data.TFRecordDataset(path))).numpy()
    feature = tf.train.Example.FromString(record).features.feature
    assert list(feature["label_ids"].int64_list.value) == [0]
    assert list(feature["is_real_example"].int64_list.value) == [1]

    # Training reads repeat and shuffle.
    train = processors.file_based_input_fn_builder(path, 12, True, True, batch_size=4, seed=1)()
    assert sum(1 for _ in train.take(5)) == 5


def test_multi_label_and_regression_round_trip(tmp_path, tokenizer):
    labels = ["red", "blue", "cat"]
    examples = [processors.InputExample("m-%d" % i, "red cat", label=l)
                for i, l in enumerate([["red"], ["blue", "cat"], []])]
    path = str(tmp_path / "ml.tf_record")
    processors.file_based_convert_examples_to_features(examples, labels, 6, tokenizer, path)
    got = _read_all(processors.file_based_input_fn_builder(
        path, 6, False, False, batch_size=2, task_type=processors.MULTI_LABEL, num_labels=3))
    np.testing.assert_array_equal(got["label_ids"], [[1, 0, 0], [0, 1, 1], [0, 0, 0]])

    examples = [processors.InputExample("r-%d" % i, "a", "b", label=v) for i, v in enumerate([0.5, 4.25])]
    path = str(tmp_path / "reg.tf_record")
    processors.file_based_convert_examples_to_features(examples, None, 6, tokenizer, path)
    got = _read_all(processors.file_based_input_fn_builder(
        path, 6, False, False, batch_size=2, task_type=processors.REGRESSION))
    assert got["label_ids"].dtype == np.float32
    np.testing.assert_allclose(got["label_ids"], [0.5, 4.25])


def test_failed_conversion_leaves_the_existing_file_untouched(tmp_path, tokenizer):
    path = str(tmp_path / "train.tf_record")
    with open(path, "wb") as f:
        f.write(b"old")
    examples = [processors.InputExample("a", "cat", label="0"),
                processors.InputExample("b", "cat", label="9", source="train.tsv:3")]
    with pytest.raises(processors.DataError, match="train.tsv:3"):
        processors.file_based_convert_examples_to_features(examples, ["0", "1"], 8, tokenizer, path)
    assert open(path, "rb").read() == b"old" and os.listdir(tmp_path) == ["train.tf_record"]


# ---------------------------------------------------------------- generic


def test_generic_tsv_by_name_with_inferred_labels(tmp_path):
    write_lines(tmp_path / "train.tsv", ["id\tq\tp\tlabel", "a1\tthe cat\tsat\tyes",
                                         "a2\ta dog\tran\tno", "a3\tred\tblue\tyes"])
    write_lines(tmp_path / "dev.tsv", ["id\tq\tp\tlabel", "b1\tcat\tmat\tmaybe"])
    write_lines(tmp_path / "test.tsv", ["id\tq\tp", "c1\tcat\tmat"])
    p = processors.GenericProcessor(str(tmp_path), text_a_column="q", text_b_column="p",
                                    label_column="label", guid_column="id")
    assert p.get_labels() == ["no", "yes"] and p.eval_metrics == ("accuracy", "f1")
    train = p.get_train_examples(str(tmp_path))
    assert [(e.guid, e.text_a, e.text_b, e.label) for e in train][0] == ("train-a1", "the cat", "sat", "yes")
    with pytest.raises(processors.DataError, match=r"dev\.tsv:2: label 'maybe' is not one of.*'no', 'yes'"):
        p.get_dev_examples(str(tmp_path))
    (test,) = p.get_test_examples(str(tmp_path))
    assert (test.guid, test.label) == ("test-c1", None)
    with pytest.raises(processors.DataError, match="has no column 'sentence'; its columns are: id, q, p, label"):
        processors.GenericProcessor(str(tmp_path), text_a_column="sentence",
                                    label_column="label").get_train_examples(str(tmp_path))


def test_generic_csv_indices_numeric_label_order_and_jsonl_multi_label(tmp_path):
    write_lines(tmp_path / "train.csv", ['"hello, world",10', "bye,2", "x,10"])
    p = processors.GenericProcessor(str(tmp_path), file_format="csv", has_header=False)
    assert p.get_labels() == ["2", "10"]
    assert p.get_train_examples(str(tmp_path))[0].text_a == "hello, world"
    write_lines(tmp_path / "dev.csv", ["only one column"])
    with pytest.raises(processors.DataError) as e:
        p.get_dev_examples(str(tmp_path))
    assert "dev.csv:1: expected comma-separated columns text_a=0, label=1" in str(e.value)

    records = [{"text": "red cat", "tags": ["red", "cat"]}, {"text": "blue", "tags": ["blue"]}]
    write_lines(tmp_path / "train.jsonl", [json.dumps(r) for r in records])
    write_lines(tmp_path / "dev.jsonl", [json.dumps({"text": "x", "tags": "red,dog"})])
    p = processors.GenericProcessor(str(tmp_path), file_format="jsonl", text_a_column="text",
                                    label_column="tags", task_type=processors.MULTI_LABEL)
    assert p.get_labels() == ["blue", "cat", "red"]
    assert p.eval_metrics == ("accuracy", "micro_f1", "macro_f1")
    assert p.get_train_examples(str(tmp_path))[0].label == ["red", "cat"]
    with pytest.raises(processors.DataError, match=r"dev\.jsonl:1: label 'dog' is not one of"):
        p.get_dev_examples(str(tmp_path))
    write_lines(tmp_path / "test.jsonl", ['{"text": "a"}', "[1, 2]"])
    with pytest.raises(processors.DataError, match=r"test\.jsonl:2: expected a JSON object"):
        p.get_test_examples(str(tmp_path))


def test_generic_rows_must_have_as_many_columns_as_the_header(tmp_path):
    header = "id\ttext\tlabel"
    # Line 3: a tab inside the text shifts the label; line 4 lost a field.
    write_lines(tmp_path / "train.tsv", [header, "a1\tthe cat\tyes", "a2\ta\tdog\tno"])
    p = processors.GenericProcessor(str(tmp_path), text_a_column="text", label_column="id",
                                    labels=["a1", "a2"])
    with pytest.raises(processors.DataError) as raised:
        p.get_train_examples(str(tmp_path))
    assert str(raised.value).endswith(
        "train.tsv:3: 4 columns, expected 3 (header: id, text, label)")
    write_lines(tmp_path / "train.tsv", [header, "a1\tthe cat\tyes", "", "a2\tno"])
    p = processors.GenericProcessor(str(tmp_path), text_a_column="id", label_column="text",
                                    labels=["the cat", "no"])
    with pytest.raises(processors.DataError, match=r"train\.tsv:4: 2 columns, expected 3 "
                                                   r"\(header: id, text, label\)$"):
        p.get_train_examples(str(tmp_path))
    # csv too; a comma inside quotes is no extra column.
    write_lines(tmp_path / "dev.csv", ["text,label", '"hello, world",1', "bye,2,3"])
    p = processors.GenericProcessor(str(tmp_path), file_format="csv", labels=["1", "2"])
    with pytest.raises(processors.DataError, match=r"dev\.csv:3: 3 columns, expected 2 "
                                                   r"\(header: text, label\)$"):
        p.get_dev_examples(str(tmp_path))
    # A test file may leave out the label when it is the last column.
    write_lines(tmp_path / "test.tsv", [header, "c1\tthe cat", "c2\ta dog\tyes"])
    p = processors.GenericProcessor(str(tmp_path), text_a_column="text", label_column="label",
                                    labels=["yes"])
    assert [e.label for e in p.get_test_examples(str(tmp_path))] == [None, "yes"]
    write_lines(tmp_path / "test.tsv", [header, "c1\tthe cat\tyes\tmore"])
    with pytest.raises(processors.DataError, match=r"test\.tsv:2: 4 columns, expected 3"):
        p.get_test_examples(str(tmp_path))


# -------------------------------------------------------------------- ids


def test_ids_processor_next_id_prediction(tmp_path):
    write_lines(tmp_path / "train.tsv", ["5 6 7 8", "9 10 11 12 13 14"])
    p = processors.IdsProcessor(str(tmp_path), num_labels=20, label_from_last_id=True,
                                cls_id=1, sep_id=2, keep="last", vocab_size=20)
    assert not p.needs_tokenizer and p.get_labels()[:3] == ["0", "1", "2"]
    examples = p.get_train_examples(str(tmp_path))
    assert [(e.text_a, e.label) for e in examples] == [([5, 6, 7], "8"), ([9, 10, 11, 12, 13], "14")]
    features = processors.convert_examples_to_features(examples, p.get_labels(), 6, None)
    assert features[0].input_ids == [1, 5, 6, 7, 2, 0] and features[0].input_mask == [1] * 5 + [0]
    assert features[0].label_id == 8
    # keep="last": the most recent ids survive truncation.
    assert features[1].input_ids == [1, 10, 11, 12, 13, 2] and features[1].label_id == 14

    write_lines(tmp_path / "dev.tsv", ["5 6 x 8"])
    with pytest.raises(processors.DataError, match=r"dev\.tsv:1: 'x' is not an integer id"):
        p.get_dev_examples(str(tmp_path))
    write_lines(tmp_path / "dev.tsv", ["5 25 8"])
    with pytest.raises(processors.DataError, match=r"dev\.tsv:1: id 25 .* outside the model's vocabulary \[0, 20\)"):
        p.get_dev_examples(str(tmp_path))


def test_ids_processor_pairs_with_label_column_and_inferred_labels(tmp_path, tokenizer):
    write_lines(tmp_path / "train.tsv", ["3 4 5\t6 7\tb", "3\t4\ta"])
    p = processors.IdsProcessor(str(tmp_path), id_offset=100)
    assert p.get_labels() == ["a", "b"]
    (first, _) = p.get_train_examples(str(tmp_path))
    f = processors.convert_single_example(0, first, p.get_labels(), 5, None)
    # No special tokens; Google's pair truncation keeps the first ids.
    assert f.input_ids == [103, 104, 105, 106, 107] and f.segment_ids == [0, 0, 0, 1, 1]
    f = processors.convert_single_example(0, first, p.get_labels(), 4, None)
    assert f.input_ids == [103, 104, 106, 107]
    write_lines(tmp_path / "dev.tsv", ["1 2\tc"])
    with pytest.raises(processors.DataError, match=r"dev\.tsv:1: label 'c' is not one of .*'a', 'b'"):
        p.get_dev_examples(str(tmp_path))
