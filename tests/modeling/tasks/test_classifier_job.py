"""modeling/tasks/classifier_job.py: run_classifier.py's run as a library call."""

import os

import numpy as np
import pytest

from data import processors
from modeling import bert as config_lib
from modeling import registry
from modeling.tasks import classifier_job

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "red", "blue", "cat", "dog"]


class ColourProcessor(processors.DataProcessor):
    """In-memory examples: label "1" iff the text names a colour."""

    def _examples(self, n, set_type):
        words = ["red", "blue", "cat", "dog"]
        return [processors.InputExample("%s-%d" % (set_type, i), words[i % 4],
                                        label=str(int(i % 4 < 2))) for i in range(n)]

    def get_train_examples(self, data_dir):
        return self._examples(16, "train")

    def get_dev_examples(self, data_dir):
        return self._examples(6, "dev")

    def get_test_examples(self, data_dir):
        return self._examples(5, "test")

    def get_labels(self):
        return ["0", "1"]


@pytest.fixture
def model_files(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    config = config_lib.BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1,
                                   num_attention_heads=2, intermediate_size=32,
                                   max_position_embeddings=16, type_vocab_size=2)
    config.to_json_file(str(tmp_path / "bert_config.json"))
    return tmp_path


def test_registered_as_the_classification_task():
    task = registry.tasks.get("classification")
    assert task.job_class is classifier_job.ClassifierJob and task.run is classifier_job.run


def test_bad_jobs_are_refused_with_one_line(model_files):
    with pytest.raises(classifier_job.ClassifierJobError, match="At least one of `do_train`"):
        classifier_job.run(classifier_job.ClassifierJob())
    with pytest.raises(classifier_job.ClassifierJobError, match="--data_dir is required"):
        classifier_job.run(classifier_job.ClassifierJob(do_train=True))
    job = classifier_job.ClassifierJob(
        do_train=True, data_dir=str(model_files), output_dir=str(model_files / "out"),
        bert_config_file=str(model_files / "bert_config.json"), task_name="mrpc",
        vocab_file=str(model_files / "vocab.txt"), max_seq_length=32)
    with pytest.raises(classifier_job.ClassifierJobError, match="Cannot use sequence length 32"):
        classifier_job.run(job)


def test_a_processor_object_trained_evaluated_and_predicted_in_process(model_files):
    out = model_files / "out"
    result = classifier_job.run(classifier_job.ClassifierJob(
        processor=ColourProcessor(), data_dir=str(model_files),
        bert_config_file=str(model_files / "bert_config.json"),
        vocab_file=str(model_files / "vocab.txt"), output_dir=str(out), max_seq_length=8,
        do_train=True, do_eval=True, do_predict=True, train_batch_size=4,
        num_train_epochs=1.0, log_steps=1, seed=1))
    assert result.eval_results["global_step"] == 4  # int(16 / 4 * 1)
    assert {"eval_accuracy", "eval_loss", "loss"} <= set(result.eval_results)
    assert result.test_predictions.shape == (5, 2)
    np.testing.assert_allclose(result.test_predictions.sum(axis=1), 1.0, atol=1e-5)
    for name in ("train.tf_record", "eval.tf_record", "predict.tf_record", "eval_results.txt",
                 "test_results.tsv"):
        assert os.path.exists(out / name), name


def test_other_families_fine_tune_through_the_same_job(model_files):
    from modeling.albert import AlbertConfig  # pylint: disable=g-import-not-at-top
    AlbertConfig(vocab_size=len(VOCAB), embedding_size=8, hidden_size=16, num_hidden_layers=2,
                 num_attention_heads=2, intermediate_size=32, max_position_embeddings=16
                 ).to_json_file(str(model_files / "albert_config.json"))
    common = dict(processor=ColourProcessor(), data_dir=str(model_files),
                  vocab_file=str(model_files / "vocab.txt"), max_seq_length=8,
                  do_train=True, do_eval=True, train_batch_size=4, num_train_epochs=1.0,
                  log_steps=1, seed=1)
    result = classifier_job.run(classifier_job.ClassifierJob(
        model_family="albert", bert_config_file=str(model_files / "albert_config.json"),
        output_dir=str(model_files / "albert_out"), **common))
    assert result.eval_results["global_step"] == 4
    assert np.isfinite(result.eval_results["eval_loss"])
    with pytest.raises(classifier_job.ClassifierJobError, match="no pooled output"):
        classifier_job.run(classifier_job.ClassifierJob(
            model_family="mass", bert_config_file=str(model_files / "albert_config.json"),
            output_dir=str(model_files / "mass_out"), **common))
    with pytest.raises(classifier_job.ClassifierJobError, match="unknown model family 'bret'"):
        classifier_job.run(classifier_job.ClassifierJob(
            model_family="bret", bert_config_file=str(model_files / "albert_config.json"),
            output_dir=str(model_files / "x_out"), **common))


def test_albert_classifier_starts_from_a_google_albert_checkpoint(model_files):
    from modeling import checkpoints, recipes  # pylint: disable=g-import-not-at-top
    from modeling.albert import AlbertConfig  # pylint: disable=g-import-not-at-top
    from modeling.tasks import classification  # pylint: disable=g-import-not-at-top
    config = AlbertConfig(vocab_size=len(VOCAB), embedding_size=8, hidden_size=16,
                          num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                          max_position_embeddings=16)
    pretrainer = recipes.build_albert_pretrainer(config)
    prefix = str(model_files / "albert" / "model.ckpt")
    checkpoints.save_google_checkpoint(pretrainer, prefix)
    classifier = classification.BertClassifier.from_config_object(config, num_labels=2,
                                                                  family="albert")
    checkpoints.init_from_checkpoint(classifier, prefix)
    for mine, theirs in zip(classifier.encoder.weights, pretrainer.encoder.weights):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


def test_an_hf_model_folder_alone_is_enough(tmp_path):
    """--init_checkpoint=FOLDER: config, vocabulary and weights all come from the folder."""
    import torch  # pylint: disable=g-import-not-at-top
    import transformers  # pylint: disable=g-import-not-at-top
    folder = tmp_path / "hf"
    torch.manual_seed(0)
    transformers.BertModel(transformers.BertConfig(
        vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16)).save_pretrained(folder)
    (folder / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    (folder / "tokenizer_config.json").write_text('{"do_lower_case": false}')
    job = classifier_job.ClassifierJob(
        processor=ColourProcessor(), data_dir=str(tmp_path), init_checkpoint=str(folder),
        output_dir=str(tmp_path / "out"), max_seq_length=8, do_train=True, do_eval=True,
        train_batch_size=4, num_train_epochs=1.0, log_steps=1, seed=1)
    filled = classifier_job.ClassifierRunner(job).job
    assert filled.bert_config_file == str(folder / "config.json")
    assert filled.vocab_file == str(folder / "vocab.txt")
    assert filled.do_lower_case is False and job.do_lower_case is True  # a copy
    result = classifier_job.run(job)
    assert result.eval_results["global_step"] == 4
    # The encoder started from the folder's weights (its word embeddings moved
    # only by 4 steps of fine-tuning from HF's).
    from modeling import checkpoints  # pylint: disable=g-import-not-at-top
    stored = checkpoints.read_safetensors(str(folder))["embeddings.word_embeddings.weight"]
    from modeling import pretrained  # pylint: disable=g-import-not-at-top
    encoder = pretrained.load_pretrained(str(folder), tokenizer=False).model
    checkpoints.init_from_checkpoint(encoder, str(tmp_path / "out"))
    tuned = encoder.embeddings.word_embeddings.numpy()
    assert 0 < np.abs(tuned - stored).max() < 1e-3  # 4 Adam steps of 5e-5
    with pytest.raises(classifier_job.ClassifierJobError, match="model_type 'mamba'"):
        (tmp_path / "bad").mkdir()
        (tmp_path / "bad" / "config.json").write_text('{"model_type": "mamba"}')
        classifier_job.run(classifier_job.ClassifierJob(
            processor=ColourProcessor(), data_dir=str(tmp_path), do_train=True,
            init_checkpoint=str(tmp_path / "bad"), output_dir=str(tmp_path / "out2")))


def test_fine_tuned_classifier_goes_out_as_hf_sequence_classification(model_files):
    """run_classifier's output directory -> convert_checkpoint -> HF's
    BertForSequenceClassification gives the same probabilities."""
    import torch  # pylint: disable=g-import-not-at-top
    import transformers  # pylint: disable=g-import-not-at-top
    from modeling.pretrained import convert  # pylint: disable=g-import-not-at-top
    out = model_files / "out"
    result = classifier_job.run(classifier_job.ClassifierJob(
        processor=ColourProcessor(), data_dir=str(model_files),
        bert_config_file=str(model_files / "bert_config.json"),
        vocab_file=str(model_files / "vocab.txt"), output_dir=str(out), max_seq_length=8,
        do_train=True, do_predict=True, train_batch_size=4, num_train_epochs=5.0,
        learning_rate=1e-2, log_steps=5, seed=1))
    summary = convert.convert(convert.ConvertSettings(
        init_checkpoint=str(out), bert_config_file=str(model_files / "bert_config.json"),
        vocab_file=str(model_files / "vocab.txt"), output_dir=str(model_files / "hf")))
    assert summary["heads"] == ["classifier"]
    hf = transformers.AutoModelForSequenceClassification.from_pretrained(
        str(model_files / "hf")).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(model_files / "hf"))
    texts = [e.text_a for e in ColourProcessor().get_test_examples(None)]
    batch = tokenizer(texts, padding="max_length", max_length=8, return_tensors="pt")
    with torch.no_grad():
        probabilities = torch.softmax(hf(**batch).logits, -1).numpy()
    np.testing.assert_allclose(probabilities, result.test_predictions, atol=1e-5)
    # A trained head, not the initial one: the texts get clearly different outputs.
    assert np.ptp(probabilities[:, 0]) > 1e-3
