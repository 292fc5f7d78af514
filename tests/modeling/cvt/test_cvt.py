"""CVT (modeling/cvt): the views' receptive fields, the losses, padding, the job end to end."""

import math
import os
import re

import numpy as np
import pytest
import tensorflow as tf

from modeling import registry
from modeling.cvt import data as cvt_data
from modeling.cvt import job as cvt_job
from modeling.cvt.model import AUXILIARY_VIEWS
from modeling.cvt.model import CvtTagger

VOCAB = 30
LENGTH = 7


def _tiny(num_labels=3, **kwargs):
    tf.keras.utils.set_random_seed(0)
    options = dict(embedding_dim=8, lstm_dim=8, hidden_dim=32, dropout=0.0)
    options.update(kwargs)
    return CvtTagger(VOCAB, num_labels, **options).build_all(LENGTH)


def _views(model, ids, mask):
    out = model.views(tf.constant(ids), tf.constant(mask), training=False)
    return {name: value.numpy() for name, value in out.items()}


def test_each_view_sees_only_what_it_may():
    """Perturb word s; position t of each view changes iff the view may see word s."""
    model = _tiny()
    rng = np.random.RandomState(0)
    ids = rng.randint(3, VOCAB, size=[1, LENGTH]).astype(np.int32)
    mask = np.ones_like(ids)
    base = _views(model, ids, mask)
    may_see = {
        "forward": lambda s, t: s <= t,
        "backward": lambda s, t: s >= t,
        "future": lambda s, t: s < t,
        "past": lambda s, t: s > t,
        "primary": lambda s, t: True,
    }
    for s in range(LENGTH):
        changed = ids.copy()
        changed[0, s] = 3 + (ids[0, s] - 3 + 7) % (VOCAB - 3)
        assert changed[0, s] != ids[0, s]
        out = _views(model, changed, mask)
        for view, allowed in may_see.items():
            for t in range(LENGTH):
                diff = np.max(np.abs(out[view][0, t] - base[view][0, t]))
                if allowed(s, t):
                    assert diff > 1e-6, (view, s, t, diff)
                else:
                    assert diff == 0.0, (view, s, t, diff)


def test_unlabeled_loss_leaves_primary_module_alone():
    """stop_gradient: the cross-view loss has zero gradient w.r.t. the primary module
    (and the second LSTM layer, which only the primary reads), but trains the
    auxiliary modules and the shared first layer and embeddings."""
    model = _tiny(dropout=0.2)
    rng = np.random.RandomState(1)
    ids = tf.constant(rng.randint(3, VOCAB, size=[2, LENGTH]), tf.int32)
    mask = tf.constant([[1] * LENGTH, [1] * 4 + [0] * (LENGTH - 4)], tf.int32)
    features = {"unlabeled_word_ids": ids, "unlabeled_input_mask": mask}
    with tf.GradientTape() as tape:
        loss, metrics = model.compute_loss_and_metrics(features, training=True)
    assert "loss" not in metrics and "cvt_loss" in metrics
    variables = model.trainable_variables
    grads = dict(zip([v.path for v in variables], tape.gradient(loss, variables)))
    untouched = (model.primary.trainable_variables + model.lstm2_fwd.trainable_variables
                 + model.lstm2_bwd.trainable_variables)
    assert len(untouched) == 4 + 3 + 3
    for v in untouched:
        g = grads[v.path]
        assert g is None or float(tf.reduce_max(tf.abs(g))) == 0.0, v.path
    trained = (model.embedding.trainable_variables + model.lstm1_fwd.trainable_variables
               + model.lstm1_bwd.trainable_variables)
    for view in AUXILIARY_VIEWS:
        trained += model.auxiliary[view].trainable_variables
    for v in trained:
        g = grads[v.path]
        assert g is not None and float(tf.reduce_max(tf.abs(tf.convert_to_tensor(g)))) > 0, \
            v.path


def _set_constant_logits(module, bias):
    kernel, b = module.output_layer.kernel, module.output_layer.bias
    kernel.assign(np.zeros(kernel.shape, np.float32))
    b.assign(np.array(bias, np.float32))


def test_losses_equal_hand_computed_values():
    """Primary logits fixed to [1, 2, 0] everywhere: CE(label) = log(e + e^2 + 1) - logit.
    Auxiliary logits fixed to 0: each view's CE to any target is log(3)."""
    model = _tiny()
    _set_constant_logits(model.primary, [1.0, 2.0, 0.0])
    for view in AUXILIARY_VIEWS:
        _set_constant_logits(model.auxiliary[view], [0.0, 0.0, 0.0])
    features = {
        "word_ids": tf.constant([[5, 6, 7, 0, 0, 0, 0], [8, 9, 0, 0, 0, 0, 0]], tf.int32),
        "input_mask": tf.constant([[1, 1, 1, 0, 0, 0, 0], [1, 1, 0, 0, 0, 0, 0]], tf.int32),
        "label_ids": tf.constant([[0, 1, 2, 2, 2, 2, 2], [1, 1, 0, 0, 0, 0, 0]], tf.int32),
        "unlabeled_word_ids": tf.constant([[4, 5, 6, 7, 8, 0, 0]], tf.int32),
        "unlabeled_input_mask": tf.constant([[1, 1, 1, 1, 1, 0, 0]], tf.int32),
    }
    loss, metrics = model.compute_loss_and_metrics(features, training=False)
    # log(e + e^2 + 1) = 2.4076059644...; labels 0, 1, 2, 1, 1 over the 5 real words.
    ce = {0: 1.4076059644, 1: 0.4076059644, 2: 2.4076059644}
    labeled = (ce[0] + ce[1] + ce[2] + ce[1] + ce[1]) / 5
    total, count = metrics["loss"]
    assert float(count) == 5.0
    assert float(total) / 5 == pytest.approx(labeled, abs=1e-5)
    # accuracy: the prediction is label 1 everywhere -> 3 of 5
    assert float(metrics["accuracy"][0]) == 3.0
    # The future view predicts every word but the first, the past view every word
    # but the last (nothing to read there), as the authors' masks.
    counts = {"forward": 5, "backward": 5, "future": 4, "past": 4}
    for view in AUXILIARY_VIEWS:
        s, c = metrics["cvt_%s_loss" % view]
        assert float(c) == counts[view], view
        assert float(s) / counts[view] == pytest.approx(math.log(3), abs=1e-5)
    assert float(loss) == pytest.approx(labeled + 4 * math.log(3), abs=1e-5)


def test_primary_module_reads_both_layers_as_numpy():
    """Clark et al.'s NN(h1 (+) h2): the primary module's input is [h1_fwd; h1_bwd; h2]."""
    model = _tiny(lstm_dim=8, second_lstm_dim=6)
    assert tuple(model.primary.hidden.kernel.shape) == (2 * 8 + 2 * 6, 32)
    rng = np.random.RandomState(5)
    ids = tf.constant(rng.randint(3, VOCAB, size=[2, LENGTH]), tf.int32)
    mask = tf.constant([[1] * LENGTH, [1] * 5 + [0] * (LENGTH - 5)], tf.int32)
    h1_fwd, h1_bwd, h2 = (x.numpy().astype(np.float64) for x in model.encode(ids, mask))
    both = np.concatenate([h1_fwd, h1_bwd, h2], axis=-1)
    hidden, out = model.primary.hidden, model.primary.output_layer
    expected = (np.maximum(both @ hidden.kernel.numpy() + hidden.bias.numpy(), 0.0)
                @ out.kernel.numpy() + out.bias.numpy())
    got = model.views(ids, mask, training=False, auxiliary=False)["primary"].numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_authors_options_full_view_label_smoothing_unlabeled_dropout():
    """The authors' code's extras, as options: a linear "full" module on [h1; h2];
    label smoothing on the labelled loss in training only; a dropout of its own for the
    student pass on unlabelled words."""
    with pytest.raises(ValueError, match="auxiliary_views must be distinct names"):
        CvtTagger(VOCAB, 3, auxiliary_views=("forward", "sideways"))
    model = _tiny(auxiliary_views=AUXILIARY_VIEWS + ("full",), label_smoothing=0.1,
                  unlabeled_dropout=0.5)
    assert model.auxiliary_views == AUXILIARY_VIEWS + ("full",)
    assert not model.auxiliary["full"].activate and model.auxiliary["past"].activate
    assert CvtTagger.from_config(model.get_config()).auxiliary_views == model.auxiliary_views
    rng = np.random.RandomState(2)
    ids = tf.constant(rng.randint(3, VOCAB, size=[2, LENGTH]), tf.int32)
    mask = tf.constant([[1] * LENGTH, [1] * 4 + [0] * (LENGTH - 4)], tf.int32)
    h1_fwd, h1_bwd, h2 = (x.numpy().astype(np.float64) for x in model.encode(ids, mask))
    both = np.concatenate([h1_fwd, h1_bwd, h2], axis=-1)
    full = model.auxiliary["full"]
    expected = ((both @ full.hidden.kernel.numpy() + full.hidden.bias.numpy())
                @ full.output_layer.kernel.numpy() + full.output_layer.bias.numpy())
    np.testing.assert_allclose(model.views(ids, mask)["full"].numpy(), expected,
                               rtol=1e-5, atol=1e-5)
    labels = tf.constant(rng.randint(0, 3, size=[2, LENGTH]), tf.int32)
    features = {"word_ids": ids, "input_mask": mask, "label_ids": labels}
    logits = model.views(ids, mask, auxiliary=False)["primary"].numpy().astype(np.float64)
    log_p = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    real = mask.numpy().astype(bool)
    gold = np.eye(3)[labels.numpy()]
    plain = -(gold * log_p).sum(-1)[real].mean()
    smooth = -((0.9 * gold + 0.1 / 3) * log_p).sum(-1)[real].mean()
    (total, count), _ = model.labeled_loss(features, training=True)  # dropout 0 here
    assert float(total) / float(count) == pytest.approx(smooth, rel=1e-5)
    (total, count), _ = model.labeled_loss(features, training=False)
    assert float(total) / float(count) == pytest.approx(plain, rel=1e-5)
    # The student pass uses unlabeled_dropout (0.5), the labelled pass dropout (0).
    assert model.unlabeled_dropout.rate == 0.5 and model.dropout.rate == 0.0
    quiet = model.unlabeled_losses(ids, mask, training=False)
    noisy = model.unlabeled_losses(ids, mask, training=True)
    assert set(noisy) == set(AUXILIARY_VIEWS + ("full",))
    assert any(abs(float(noisy[v][0]) - float(quiet[v][0])) > 1e-4 for v in noisy)


def test_padding_is_ignored():
    """Longer padding holding arbitrary words and labels changes no loss and no real logit."""
    model = _tiny(num_labels=4)
    short = {"word_ids": [[5, 9, 12, 4]], "input_mask": [[1, 1, 1, 1]],
             "label_ids": [[1, 0, 3, 2]]}
    long = {"word_ids": [[5, 9, 12, 4, 17, 2, 25, 8]],
            "input_mask": [[1, 1, 1, 1, 0, 0, 0, 0]], "label_ids": [[1, 0, 3, 2, 3, 3, 1, 2]]}
    results = []
    for f in (short, long):
        features = {k: tf.constant(v, tf.int32) for k, v in f.items()}
        features["unlabeled_word_ids"] = features["word_ids"]
        features["unlabeled_input_mask"] = features["input_mask"]
        loss, metrics = model.compute_loss_and_metrics(features, training=False)
        views = _views(model, f["word_ids"], f["input_mask"])
        results.append((float(loss), {k: (float(s), float(c)) for k, (s, c) in metrics.items()},
                        {k: v[0, :4] for k, v in views.items()}))
    (loss_a, metrics_a, views_a), (loss_b, metrics_b, views_b) = results
    assert loss_a == pytest.approx(loss_b, abs=1e-5)
    for key in metrics_a:
        assert metrics_a[key] == pytest.approx(metrics_b[key], abs=1e-5), key
    for key in views_a:
        np.testing.assert_allclose(views_a[key], views_b[key], atol=1e-5)


def test_registered_and_bad_input_is_one_line(tmp_path):
    assert registry.tasks.get("cvt").job_class is cvt_job.CvtJob
    train = tmp_path / "train.txt"
    train.write_text("the O\nbaker B-JOB\n\n")
    with pytest.raises(cvt_job.CvtJobError, match="--use_unlabeled needs --unlabeled_file"):
        cvt_job.run(cvt_job.CvtJob(train_file=str(train), output_dir=str(tmp_path / "o")))
    with pytest.raises(cvt_job.CvtJobError, match="--unlabeled_start_step must be >= 0, got -1"):
        cvt_job.run(cvt_job.CvtJob(output_dir=str(tmp_path / "o"), unlabeled_start_step=-1))
    bad = tmp_path / "bad.txt"
    bad.write_text("the O\nbaker JOB\n")
    with pytest.raises(cvt_job.CvtJobError, match=r"bad.txt:2: tag 'JOB'"):
        cvt_job.run(cvt_job.CvtJob(train_file=str(bad), use_unlabeled=False,
                                   output_dir=str(tmp_path / "o")))


def _read_conll(path):
    sentences, block = [], []
    for line in open(path, encoding="utf-8"):
        if line.strip():
            block.append(tuple(line.split()))
        else:
            sentences.append(block)
            block = []
    return sentences


def test_demo_split_keeps_held_out_sentences_out_of_training(tmp_path):
    """The generated demo: held-out sentences never trained on; labelled sentences use
    only seen words; every unseen word is in the unlabelled text; the held-out sets
    have unseen words in neutral frames; each class word carries its class's tag."""
    paths = cvt_data.write_demo_data(str(tmp_path))
    tagged = {name: _read_conll(paths[name]) for name in ("train", "dev", "test")}
    assert [len(tagged[n]) for n in ("train", "dev", "test")] == [40, 120, 120]
    text = lambda sentence: " ".join(w for w, _ in sentence)
    sentences = {name: {text(s) for s in tagged[name]} for name in tagged}
    unlabeled = [line.split() for line in open(paths["unlabeled"], encoding="utf-8")]
    assert len(unlabeled) == 600
    sentences["unlabeled"] = {" ".join(words) for words in unlabeled}
    for held_out in ("dev", "test"):
        for trained in ("train", "unlabeled"):
            assert not sentences[held_out] & sentences[trained]
    unseen, seen = set(paths["unseen_words"]), set(paths["seen_words"])
    assert len(unseen) == len(seen) == 20 and not unseen & seen
    train_words = {w for s in tagged["train"] for w, _ in s}
    assert not train_words & unseen and len(seen & train_words) >= 15
    assert unseen <= {w for words in unlabeled for w in words}
    gold = {w: ("O" if t == "O" else "B-" + t)
            for t, halves in cvt_data.DEMO_CLASSES.items() for w in halves[0] + halves[1]}
    subjects = "|".join(cvt_data.DEMO_SUBJECTS)
    neutral = [re.compile(re.escape(f).replace(r"\{p\}", "(?:%s)" % subjects)
                          .replace(r"\{\}", r"\S+")) for f in cvt_data.DEMO_NEUTRAL_FRAMES]
    neutral_unseen = 0
    for name in tagged:
        for s in tagged[name]:
            class_words = [(w, tag) for w, tag in s if w in gold]
            assert len(class_words) == 1 and class_words[0][1] == gold[class_words[0][0]], s
            assert all(tag == "O" for w, tag in s if w not in gold)
            neutral_unseen += (name == "test" and class_words[0][0] in unseen
                               and any(p.fullmatch(text(s)) for p in neutral))
    assert neutral_unseen >= 20
    vocab = [line.strip() for line in open(paths["vocab"], encoding="utf-8")]
    assert vocab[:3] == ["<S>", "</S>", "<UNK>"] and set(gold) <= set(vocab)


def test_rampup_scales_the_cross_view_loss(tmp_path):
    """unlabeled_weight_scale: 0 before the start batch, then linear to 1; the model
    multiplies the cross-view term by it (scale 0: the labelled loss alone)."""
    path = str(tmp_path / "plain.tf_record")
    cvt_data.write_unlabeled_records([["a"], ["b"]], _Vocab(), 4, path)
    tagged = lambda _=None: tf.data.Dataset.from_tensors(
        {"word_ids": tf.zeros([1, 4], tf.int64)}).repeat()
    fn = cvt_data.unlabeled_input_fn(tagged, path, 4, 2, seed=0, start_batch=2,
                                     rampup_batches=4)
    scales = [float(b["unlabeled_weight_scale"][0]) for b in fn().take(8)]
    assert scales == pytest.approx([0, 0, 0.25, 0.5, 0.75, 1, 1, 1])
    model = _tiny()
    features = {
        "word_ids": tf.constant([[5, 6, 7, 0]], tf.int32),
        "input_mask": tf.constant([[1, 1, 1, 0]], tf.int32),
        "label_ids": tf.constant([[0, 1, 2, 0]], tf.int32),
        "unlabeled_word_ids": tf.constant([[4, 5, 6, 7], [8, 9, 0, 0]], tf.int32),
        "unlabeled_input_mask": tf.constant([[1, 1, 1, 1], [1, 1, 0, 0]], tf.int32),
    }
    full, metrics = model.compute_loss_and_metrics(features, training=False)
    labeled = float(metrics["loss"][0]) / float(metrics["loss"][1])
    cvt = float(metrics["cvt_loss"][0])
    assert cvt > 0.1
    for scale, expected in ((0.0, labeled), (0.25, labeled + 0.25 * cvt), (1.0, float(full))):
        scaled = dict(features, unlabeled_weight_scale=tf.fill([2], scale))
        loss, _ = model.compute_loss_and_metrics(scaled, training=False)
        assert float(loss) == pytest.approx(expected, abs=1e-5), scale


class _Vocab:
    def ids(self, words):
        return [3 + ord(w[0]) % 20 for w in words]


def _unseen_accuracy(sentences, predictions, unseen):
    hits = total = 0
    for sentence, tags in zip(sentences, predictions):
        for (word, gold), tag in zip(sentence, tags):
            if word in unseen:
                total += 1
                hits += gold == tag
    return hits / total


def test_cvt_beats_the_labelled_only_tagger_on_held_out_sentences(tmp_path):
    """The demo at a fixed budget (the job's defaults but max_seq_length=16: 40 labelled
    sentences, 400 steps, the cross-view loss from step 100 rising to 0.5 by step 200,
    seed 1), CVT against the same tagger on the labelled batches only, on the held-out
    test sentences (never trained on, labelled or not). Measured with the paper's
    primary module (on h1 and h2) and the authors' masks of the future/past views,
    test F1 CVT / labelled only: seed 1 0.843 / 0.625, seed 2 0.844 / 0.596, seed 3
    0.764 / 0.617; share of the unseen words' tags right: 0.810 / 0.413, 0.762 / 0.397,
    0.683 / 0.302.
    Required: F1 gap >= 0.08 and unseen-word accuracy gap >= 0.2 -- the gain comes
    from the words only the unlabelled text shows. The job writes its results."""
    results, unseen_accuracy = {}, {}
    for use_unlabeled in (True, False):
        out = str(tmp_path / ("cvt" if use_unlabeled else "labelled"))
        result = cvt_job.run(cvt_job.CvtJob(output_dir=out, max_seq_length=16,
                                            use_unlabeled=use_unlabeled, log_steps=1000,
                                            seed=1))
        results[use_unlabeled] = result.eval_results
        assert result.eval_results["global_step"] == 400
        test = _read_conll(result.data_files["test"])
        unseen = {w for _, halves in cvt_data.DEMO_CLASSES.items() for w in halves[1]}
        unseen_accuracy[use_unlabeled] = _unseen_accuracy(test, result.test_predictions,
                                                          unseen)
    gap = results[True]["test_f1"] - results[False]["test_f1"]
    assert gap >= 0.08, (results[True]["test_f1"], results[False]["test_f1"])
    assert unseen_accuracy[True] - unseen_accuracy[False] >= 0.2, unseen_accuracy
    out = str(tmp_path / "cvt")
    with open(os.path.join(out, "eval_results.txt")) as f:
        written = dict(line.strip().split(" = ") for line in f)
    assert float(written["test_f1"]) == pytest.approx(results[True]["test_f1"])
    assert "eval_f1" in written and "eval_loss" in written
    lines = [line.split() for line in open(os.path.join(out, "test_predictions.txt"))
             if line.strip()]
    assert all(len(fields) == 3 for fields in lines)
    assert tf.train.latest_checkpoint(out) is not None
