"""GPT-style fine-tuning: the input transformations, the task head, the auxiliary LM loss,
the multiple-choice processor and the job's checks.

References are computed here from the pieces (the tokenizer's ids, the
network's hidden states and logits), independently of the code under test.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from data import processors as processors_lib
from data.processors import transformations
from data.tokenizers import byte_bpe
from modeling.gpt import GPTConfig
from modeling.gpt import GPTNetwork
from modeling.gpt import classification as gpt_classification
from modeling.gpt.classification import GPTClassifier
from modeling.tasks import classifier_job
from modeling.tasks import input_formats

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
VOCAB = os.path.join(REPO_ROOT, "data", "sample", "gpt2", "vocab.json")
MERGES = os.path.join(REPO_ROOT, "data", "sample", "gpt2", "merges.txt")
V = 3000  # the bundled byte-level BPE vocabulary
SEQ = 24


@pytest.fixture(scope="module")
def tokenizer():
    return byte_bpe.ByteBPETokenizer(VOCAB, MERGES)


def _config():
    # A wide initialiser: attention far from uniform, so that order matters.
    return GPTConfig(vocab_size=V, n_positions=64, n_embd=32, n_layer=2, n_head=2,
                     initializer_range=0.3)


def _classifier(transformation, num_labels=2, task_type="classification", lm_loss_weight=0.5,
                seed=0):
    tf.keras.utils.set_random_seed(seed)
    model = GPTClassifier.from_config_object(_config(), num_labels, task_type=task_type,
                                             transformation=transformation,
                                             lm_loss_weight=lm_loss_weight)
    # A non-zero bias, so that a head that ignored it would be caught, and
    # weights large enough that differences in the states show in the outputs.
    model.output_bias.assign(np.linspace(-0.3, 0.3, model.output_bias.shape[0]))
    rng = np.random.RandomState(seed)
    model.output_weights.assign(rng.normal(size=model.output_weights.shape))
    return model


def _features(examples, transformation, tokenizer, count, labels=("0", "1")):
    special = transformations.special_ids_after(V)
    rows = [transformations.convert_gpt_example(i, e, list(labels), SEQ, tokenizer, special,
                                                transformation, "classification", count)
            for i, e in enumerate(examples)]
    return {
        "input_ids": tf.constant([r.input_ids for r in rows], tf.int32),
        "input_mask": tf.constant([r.input_mask for r in rows], tf.int32),
        "label_ids": tf.constant([r.label_id for r in rows], tf.int32),
        "is_real_example": tf.constant([int(r.is_real_example) for r in rows], tf.int32),
    }


# -------------------------------------------------------- transformations


def test_input_transformations_give_the_papers_token_sequences(tokenizer):
    s, d, e = V, V + 1, V + 2
    a, b = "The baker opens the shop.", "A shop is open."
    ids_a, ids_b = tokenizer.encode(a), tokenizer.encode(b)
    special = transformations.special_ids_after(V)
    assert tuple(special) == (s, d, e)

    def sequences(example, transformation):
        return transformations.gpt_example_sequences(example, transformation, SEQ, tokenizer,
                                                     special)

    single = processors_lib.InputExample("1", a)
    pair = processors_lib.InputExample("2", a, b)
    assert sequences(single, "classification") == [[s] + ids_a + [e]]
    assert sequences(pair, "entailment") == [[s] + ids_a + [d] + ids_b + [e]]
    assert sequences(pair, "classification") == [[s] + ids_a + [d] + ids_b + [e]]
    assert sequences(pair, "similarity") == [[s] + ids_a + [d] + ids_b + [e],
                                             [s] + ids_b + [d] + ids_a + [e]]
    choice = processors_lib.ChoiceExample("3", a, ["Yes.", "No way."], "1")
    assert sequences(choice, "multiple_choice") == [
        [s] + ids_a + [d] + tokenizer.encode(c) + [e] for c in ("Yes.", "No way.")]
    # Truncation keeps the framing: `<e>` last, at most SEQ tokens.
    long_text = " ".join(["bread"] * 40)
    long_ids = tokenizer.encode(long_text)
    assert sequences(processors_lib.InputExample("4", long_text), "classification") == [
        [s] + long_ids[:SEQ - 2] + [e]]
    [cut] = sequences(processors_lib.InputExample("5", long_text, b), "entailment")
    assert len(cut) == SEQ and cut[-1] == e and cut.count(d) == 1
    assert cut[cut.index(d) + 1:-1] == ids_b  # the longer text was cut, not the short one
    # What a transformation needs is checked, naming the example.
    with pytest.raises(processors_lib.DataError, match="example 1 .*needs text pairs"):
        sequences(single, "similarity")
    with pytest.raises(processors_lib.DataError, match="example 2 has no candidates"):
        sequences(pair, "multiple_choice")


def test_records_store_the_sequences_end_to_end_padded(tokenizer):
    choice = processors_lib.ChoiceExample("1", "Context.", ["One.", "Two two."], "1")
    row = transformations.convert_gpt_example(
        0, choice, ["0", "1"], SEQ, tokenizer, transformations.special_ids_after(V),
        "multiple_choice", "classification", 2)
    assert len(row.input_ids) == 2 * SEQ and row.label_id == 1 and row.is_real_example
    for k, choice_text in enumerate(["One.", "Two two."]):
        ids = row.input_ids[k * SEQ:(k + 1) * SEQ]
        mask = row.input_mask[k * SEQ:(k + 1) * SEQ]
        expected = [V] + tokenizer.encode("Context.") + [V + 1] + tokenizer.encode(
            choice_text) + [V + 2]
        assert ids[:len(expected)] == expected and sum(mask) == len(expected)
        assert set(ids[len(expected):]) == {0}
    padding = transformations.convert_gpt_example(
        0, processors_lib.PaddingInputExample(), ["0", "1"], SEQ, tokenizer,
        transformations.special_ids_after(V), "multiple_choice", "classification", 2)
    assert not padding.is_real_example and sum(padding.input_mask) == 0


# ------------------------------------------------------------------ model


def test_head_reads_the_hidden_state_at_the_extract_token(tokenizer):
    model = _classifier("classification", num_labels=3)
    examples = [processors_lib.InputExample("1", "The cat sleeps.", "A cat rests.", "2"),
                processors_lib.InputExample("2", "Bread.", None, "0")]
    features = _features(examples, "classification", tokenizer, 1, labels=("0", "1", "2"))
    logits = model(features, training=False)["logits"].numpy()
    hidden = model.encoder({"input_ids": features["input_ids"],
                            "input_mask": features["input_mask"]})["sequence_output"].numpy()
    ids = features["input_ids"].numpy()
    for row in range(2):
        position = int(np.where(ids[row] == V + 2)[0][0])  # the <e> token
        expected = hidden[row, position] @ model.output_weights.numpy().T + \
            model.output_bias.numpy()
        np.testing.assert_allclose(logits[row], expected, rtol=1e-5, atol=1e-5)
    assert model.encoder.vocab_size == V + 3


def test_similarity_is_symmetric_in_the_order_of_its_two_texts(tokenizer):
    model = _classifier("similarity")
    a, b = "The farmer opens the gate.", "His cows walk slowly to the field."
    ab = _features([processors_lib.InputExample("1", a, b, "1")], "similarity", tokenizer, 2)
    ba = _features([processors_lib.InputExample("1", b, a, "1")], "similarity", tokenizer, 2)
    p_ab = model(ab, training=False)["probabilities"].numpy()
    p_ba = model(ba, training=False)["probabilities"].numpy()
    np.testing.assert_allclose(p_ab, p_ba, rtol=1e-6, atol=1e-7)
    # ... and it is the sum of the two orders' <e> states that is scored.
    hidden = model.encoder({"input_ids": tf.reshape(ab["input_ids"], [2, SEQ]),
                            "input_mask": tf.reshape(ab["input_mask"], [2, SEQ])}
                           )["sequence_output"].numpy()
    lengths = tf.reshape(ab["input_mask"], [2, SEQ]).numpy().sum(-1)
    state = hidden[0, lengths[0] - 1] + hidden[1, lengths[1] - 1]
    expected = state @ model.output_weights.numpy().T + model.output_bias.numpy()
    np.testing.assert_allclose(model(ab)["logits"].numpy()[0], expected, rtol=1e-5, atol=1e-5)
    # A one-order model would not be symmetric.
    one = _classifier("entailment", seed=0)
    p1 = one(_features([processors_lib.InputExample("1", a, b, "1")], "entailment",
                       tokenizer, 1))["probabilities"].numpy()
    p2 = one(_features([processors_lib.InputExample("1", b, a, "1")], "entailment",
                       tokenizer, 1))["probabilities"].numpy()
    assert np.abs(p1 - p2).max() > 1e-4


def test_multiple_choice_probabilities_follow_a_permutation_of_the_candidates(tokenizer):
    model = _classifier("multiple_choice", num_labels=4)
    choices = ["He bakes bread.", "The river is cold.", "Trains leave at eight.", "No."]
    labels = ("0", "1", "2", "3")
    context = "The baker opens the shop at six."
    features = _features([processors_lib.ChoiceExample("1", context, choices, "0")],
                         "multiple_choice", tokenizer, 4, labels)
    probabilities = model(features, training=False)["probabilities"].numpy()[0]
    assert probabilities.shape == (4,) and abs(probabilities.sum() - 1) < 1e-6
    assert model.output_weights.shape == (1, 32)  # one shared linear layer
    for permutation in ([3, 2, 1, 0], [1, 3, 0, 2]):
        permuted = _features([processors_lib.ChoiceExample(
            "1", context, [choices[i] for i in permutation], "0")],
            "multiple_choice", tokenizer, 4, labels)
        got = model(permuted, training=False)["probabilities"].numpy()[0]
        np.testing.assert_allclose(got, probabilities[permutation], rtol=1e-5, atol=1e-6)


def _log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_lm_loss_weight_adds_exactly_weight_times_the_lm_loss(tokenizer):
    examples = [processors_lib.InputExample("1", "The baker opens the shop.", None, "1"),
                processors_lib.InputExample("2", "Cows walk to the river.", "It is cold.",
                                            "0"),
                processors_lib.InputExample("3", "Padding-like.", None, "1")]
    features = _features(examples, "classification", tokenizer, 1)
    features["is_real_example"] = tf.constant([1, 1, 0], tf.int32)  # the third is padding
    losses = {}
    for weight in (0.0, 0.5, 2.0):
        model = _classifier("entailment", lm_loss_weight=weight, seed=5)
        loss, metrics = model.compute_loss_and_metrics(features, training=False)
        losses[weight] = (float(loss), metrics)
    task_loss = losses[0.0][0]
    # The reference LM loss, OpenAI's train.py: each real example's sequence gives
    # the mean next-token cross-entropy over its real tokens (from the network's
    # own logits); the loss is the mean of these over the sequences. The two rows
    # have different lengths, so the mean over all tokens is another number.
    model = _classifier("entailment", seed=5)
    ids, mask = features["input_ids"].numpy(), features["input_mask"].numpy()
    logits = model.encoder.logits(model.encoder({"input_ids": ids, "input_mask": mask}
                                                )["sequence_output"]).numpy()
    log_probs = _log_softmax(logits.astype(np.float64))
    per_sequence, total, count = [], 0.0, 0
    for row in range(2):
        n = int(mask[row].sum())
        losses_row = [-log_probs[row, t, ids[row, t + 1]] for t in range(n - 1)]
        per_sequence.append(np.mean(losses_row))
        total += sum(losses_row)
        count += len(losses_row)
    lm_loss = np.mean(per_sequence)
    per_token = total / count
    assert abs(lm_loss - per_token) > 1e-3
    for weight in (0.5, 2.0):
        loss, metrics = losses[weight]
        lm_sum, lm_count = (float(v) for v in metrics["lm_loss"])
        assert lm_count == 2 and lm_sum / lm_count == pytest.approx(lm_loss, rel=1e-5)
        assert loss - task_loss == pytest.approx(weight * lm_loss, rel=1e-5)
        assert float(metrics["loss"][0]) / float(metrics["loss"][1]) == pytest.approx(
            task_loss, rel=1e-6)
    assert lm_loss > 1.0
    # lm_loss_average="token": the mean over every predicted token of the batch.
    tokenwise = gpt_classification.GPTClassifier(
        model.encoder, 2, transformation="entailment", lm_loss_average="token")
    tokenwise.output_weights.assign(model.output_weights)
    tokenwise.output_bias.assign(model.output_bias)
    loss, metrics = tokenwise.compute_loss_and_metrics(features, training=False)
    lm_sum, lm_count = (float(v) for v in metrics["lm_loss"])
    assert lm_count == count and lm_sum / lm_count == pytest.approx(per_token, rel=1e-5)
    assert float(loss) - task_loss == pytest.approx(0.5 * per_token, rel=1e-5)
    with pytest.raises(ValueError, match="lm_loss_average must be one of sequence, token"):
        gpt_classification.GPTClassifier(model.encoder, 2, lm_loss_average="batch")
    # The weight changes what is minimised: its gradients differ.
    with tf.GradientTape() as tape:
        model_loss, _ = model.compute_loss_and_metrics(features, training=False)
    grad = tape.gradient(model_loss, model.encoder.embedding_table)
    no_lm = _classifier("entailment", lm_loss_weight=0.0, seed=5)
    with tf.GradientTape() as tape:
        no_lm_loss, _ = no_lm.compute_loss_and_metrics(features, training=False)
    grad0 = tape.gradient(no_lm_loss, no_lm.encoder.embedding_table)
    assert np.abs(tf.convert_to_tensor(grad).numpy()
                  - tf.convert_to_tensor(grad0).numpy()).max() > 1e-6


def test_regression_head_and_keras_round_trip(tmp_path, tokenizer):
    model = _classifier("similarity", task_type="regression")
    features = _features([processors_lib.InputExample("1", "A b.", "C d.", "0")],
                         "similarity", tokenizer, 2)
    features["label_ids"] = tf.constant([0.7])
    outputs = model(features, training=False)
    assert outputs["predictions"].shape == (1,)
    loss, _ = model.compute_loss_and_metrics(features)
    assert float(loss) > 0
    path = str(tmp_path / "gpt_classifier.keras")
    model.save(path)
    import keras  # pylint: disable=g-import-not-at-top
    restored = keras.saving.load_model(path)
    assert isinstance(restored, GPTClassifier) and isinstance(restored.encoder, GPTNetwork)
    np.testing.assert_allclose(restored(features)["predictions"].numpy(),
                               outputs["predictions"].numpy(), rtol=1e-6)


# -------------------------------------------------------------- processor


def test_multiple_choice_processor_reads_json_lines_and_names_bad_lines(tmp_path):
    rows = [{"context": "Where is the bread?", "choices": ["In the oven.", "In the river."],
             "label": 0},
            {"context": "", "choices": ["Yes.", "No."], "label": "1", "id": "q2"}]
    (tmp_path / "train.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "test.jsonl").write_text(json.dumps({"context": "c", "choices": ["a", "b"]}))
    processor = processors_lib.get_processor_class("multiple_choice")(data_dir=str(tmp_path))
    assert processor.get_labels() == ["0", "1"] and processor.is_multiple_choice
    train = processor.get_train_examples(str(tmp_path))
    assert [(e.text_a, e.choices, e.label, e.guid) for e in train] == [
        ("Where is the bread?", ["In the oven.", "In the river."], "0", "train-1"),
        ("", ["Yes.", "No."], "1", "q2")]
    assert processor.get_test_examples(str(tmp_path))[0].label is None
    bad_lines = [
        ({"context": "c", "choices": ["a", "b", "c"], "label": 0}, "3 choices, but this task has 2"),
        ({"context": "c", "choices": ["a", "b"], "label": 2}, "`label` 2 is not an index"),
        ({"context": "c", "choices": ["a", "b"], "label": "x"}, "`label` must be the integer"),
        ({"context": "c", "choices": ["a", "b"]}, "no `label`"),
        ({"context": "c", "choices": "ab", "label": 0}, "`choices` must be a list"),
        ({"choices": ["a", "b"], "label": 0}, "no key 'context'"),
    ]
    for row, message in bad_lines:
        (tmp_path / "dev.jsonl").write_text(json.dumps(rows[0]) + "\n" + json.dumps(row) + "\n")
        with pytest.raises(processors_lib.DataError) as error:
            processor.get_dev_examples(str(tmp_path))
        text = str(error.value)
        assert "dev.jsonl:2" in text and message in text and "\n" not in text, text


# -------------------------------------------------------------------- job


def _job(tmp_path, **overrides):
    config_path = str(tmp_path / "config.json")
    _config().to_json_file(config_path)
    (tmp_path / "train.jsonl").write_text(
        json.dumps({"context": "c", "choices": ["a", "b"], "label": 0}) + "\n")
    values = dict(model_family="gpt", task_name="multiple_choice", data_dir=str(tmp_path),
                  bert_config_file=config_path, vocab_file=VOCAB, merges_file=MERGES,
                  output_dir=str(tmp_path / "out"), do_train=True, max_seq_length=16)
    values.update(overrides)
    return classifier_job.ClassifierJob(**values)


def test_formats_are_found_by_family_and_bad_settings_are_one_line(tmp_path):
    assert input_formats.format_class_for("gpt", None) is gpt_classification.GPTInputFormat
    assert input_formats.format_class_for("bert", classifier_job.PooledInputFormat) is \
        classifier_job.PooledInputFormat
    cases = [
        (dict(merges_file=None), "--merges_file is required for --model_family=gpt"),
        (dict(lm_loss_weight=-1.0), "--lm_loss_weight=-1.0: must be >= 0"),
        (dict(input_transformation="sideways"), "--input_transformation=sideways: expected"),
        (dict(input_transformation="similarity"), "multiple-choice task"),
        (dict(export_dir=str(tmp_path / "export")), "--export_dir"),
        (dict(vocab_file=os.path.join(REPO_ROOT, "data", "sample", "vocab.txt")),
         "vocab.txt is not readable JSON"),
    ]
    for overrides, message in cases:
        with pytest.raises((classifier_job.ClassifierJobError, ValueError)) as error:
            classifier_job.run(_job(tmp_path, **overrides))
        assert message in str(error.value) and "\n" not in str(error.value), str(error.value)
    # The default format refuses the options that are GPT's.
    bert_config = tmp_path / "bert_config.json"
    bert_config.write_text(json.dumps(dict(
        vocab_size=10, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=16, max_position_embeddings=32)))
    for overrides, message in [(dict(lm_loss_weight=0.5), "--lm_loss_weight: --model_family=bert"),
                               (dict(input_transformation="similarity"),
                                "--input_transformation=similarity: --model_family=bert")]:
        with pytest.raises(classifier_job.ClassifierJobError, match=message):
            classifier_job.run(_job(tmp_path, model_family="bert",
                                    bert_config_file=str(bert_config), **overrides))


def test_a_released_gpt_vocabulary_is_read_with_gpts_own_bpe(tmp_path):
    """An openai-gpt folder's vocab.json + merges.txt (`</w>` word ends, no byte
    symbols) is tokenized with GPT's lower-casing BPE (`data.tokenizers.gpt_bpe`), not
    refused as a broken byte-level vocabulary; the byte-level demo files stay byte level."""
    from data.tokenizers import gpt_bpe  # pylint: disable=g-import-not-at-top
    vocab = {"<unk>": 0, "t": 1, "h": 2, "e</w>": 3, "th": 4, "the</w>": 5, "c": 6, "a": 7,
             "t</w>": 8, "ca": 9, "cat</w>": 10, ".</w>": 11}
    (tmp_path / "vocab.json").write_text(json.dumps(vocab))
    (tmp_path / "merges.txt").write_text("#version: 0.2\nt h\nth e</w>\nc a\nca t</w>\n")
    config = GPTConfig(vocab_size=len(vocab), n_positions=16, n_embd=8, n_layer=1, n_head=2)
    config.to_json_file(str(tmp_path / "gpt_config.json"))
    job = _job(tmp_path, bert_config_file=str(tmp_path / "gpt_config.json"),
               vocab_file=str(tmp_path / "vocab.json"), merges_file=str(tmp_path / "merges.txt"))
    assert gpt_classification.is_end_of_word_vocab(job.vocab_file)
    assert not gpt_classification.is_end_of_word_vocab(VOCAB)
    input_format = gpt_classification.GPTInputFormat(job, config, None)
    input_format.check()
    tokenizer = input_format.tokenizer()
    assert isinstance(tokenizer, gpt_bpe.GPTBPETokenizer)
    assert tokenizer.encode("The cat.") == [5, 10, 11]
    special = transformations.special_ids_after(len(vocab))
    example = processors_lib.InputExample("1", "The cat.", None, "0")
    assert transformations.gpt_example_sequences(
        example, "classification", 8, tokenizer, special) == [[12, 5, 10, 11, 14]]
    demo = gpt_classification.GPTInputFormat(_job(tmp_path), _config(), None).tokenizer()
    assert isinstance(demo, byte_bpe.ByteBPETokenizer)


def test_init_from_hf_safetensors_appends_the_three_rows(tmp_path, tokenizer):
    import torch  # pylint: disable=g-import-not-at-top
    import transformers  # pylint: disable=g-import-not-at-top

    torch.manual_seed(0)
    hf = transformers.OpenAIGPTModel(transformers.OpenAIGPTConfig(
        vocab_size=V, n_positions=64, n_embd=32, n_layer=2, n_head=2, resid_pdrop=0.0,
        embd_pdrop=0.0, attn_pdrop=0.0)).eval()
    hf.save_pretrained(str(tmp_path))
    job = _job(tmp_path, bert_config_file=str(tmp_path / "config.json"))
    input_format = gpt_classification.GPTInputFormat(
        job, GPTConfig.from_json_file(str(tmp_path / "config.json")), None)
    processor = processors_lib.MultipleChoiceProcessor(num_choices=2)
    input_format.prepare(processor, "classification", ["0", "1"], 2)
    model = input_format.build_model(2, "classification")
    fresh = model.encoder.embedding_table.numpy()[V:].copy()
    input_format.init_model(model, str(tmp_path / "model.safetensors"))
    table = model.encoder.embedding_table.numpy()
    np.testing.assert_array_equal(table[:V], hf.tokens_embed.weight.detach().numpy())
    np.testing.assert_array_equal(table[V:], fresh)
    ids = np.array([tokenizer.encode("The baker opens the shop at six.")], np.int32)
    with torch.no_grad():
        reference = hf(torch.tensor(ids, dtype=torch.long)).last_hidden_state.numpy()
    ours = model.encoder({"input_ids": ids}, training=False)["sequence_output"].numpy()
    np.testing.assert_allclose(ours, reference, atol=2e-5)
