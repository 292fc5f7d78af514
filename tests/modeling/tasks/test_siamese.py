"""modeling/tasks/siamese.py and siamese_job.py: the bi-encoder, its poolings, losses and job."""

import os

import numpy as np
import keras
import pytest
import tensorflow as tf

from data.processors import pairs
from modeling import bert as config_lib
from modeling import registry
from modeling.tasks import siamese
from modeling.tasks import siamese_job

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "red", "blue", "cat", "dog", "a",
         "the", "is"]


def _tiny_config(vocab_size=len(VOCAB), hidden=16):
    return config_lib.BertConfig(vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=2,
                                 num_attention_heads=2, intermediate_size=32,
                                 max_position_embeddings=32, type_vocab_size=2,
                                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _np_cos(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


# ------------------------------------------------------------------- pooling


def test_pooling_matches_hand_computation_and_padding_changes_nothing():
    seq = np.array([[[1., 2.], [3., -4.], [5., 6.]],
                    [[-1., 0.], [7., 8.], [9., 9.]]], np.float32)
    mask = np.array([[1, 1, 1], [1, 1, 0]], np.int32)
    expected = {
        "cls": [[1, 2], [-1, 0]],
        "mean": [[3, 4 / 3], [3, 4]],
        "max": [[5, 6], [7, 8]],
    }
    # The same rows with two padding columns of huge values: mean and max must ignore them.
    padded = np.concatenate([seq, np.full([2, 2, 2], 1e6, np.float32)], axis=1)
    padded_mask = np.concatenate([mask, np.zeros([2, 2], np.int32)], axis=1)
    for pooling, want in expected.items():
        np.testing.assert_allclose(siamese.pool(seq, mask, pooling).numpy(), want, rtol=1e-6)
        np.testing.assert_allclose(siamese.pool(padded, padded_mask, pooling).numpy(), want,
                                   rtol=1e-6)
    # Negative values everywhere: max over real tokens, not max with padding zeros.
    negative = -np.abs(seq) - 1
    np.testing.assert_allclose(siamese.pool(negative, mask, "max").numpy()[1], [-2, -1])
    with pytest.raises(ValueError, match="pooling"):
        siamese.pool(seq, mask, "sum")


@pytest.mark.parametrize("pooling", ["mean", "max"])
def test_encoder_vectors_do_not_depend_on_padding(pooling):
    keras.utils.set_random_seed(0)
    model = siamese.BiEncoder.from_config_object(_tiny_config(), pooling=pooling)
    ids = [2, 5, 7, 11, 3]
    short = {"input_ids": tf.constant([ids]), "input_mask": tf.ones([1, 5], tf.int32),
             "segment_ids": tf.zeros([1, 5], tf.int32)}
    long_ = {"input_ids": tf.constant([ids + [0] * 7]),
             "input_mask": tf.constant([[1] * 5 + [0] * 7]),
             "segment_ids": tf.zeros([1, 12], tf.int32)}
    np.testing.assert_allclose(model.encode(short).numpy(), model.encode(long_).numpy(),
                               atol=1e-5)


# ------------------------------------------------------------- model scores


def _pair_batch(rows_a, rows_b, length=8):
    feats = {}
    for prefix, rows in (("a_", rows_a), ("b_", rows_b)):
        ids = np.zeros([len(rows), length], np.int32)
        mask = np.zeros_like(ids)
        for i, row in enumerate(rows):
            ids[i, :len(row)] = row
            mask[i, :len(row)] = 1
        feats[prefix + "input_ids"] = tf.constant(ids)
        feats[prefix + "input_mask"] = tf.constant(mask)
        feats[prefix + "segment_ids"] = tf.zeros_like(ids)
    return feats


@pytest.mark.parametrize("similarity,family", [("cosine", "bert"), ("dot", "bert"),
                                               ("cosine", "albert")])
def test_score_equals_similarity_of_vectors_computed_on_each_text_alone(similarity, family):
    keras.utils.set_random_seed(1)
    config = _tiny_config()
    if family == "albert":
        from modeling.albert import AlbertConfig  # pylint: disable=import-outside-toplevel
        config = AlbertConfig.from_dict(dict(config.to_dict(), embedding_size=8))
    model = siamese.BiEncoder.from_config_object(config, family=family, pooling="mean",
                                                 similarity=similarity)
    rows_a = [[2, 5, 7, 3], [2, 8, 10, 6, 3], [2, 9, 3]]
    rows_b = [[2, 6, 7, 3], [2, 5, 3], [2, 11, 10, 8, 7, 3]]
    scores = model(_pair_batch(rows_a, rows_b), training=False)["score"].numpy()

    def alone(row):  # the encoder on one unpadded text, mean over its tokens in numpy
        out = model.encoder({"input_ids": tf.constant([row]),
                             "input_mask": tf.ones([1, len(row)], tf.int32),
                             "segment_ids": tf.zeros([1, len(row)], tf.int32)}, training=False)
        return out["sequence_output"].numpy()[0].astype(np.float64).mean(axis=0)

    for i, (a, b) in enumerate(zip(rows_a, rows_b)):
        u, v = alone(a), alone(b)
        want = _np_cos(u, v) if similarity == "cosine" else float(u @ v)
        np.testing.assert_allclose(scores[i], want, rtol=1e-4, atol=1e-5)


def test_registered_task_and_config_round_trip():
    task = registry.tasks.get("siamese")
    assert task.job_class is siamese_job.SiameseJob and task.model_class is siamese.BiEncoder
    model = siamese.BiEncoder.from_config_object(_tiny_config(), pooling="max",
                                                 similarity="dot", loss="softmax", num_labels=3,
                                                 scale=5.0)
    again = siamese.BiEncoder.from_config(model.get_config())
    assert (again.pooling, again.similarity, again.loss_type, again.num_labels, again.scale) == (
        "max", "dot", "softmax", 3, 5.0)
    assert tuple(again.output_weights.shape) == (3, 48)
    with pytest.raises(ValueError, match="num_labels"):
        siamese.BiEncoder(model.encoder, loss="softmax")


# -------------------------------------------------------------------- losses

U = np.array([[1.0, 0.0, 0.5], [0.2, 1.0, -0.3], [-0.5, 0.4, 1.0], [0.3, 0.3, 0.3]], np.float32)
V = np.array([[0.9, 0.1, 0.4], [0.0, 1.2, 0.1], [0.5, -0.2, 0.8], [1.0, -1.0, 0.0]], np.float32)


def _np_log_softmax(x):
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


@pytest.mark.parametrize("similarity,scale", [("cosine", 20.0), ("dot", 1.0), ("cosine", 2.5)])
def test_in_batch_loss_against_numpy(similarity, scale):
    u, v = U.astype(np.float64), V.astype(np.float64)
    if similarity == "cosine":
        u = u / np.linalg.norm(u, axis=1, keepdims=True)
        v = v / np.linalg.norm(v, axis=1, keepdims=True)
    logits = scale * u @ v.T
    want = -np.diag(_np_log_softmax(logits))
    loss, correct = siamese.in_batch_negatives_loss(U, V, similarity, scale)
    np.testing.assert_allclose(loss.numpy(), want, rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(correct.numpy(), (logits.argmax(1) == np.arange(4)))

    # Row 3 is padding: it is no negative of rows 0-2.
    weights = np.array([1, 1, 1, 0], np.float32)
    loss, _ = siamese.in_batch_negatives_loss(U, V, similarity, scale, weights)
    want3 = -np.diag(_np_log_softmax(logits[:3, :3]))
    np.testing.assert_allclose(loss.numpy()[:3], want3, rtol=1e-4, atol=1e-6)


def test_softmax_and_cosine_losses_against_numpy():
    rng = np.random.RandomState(0)
    w = rng.randn(3, 9).astype(np.float32)
    b = np.array([0.1, -0.2, 0.3], np.float32)
    logits = siamese.softmax_pair_logits(U, V, w, b).numpy()
    feats = np.concatenate([U, V, np.abs(U - V)], axis=1).astype(np.float64)
    np.testing.assert_allclose(logits, feats @ w.T + b, rtol=1e-5, atol=1e-5)

    labels = np.array([1.0, 0.0, 0.5, -0.2], np.float32)
    loss, cos = siamese.cosine_regression_loss(U, V, labels)
    np.testing.assert_allclose(cos.numpy(), _np_cos(U, V), rtol=1e-5)
    np.testing.assert_allclose(loss.numpy(), (_np_cos(U, V) - labels) ** 2, rtol=1e-4,
                               atol=1e-7)


@pytest.mark.parametrize("loss", ["in_batch", "softmax", "cosine"])
def test_model_loss_is_the_weighted_mean_of_the_reference(loss):
    keras.utils.set_random_seed(2)
    model = siamese.BiEncoder.from_config_object(_tiny_config(), loss=loss, num_labels=2,
                                                 scale=10.0)
    feats = _pair_batch([[2, 5, 3], [2, 6, 7, 3], [2, 8, 3], [2, 9, 9, 3]],
                        [[2, 6, 3], [2, 5, 7, 3], [2, 10, 3], [2, 11, 3]])
    feats["is_real_example"] = tf.constant([1, 1, 1, 0])
    feats["label_ids"] = (tf.constant([1, 0, 1, 1]) if loss == "softmax"
                          else tf.constant([0.9, 0.1, 0.5, 0.0]))
    value, metrics = model.compute_loss_and_metrics(feats, training=False)
    out = model(feats, training=False)
    u, v = out["u"].numpy().astype(np.float64), out["v"].numpy().astype(np.float64)
    if loss == "in_batch":
        un = u / np.linalg.norm(u, axis=1, keepdims=True)
        vn = v / np.linalg.norm(v, axis=1, keepdims=True)
        per = -np.diag(_np_log_softmax(10.0 * un[:3] @ vn[:3].T))
    elif loss == "softmax":
        per = -_np_log_softmax(out["logits"].numpy().astype(np.float64))[
            np.arange(3), [1, 0, 1]]
    else:
        per = (_np_cos(u, v)[:3] - np.array([0.9, 0.1, 0.5])) ** 2
    np.testing.assert_allclose(float(value), per.mean(), rtol=1e-4)
    total, count = metrics["loss"]
    assert float(count) == 3.0


def test_retrieval_metrics_on_known_ranks():
    queries = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    candidates = np.array([[1.0, 0.1], [0.1, 1.0], [-1.0, 0.0]])
    # query 0 -> candidate 0 (rank 1); query 1 -> candidate 2 (rank 3); query 2 -> 1 (rank 1).
    got = siamese_job.retrieval_metrics(queries, candidates, [0, 2, 1], "cosine", ks=(1, 2))
    assert got == pytest.approx({"recall_at_1": 2 / 3, "recall_at_2": 2 / 3,
                                 "mrr": (1 + 1 / 3 + 1) / 3})


# ----------------------------------------------------------------------- job

# A generated paraphrase set: 12 concepts, each with a word used in queries
# and a DIFFERENT word used in the stored questions (no shared content
# token), so an untrained encoder cannot match them; training on some
# concept pairs must teach it the correspondence for unseen pairs.
QUERY_WORDS = ["car", "bill", "phone", "card", "flight", "room", "loan", "mail", "game",
               "song", "desk", "shoe"]
STORED_WORDS = ["auto", "invoice", "mobile", "debit", "plane", "hotel", "credit", "post",
                "match", "tune", "table", "boot"]
FILLER = ["how", "do", "i", "fix", "my", "and", "help", "with", "issue"]
JOB_VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + QUERY_WORDS + STORED_WORDS + FILLER


def _paraphrase_pairs():
    combos = [(i, j) for i in range(12) for j in range(12) if i != j]
    rng = np.random.RandomState(0)
    rng.shuffle(combos)
    lines = ["how do i fix my %s and my %s\t%s %s issue help"
             % (QUERY_WORDS[i], QUERY_WORDS[j], STORED_WORDS[i], STORED_WORDS[j])
             for i, j in combos]
    return lines[:108], lines[108:]  # 108 training pairs, 24 held-out (unseen combinations)


@pytest.fixture
def job_files(tmp_path):
    (tmp_path / "vocab.txt").write_text("\n".join(JOB_VOCAB) + "\n")
    config = config_lib.BertConfig(vocab_size=len(JOB_VOCAB), hidden_size=32,
                                   num_hidden_layers=1, num_attention_heads=2,
                                   intermediate_size=64, max_position_embeddings=32,
                                   type_vocab_size=2)
    config.to_json_file(str(tmp_path / "bert_config.json"))
    train, dev = _paraphrase_pairs()
    (tmp_path / "train.tsv").write_text("\n".join(train) + "\n")
    (tmp_path / "dev.tsv").write_text("\n".join(dev) + "\n")
    return tmp_path


def _job(files, out, **kwargs):
    values = dict(data_dir=str(files), bert_config_file=str(files / "bert_config.json"),
                  vocab_file=str(files / "vocab.txt"), output_dir=str(out), max_seq_length=16,
                  train_batch_size=12, eval_batch_size=8, learning_rate=4e-3,
                  num_train_epochs=10.0, warmup_proportion=0.1, log_steps=1000,
                  steps_per_loop=90, save_checkpoints_steps=10000, seed=3, scale=20.0)
    values.update(kwargs)
    return siamese_job.SiameseJob(**values)


def test_in_batch_training_improves_held_out_recall_over_the_untrained_model(job_files):
    """Budget fixed in advance: 90 updates (108 pairs / batch 12 x 10 epochs), lr 4e-3,
    1-layer 32-wide BERT, seed 3. Held out: 24 unseen concept combinations, each query
    ranked against all 24 stored texts (chance recall@1 = 1/24)."""
    before = siamese_job.run(_job(job_files, job_files / "untrained", do_eval=True))
    after = siamese_job.run(_job(job_files, job_files / "trained", do_train=True,
                                 do_eval=True))
    assert after.eval_results["global_step"] == 90
    r0, r1 = before.eval_results["eval_recall_at_1"], after.eval_results["eval_recall_at_1"]
    assert r0 <= 0.25, before.eval_results
    assert r1 >= 0.7 and r1 >= r0 + 0.5, (r0, r1)
    assert after.eval_results["eval_mrr"] > before.eval_results["eval_mrr"]
    assert os.path.exists(job_files / "trained" / "eval_results.txt")

    # The trained checkpoint is what build_index encodes with: its encoder loads
    # from the run's output dir and gives the held-out queries their stored texts.
    from modeling.serving import matching  # pylint: disable=import-outside-toplevel
    encoder = matching.load_sentence_encoder(
        str(job_files / "bert_config.json"), str(job_files / "vocab.txt"),
        str(job_files / "trained"), max_seq_length=16)
    _, dev = _paraphrase_pairs()
    queries = [line.split("\t")[0] for line in dev]
    stored = [line.split("\t")[1] for line in dev]
    index = matching.build_index(encoder, [str(i) for i in range(len(stored))], stored,
                                 str(job_files / "index.npz"))
    hits = index.search(encoder.encode(queries), top_k=1)
    recall = np.mean([h[0][0] == str(i) for i, h in enumerate(hits)])
    assert recall == pytest.approx(r1)


def test_softmax_job_trains_and_cosine_records_feed_the_loss(job_files):
    train, dev = _paraphrase_pairs()
    lines = []
    for k, line in enumerate(train[:24]):
        a, b = line.split("\t")
        lines.append("%s\t%s\t%s" % (a, b if k % 2 else train[k + 30].split("\t")[1],
                                     "1" if k % 2 else "0"))
    (job_files / "train3.tsv").write_text("\n".join(lines) + "\n")
    (job_files / "dev3.tsv").write_text("\n".join(lines[:8]) + "\n")
    result = siamese_job.run(_job(job_files, job_files / "sm", loss="softmax",
                                  train_file="train3.tsv", dev_file="dev3.tsv",
                                  num_train_epochs=1.0, do_train=True, do_eval=True))
    assert result.label_list == ["0", "1"]
    assert 0.0 <= result.eval_results["eval_accuracy"] <= 1.0
    # Cosine regression: float labels through the TFRecord round trip into the loss.
    scored = [l.rsplit("\t", 1)[0] + "\t" + ("0.9" if l.endswith("1") else "0.1")
              for l in lines[:6]]
    (job_files / "sts.tsv").write_text("\n".join(scored) + "\n")
    examples = pairs.read_pairs(str(job_files / "sts.tsv"), "float")
    assert [e.label for e in examples] == [0.1, 0.9, 0.1, 0.9, 0.1, 0.9]
    path = str(job_files / "sts.tf_record")
    from data import tokenization  # pylint: disable=import-outside-toplevel
    tokenizer = tokenization.FullTokenizer(str(job_files / "vocab.txt"))
    assert pairs.write_pair_records(examples, path, tokenizer, 16, "float",
                                    pad_to_multiple=4) == 8
    batch = next(iter(pairs.pair_input_fn_builder(path, 16, False, 8, "float")()))
    np.testing.assert_allclose(batch["label_ids"].numpy(), [0.1, 0.9] * 3 + [0, 0], rtol=1e-6)
    np.testing.assert_array_equal(batch["is_real_example"].numpy(), [1] * 6 + [0, 0])
    ids = tokenizer.convert_tokens_to_ids(["[CLS]"] + examples[0].text_b.split() + ["[SEP]"])
    np.testing.assert_array_equal(batch["b_input_ids"].numpy()[0, :len(ids)], ids)
    model = siamese.BiEncoder.from_config_object(
        config_lib.BertConfig.from_json_file(str(job_files / "bert_config.json")),
        loss="cosine")
    value, _ = model.compute_loss_and_metrics(batch, training=False)
    out = model(batch, training=False)
    want = np.mean((_np_cos(out["u"].numpy()[:6], out["v"].numpy()[:6]) -
                    np.array([0.1, 0.9] * 3)) ** 2)
    np.testing.assert_allclose(float(value), want, rtol=1e-4)


@pytest.mark.parametrize("score", ["nan", "inf", "-inf", " NaN "])
def test_a_score_that_is_not_finite_is_refused_naming_file_and_line(tmp_path, score):
    path = tmp_path / "dev.tsv"
    path.write_text("car\tauto\t0.9\nsun\tmoon\t%s\n" % score)
    with pytest.raises(pairs.DataError) as error:
        pairs.read_pairs(str(path), "float")
    assert str(error.value) == ("%s:2: label %r is not a finite number; expected a float score "
                                "(cosine loss)" % (path, score.strip()))


def test_bad_lines_and_flags_are_one_line_errors(job_files):
    (job_files / "bad.tsv").write_text("a red cat\tthe cat\nonly one column\n")
    with pytest.raises(siamese_job.SiameseJobError,
                       match=r"bad\.tsv:2: expected 2 tab-separated columns"):
        siamese_job.run(_job(job_files, job_files / "o1", train_file="bad.tsv", do_train=True))
    (job_files / "badscore.tsv").write_text("car\tauto\thigh\n")
    with pytest.raises(siamese_job.SiameseJobError, match=r"badscore\.tsv:1: label 'high' is "
                                                          r"not a number"):
        siamese_job.run(_job(job_files, job_files / "o2", train_file="badscore.tsv",
                             loss="cosine", do_train=True))
    with pytest.raises(siamese_job.SiameseJobError, match="--pooling=sum"):
        siamese_job.run(_job(job_files, job_files / "o3", pooling="sum", do_train=True))
    with pytest.raises(siamese_job.SiameseJobError, match="train_batch_size of at least 2"):
        siamese_job.run(_job(job_files, job_files / "o4", train_batch_size=1, do_train=True))
    with pytest.raises(siamese_job.SiameseJobError, match="--model_family=gpt2: the bi-encoder"):
        siamese_job.run(_job(job_files, job_files / "o5", model_family="gpt2", do_train=True))
    with pytest.raises(pairs.DataError, match=r"q\.tsv:2: id 'x' already used on line 1"):
        (job_files / "q.tsv").write_text("x\tfirst\nx\tsecond\n")
        pairs.read_questions(str(job_files / "q.tsv"))
