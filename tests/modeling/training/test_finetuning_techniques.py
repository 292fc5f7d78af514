"""ULMFiT's fine-tuning techniques (modeling/training/finetuning_techniques.py and the
optimizer's per-variable learning-rate factors): slanted triangular rates, discriminative
rates by layer group, gradual unfreezing, through the optimizer, the Trainer and
classifier_job."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from data import processors
from modeling import albert as albert_lib
from modeling import bert as config_lib
from modeling.tasks import classifier_job
from modeling.tasks.classification import BertClassifier
from modeling.training import finetuning_techniques as ft
from modeling.training import optimization
from modeling.training import trainer as trainer_lib
from modeling.training.settings import TrainerSettings

SEQ, VOCAB, KEY_TOKEN = 8, 24, 7


def _bert_config(layers=2):
    return config_lib.BertConfig(
        vocab_size=VOCAB, hidden_size=16, num_hidden_layers=layers, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=16, type_vocab_size=2,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _classifier(layers=2, seed=0):
    keras.utils.set_random_seed(seed)
    return BertClassifier.from_config_object(_bert_config(layers), num_labels=2)


def _synthetic(n, seed):
    """Label 1 iff KEY_TOKEN occurs among the tokens (half of the examples)."""
    rng = np.random.RandomState(seed)
    ids = rng.randint(8, VOCAB, size=(n, SEQ)).astype("int32")
    ids[:, 0] = 2
    labels = (np.arange(n) % 2).astype("int32")
    positions = rng.randint(1, SEQ, size=n)
    ids[labels == 1, positions[labels == 1]] = KEY_TOKEN
    return {"input_ids": ids, "input_mask": np.ones_like(ids),
            "segment_ids": np.zeros_like(ids), "label_ids": labels}


def _input_fn(features, batch_size):
    def input_fn(input_context=None):
        per_replica = batch_size
        if input_context is not None:
            per_replica = input_context.get_per_replica_batch_size(batch_size)
        dataset = tf.data.Dataset.from_tensor_slices(features).repeat()
        return dataset.batch(per_replica, drop_remainder=True)
    return input_fn


def _group_names_and_values(model):
    return [(name, [v.numpy().copy() for v in variables])
            for name, variables in ft.variable_groups(model)]


# ------------------------------------------------------------------ STLR


def _paper_stlr(t, lr_max, total, cut_frac, ratio):
    """Howard & Ruder (2018), eq. 3, written out independently of the library."""
    cut = math.floor(total * cut_frac)
    if t < cut:
        p = t / cut
    else:
        p = 1 - (t - cut) / (cut * (1 / cut_frac - 1))
    return lr_max * (1 + p * (ratio - 1)) / ratio


def test_slanted_triangular_rate_is_the_papers_formula_at_chosen_steps():
    schedule = optimization.SlantedTriangular(0.01, 1000, cut_frac=0.1, ratio=32)
    assert schedule.cut == 100
    for t in (0, 1, 37, 50, 99, 100, 101, 550, 777, 999, 1000):
        np.testing.assert_allclose(float(schedule(t)), _paper_stlr(t, 0.01, 1000, 0.1, 32),
                                   rtol=1e-6, err_msg=str(t))
    # Hand-computed: lr_max / ratio at both ends, lr_max at the cut, and p = 0.5
    # half-way up (t = 50) and half-way down (t = 550): 0.01 * 16.5 / 32.
    for t, expected in ((0, 3.125e-4), (100, 0.01), (50, 0.00515625), (550, 0.00515625),
                        (1000, 3.125e-4), (5000, 3.125e-4)):
        np.testing.assert_allclose(float(schedule(t)), expected, rtol=1e-6, err_msg=str(t))
    # T * cut_frac not an integer: cut = floor(25 * 0.2) = 5; the fall never goes below
    # lr_max / ratio (the paper's p would turn negative near T).
    odd = optimization.SlantedTriangular(1.0, 25, cut_frac=0.2, ratio=4)
    for t in (0, 3, 5, 12, 24):
        np.testing.assert_allclose(float(odd(t)), max(_paper_stlr(t, 1.0, 25, 0.2, 4), 0.25),
                                   rtol=1e-6, err_msg=str(t))
    clone = optimization.SlantedTriangular.from_config(schedule.get_config())
    assert clone.get_config() == {"peak_learning_rate": 0.01, "num_train_steps": 1000,
                                  "cut_frac": 0.1, "ratio": 32}


def test_create_optimizer_with_stlr_follows_it_in_updates():
    optimizer = optimization.create_optimizer(0.01, 1000, 300, lr_schedule="stlr")
    assert isinstance(optimizer._learning_rate, optimization.SlantedTriangular)
    for t in (0, 100, 550):
        optimizer.iterations.assign(t)
        np.testing.assert_allclose(float(optimizer.learning_rate),
                                   _paper_stlr(t, 0.01, 1000, 0.1, 32), rtol=1e-6)
    assert isinstance(optimization.create_optimizer(0.01, 1000, 300)._learning_rate,
                      optimization.LinearWarmupLinearDecay)


def test_bad_settings_are_refused_with_one_line_naming_the_flag():
    cases = [
        (lambda: optimization.SlantedTriangular(0.1, 100, cut_frac=1.5), "--stlr_cut_frac"),
        (lambda: optimization.SlantedTriangular(0.1, 100, ratio=0.5), "--stlr_ratio"),
        (lambda: optimization.create_optimizer(0.1, 100, 0, lr_schedule="cosine"),
         "--lr_schedule"),
        (lambda: ft.LayerwiseLearningRates(layer_lr_decay=0.0), "--layer_lr_decay"),
        (lambda: ft.LayerwiseLearningRates(layer_lr_decay="x"), "--layer_lr_decay"),
        (lambda: ft.LayerwiseLearningRates(unfreeze_steps=-1), "--unfreeze_steps"),
        (lambda: ft.LayerwiseLearningRates(unfreeze_steps=1.5), "--unfreeze_steps"),
        (lambda: optimization.AdamWeightDecay(learning_rate_multipliers={"x": -1.0}),
         "multiplier of x"),
        (lambda: optimization.AdamWeightDecay(learning_rate_multipliers=3), "callable"),
    ]
    for make, flag in cases:
        with pytest.raises(ValueError, match=flag) as info:
            make()
        assert "\n" not in str(info.value)


# ------------------------------------------------------------ layer groups


def test_layer_groups_of_bert_and_albert_classifiers():
    model = _classifier(layers=2)
    groups = ft.variable_groups(model)
    assert [name for name, _ in groups] == ["embeddings", "layer_0", "layer_1", "top"]
    members = {name: [v.path for v in variables] for name, variables in groups}
    assert len(members["embeddings"]) == 5  # word, position, token type, LayerNorm gamma/beta
    assert all("/embeddings/" in p for p in members["embeddings"])
    assert all("/layer_0/" in p for p in members["layer_0"]) and len(members["layer_0"]) == 16
    assert all("/layer_1/" in p for p in members["layer_1"]) and len(members["layer_1"]) == 16
    assert sorted(p.split("/")[-2] + "/" + p.split("/")[-1] for p in members["top"]) == [
        "bert_classifier/output_bias", "bert_classifier/output_weights",
        "pooler/bias", "pooler/kernel"]
    # The optimizer sees paths only: the same groups from the paths alone.
    paths = [v.path for v in model.trainable_variables]
    ids, names = ft.layer_groups(paths)
    assert names == ["embeddings", "layer_0", "layer_1", "top"]
    assert {p: names[g] for p, g in zip(paths, ids)} == {
        p: name for name, ps in members.items() for p in ps}

    # ALBERT: factorised embeddings and their projection are one group, the one shared
    # layer is one group.
    keras.utils.set_random_seed(0)
    albert = albert_lib.AlbertConfig(
        vocab_size=VOCAB, embedding_size=8, hidden_size=16, num_hidden_layers=3,
        num_attention_heads=2, intermediate_size=32, max_position_embeddings=16)
    model = BertClassifier.from_config_object(albert, num_labels=2, family="albert")
    groups = dict(ft.variable_groups(model))
    assert list(groups) == ["embeddings", "layer_0", "top"]
    assert any("embedding_hidden_mapping_in" in v.path for v in groups["embeddings"])
    assert {v.path.split("/")[1] for v in groups["layer_0"]} == {"attention_0", "ffn_0"}
    # XLNet-style nesting: the first layer index in the path counts.
    assert ft.group_of_path("xlnet/layer_3/ff/layer_1/kernel") == (1, 3)
    assert ft.group_of_path("xlnet/word_embedding") == (0, "embeddings")
    assert ft.group_of_path("model/dense/kernel") == (2, "top")


def test_discriminative_factors_per_group_of_a_tiny_bert_classifier():
    """lr of the group k levels below the top = lr / 2.6**k: head and pooler 1, layer_1
    1/2.6, layer_0 1/2.6**2, embeddings 1/2.6**3 (L = 2 layers: 1/2.6**(L+1))."""
    model = _classifier(layers=2)
    paths = [v.path for v in model.trainable_variables]
    rates = ft.LayerwiseLearningRates(layer_lr_decay=2.6)
    factors = dict(zip(paths, rates(paths, tf.constant(0, tf.int64))))
    expected = {"top": 1.0, "layer_1": 0.38461538, "layer_0": 0.14792899,
                "embeddings": 0.05689577}
    for name, variables in ft.variable_groups(model):
        for v in variables:
            np.testing.assert_allclose(factors[v.path], expected[name], rtol=1e-6)
    plan = rates.plan(paths)
    assert [(name, first) for name, _, first, _ in plan] == [
        ("embeddings", 0), ("layer_0", 0), ("layer_1", 0), ("top", 0)]
    # Gradual unfreezing: the group k levels below the top starts at update k * N.
    unfreezing = ft.LayerwiseLearningRates(layer_lr_decay=2.6, unfreeze_steps=5)
    assert [first for _, _, first, _ in unfreezing.plan(paths)] == [15, 10, 5, 0]
    by_group = {name: variables[0].path for name, variables in ft.variable_groups(model)}
    for step, trained in ((0, {"top"}), (4, {"top"}), (5, {"top", "layer_1"}),
                          (10, {"top", "layer_1", "layer_0"}), (15, set(expected)),
                          (99, set(expected))):
        got = dict(zip(paths, unfreezing(paths, tf.constant(step, tf.int64))))
        for name, path in by_group.items():
            want = expected[name] if name in trained else 0.0
            np.testing.assert_allclose(float(got[path]), want, rtol=1e-6,
                                       err_msg="%s at %d" % (name, step))


# ----------------------------------------------------- the optimizer's update


class _Probe(keras.layers.Layer):
    """Variables whose paths look like an encoder's: embeddings, two layers, a head."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.embeddings = keras.layers.Dense(3, name="embeddings")
        self.layers_ = [keras.layers.Dense(3, name="layer_%d" % i) for i in range(2)]
        self.head = keras.layers.Dense(2, name="head")
        self.norm = keras.layers.LayerNormalization(name="LayerNorm")

    def build(self, input_shape=None):
        for layer in [self.embeddings] + self.layers_:
            layer.build((None, 3))
        self.norm.build((None, 3))
        self.head.build((None, 3))

    def call(self, x):
        h = self.embeddings(x)
        for layer in self.layers_:
            h = tf.tanh(layer(h))
        return self.head(self.norm(h))


def _probe(seed=0):
    probe = _Probe(name="probe")
    probe.build()
    rng = np.random.default_rng(seed)
    for w in probe.weights:
        w.assign(rng.normal(size=w.shape).astype("float32") * 0.5 + 0.1)
    return probe


def _probe_gradients(probe, seed=1):
    rng = np.random.default_rng(seed)
    x = tf.constant(rng.normal(size=(4, 3)).astype("float32"))
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.square(probe(x) - 1.0))
    return tape.gradient(loss, probe.trainable_variables)


@pytest.mark.parametrize("jit", [True, False])
def test_one_adamw_step_with_multipliers_equals_the_hand_computed_step(jit):
    """w -= lr * f * (m / (sqrt(v) + eps) + wd * w), m = 0.1 g, v = 0.001 g^2 (no bias
    correction), g clipped by the global norm of ALL gradients, f = 2.6**-k for the group
    k levels below the top; LayerNorm and biases get no decay."""
    probe = _probe()
    before = [v.numpy().astype("float64") for v in probe.trainable_variables]
    grads = _probe_gradients(probe)
    lr, wd, eps, clip = 0.05, 0.01, 1e-6, 1.0
    optimizer = optimization.create_optimizer(lr, 100, 0, weight_decay_rate=wd,
                                              clip_norm=clip, layer_lr_decay=2.6,
                                              jit_update=jit)
    optimizer.apply_gradients(zip(grads, probe.trainable_variables))

    g = [x.numpy().astype("float64") for x in grads]
    norm = math.sqrt(sum(float(np.sum(x * x)) for x in g))
    assert norm > clip  # clipping is exercised
    g = [x * clip / norm for x in g]
    groups = {"embeddings": 3, "layer_0": 2, "layer_1": 1}  # levels below the top
    lr_t = lr * (1 - 0 / 100)
    for variable, w, grad in zip(probe.trainable_variables, before, g):
        component = variable.path.split("/")[1]
        factor = 2.6 ** -groups.get(component, 0)
        m, v = 0.1 * grad, 0.001 * grad * grad
        decay = 0.0 if ("LayerNorm" in variable.path or "bias" in variable.path) else wd
        expected = w - lr_t * factor * (m / (np.sqrt(v) + eps) + decay * w)
        np.testing.assert_allclose(variable.numpy(), expected, rtol=2e-5, atol=1e-7,
                                   err_msg=variable.path)
        assert not np.allclose(variable.numpy(), w)


def test_regex_multipliers_and_lamb_scale_the_whole_update():
    """A dict {regex: factor}: factor f gives exactly the update of lr * f (LAMB too, its
    trust ratio included); factor 0 leaves the variable and its moments untouched."""
    for optimizer_type in ("adamw", "lamb"):
        results = {}
        for name, lr, multipliers in (("scaled", 0.1, {"layer_0": 0.5, "head": 0.0}),
                                      ("plain", 0.1, None), ("half", 0.05, None)):
            probe = _probe()
            optimizer = optimization.create_optimizer(
                lr, 100, 0, optimizer_type=optimizer_type, weight_decay_rate=0.01,
                clip_norm=None, learning_rate_multipliers=multipliers)
            for step in range(2):  # the same gradients in every run
                optimizer.apply_gradients(zip(_probe_gradients(_probe(), step),
                                              probe.trainable_variables))
            results[name] = ({v.path: v.numpy() for v in probe.trainable_variables},
                             optimizer)
        scaled, optimizer = results["scaled"]
        for path, value in scaled.items():
            if "/layer_0/" in path:
                np.testing.assert_allclose(value, results["half"][0][path], rtol=1e-6)
            elif "/head/" in path:
                np.testing.assert_array_equal(value, _probe_values()[path])
                index = optimizer._get_variable_index(
                    next(v for v in optimizer._trainable_variables if v.path == path))
                for slot in optimizer._slots(index):
                    assert not np.any(slot.numpy())
            else:
                np.testing.assert_allclose(value, results["plain"][0][path], rtol=1e-6)
        config = optimizer.get_config()
        assert config["learning_rate_multipliers"] == [["layer_0", 0.5], ["head", 0.0]]
        clone = type(optimizer).from_config(config)
        assert clone.get_config() == config


def _probe_values():
    return {v.path: v.numpy() for v in _probe().trainable_variables}


def test_neutral_settings_leave_the_optimizer_bit_identical():
    """Defaults: no new options reach create_optimizer, and factors of exactly 1 (decay
    1, no unfreezing) give bit-identical weights and moments to no multipliers."""
    assert TrainerSettings().optimizer_options() == {
        "optimizer_type": "adamw", "gradient_accumulation_steps": 1, "jit_update": True}
    assert TrainerSettings(lr_schedule="stlr", layer_lr_decay=2.6,
                           unfreeze_steps=7).optimizer_options() == {
        "optimizer_type": "adamw", "gradient_accumulation_steps": 1, "jit_update": True,
        "lr_schedule": "stlr", "stlr_cut_frac": 0.1, "stlr_ratio": 32.0,
        "layer_lr_decay": 2.6, "unfreeze_steps": 7}
    default = optimization.create_optimizer(0.1, 100, 10)
    assert default.learning_rate_multipliers is None
    assert "learning_rate_multipliers" not in default.get_config()
    states = []
    for multipliers in (None, ft.LayerwiseLearningRates(1.0, 0)):
        probe = _probe()
        optimizer = optimization.create_optimizer(0.1, 100, 10, weight_decay_rate=0.01,
                                                  learning_rate_multipliers=multipliers)
        for step in range(3):
            optimizer.apply_gradients(zip(_probe_gradients(probe, step),
                                          probe.trainable_variables))
        states.append([v.numpy() for v in probe.trainable_variables + optimizer.variables])
    for a, b in zip(*states):
        np.testing.assert_array_equal(a, b)
    rates = optimization.create_optimizer(0.1, 100, 0, layer_lr_decay=2.6, unfreeze_steps=3)
    config = rates.get_config()
    clone = optimization.AdamWeightDecay.from_config(config)
    assert isinstance(clone.learning_rate_multipliers, ft.LayerwiseLearningRates)
    assert clone.get_config() == config
    restored = keras.optimizers.deserialize(keras.optimizers.serialize(rates))
    assert restored.learning_rate_multipliers.get_config() == {"layer_lr_decay": 2.6,
                                                              "unfreeze_steps": 3}


# ------------------------------------------------------- gradual unfreezing


def _unfreezing_trainer(model_dir, strategy, unfreeze_steps, total):
    def model_fn():
        return _classifier(layers=2, seed=3)

    return trainer_lib.Trainer(
        strategy, model_fn,
        lambda: optimization.create_optimizer(
            1e-2, total, 0, layer_lr_decay=2.6, unfreeze_steps=unfreeze_steps,
            jit_update=False),
        model_dir=str(model_dir), train_batch_size=8, num_train_steps=unfreeze_steps,
        save_checkpoints_steps=unfreeze_steps, log_steps=unfreeze_steps, steps_per_loop=2)


def _moments_by_group(trainer):
    """{group: [whether each variable's Adam moments are nonzero]}."""
    optimizer = trainer._base_optimizer
    return {name: [any(np.any(s.numpy()) for s in
                       optimizer._slots(optimizer._get_variable_index(v))) for v in variables]
            for name, variables in ft.variable_groups(trainer.model)}


def _run_stages(trainer, features, unfreeze_steps, stages):
    """Group values before training and after each stage, and the moments after stage 1.

    One training run with a checkpoint at the end of every stage; each stage's state is
    then read back from its checkpoint into the same model and optimizer.
    """
    snapshots = [_group_names_and_values(trainer.model)]
    trainer.num_train_steps = stages * unfreeze_steps
    trainer.train(_input_fn(features, 8))
    assert trainer.current_step() == stages * unfreeze_steps
    checkpoint = tf.train.Checkpoint(model=trainer.model, optimizer=trainer.optimizer)
    for stage in range(1, stages + 1):
        path = "%s/ckpt-%d" % (trainer.model_dir, stage * unfreeze_steps)
        checkpoint.restore(path).expect_partial()
        assert trainer.current_step() == stage * unfreeze_steps
        snapshots.append(_group_names_and_values(trainer.model))
        if stage == 1:
            moments = _moments_by_group(trainer)
    return snapshots, moments


def test_gradual_unfreezing_changes_only_the_unfrozen_groups_in_each_stage(tmp_path):
    """Through the Trainer, 2 updates per stage, groups embeddings < layer_0 < layer_1 <
    top: after stage 1 only the top group (pooler + head) changed, after stage 2 also
    layer_1, after stage 3 also layer_0, after stage 4 every variable; frozen variables
    keep zero Adam moments. (No MirroredStrategy here: a second strategy over the same two
    CPUs in one process reuses its collective keys and breaks tests/modeling/training/test_trainer.py's.)"""
    features = _synthetic(64, seed=0)
    trainer = _unfreezing_trainer(tmp_path / "one", tf.distribute.OneDeviceStrategy("/cpu:0"),
                                  2, 8)
    snapshots, moments = _run_stages(trainer, features, 2, 4)
    assert all(moments["top"]) and not any(moments["layer_1"] + moments["layer_0"]
                                           + moments["embeddings"])
    order = ["top", "layer_1", "layer_0", "embeddings"]
    for stage in range(1, 5):
        before, after = dict(snapshots[stage - 1]), dict(snapshots[stage])
        for name in order:
            moved = [not np.array_equal(a, b) for a, b in zip(before[name], after[name])]
            if name in order[:stage]:
                assert all(moved), "stage %d: %s should train (%s)" % (stage, name, moved)
            else:
                assert not any(moved), "stage %d: %s should be frozen" % (stage, name)


def test_all_three_techniques_learn_a_held_out_task_within_a_fixed_budget(tmp_path):
    """Budget fixed before the run: 30 updates of 16 examples, STLR (cut_frac 0.1, ratio
    32, peak 1e-2), layer_lr_decay 2.6, one group unfrozen every 5 updates. Task: does
    token 7 occur in the sequence? Held-out accuracy (256 examples never trained on)
    must reach 0.9 (chance: 0.5); the untrained model is at chance."""
    train, held_out = _synthetic(512, seed=1), _synthetic(256, seed=2)

    def accuracy(model):
        logits = model({k: v for k, v in held_out.items() if k != "label_ids"})["logits"]
        return float(np.mean(np.argmax(logits.numpy(), -1) == held_out["label_ids"]))

    trainer = trainer_lib.Trainer(
        tf.distribute.OneDeviceStrategy("/cpu:0"), lambda: _classifier(layers=2, seed=5),
        lambda: optimization.create_optimizer(1e-2, 30, 0, lr_schedule="stlr",
                                              layer_lr_decay=2.6, unfreeze_steps=5),
        model_dir=str(tmp_path), train_batch_size=16, num_train_steps=30,
        save_checkpoints_steps=30, log_steps=30, steps_per_loop=30)
    assert abs(accuracy(trainer.model) - 0.5) < 0.1
    trainer.train(_input_fn(train, 16))
    final = accuracy(trainer.model)
    print("held-out accuracy after the budget: %.3f" % final)
    assert final >= 0.9


# ------------------------------------------------------ through classifier_job


class _KeywordProcessor(processors.DataProcessor):
    """In-memory examples: label "1" iff the text names a colour."""

    WORDS = ["red", "blue", "cat", "dog"]

    def _examples(self, n, set_type):
        return [processors.InputExample("%s-%d" % (set_type, i), self.WORDS[i % 4],
                                        label=str(int(i % 4 < 2))) for i in range(n)]

    def get_train_examples(self, data_dir):
        return self._examples(24, "train")

    def get_dev_examples(self, data_dir):
        return self._examples(4, "dev")

    def get_test_examples(self, data_dir):
        return self._examples(4, "test")

    def get_labels(self):
        return ["0", "1"]


def _checkpoint_groups(path, config):
    """{group: [values]} of the classifier weights in a trainer checkpoint."""
    model = BertClassifier.from_config_object(config, num_labels=2)
    optimizer = optimization.create_optimizer(1e-3, 10, 0)
    optimizer.build(model.trainable_variables)
    # With the optimizer: the checkpoint reaches some model variables only through it.
    tf.train.Checkpoint(model=model, optimizer=optimizer).restore(path).expect_partial()
    return {name: [v.numpy() for v in variables]
            for name, variables in ft.variable_groups(model)}


def test_classifier_job_takes_the_techniques_from_its_settings(tmp_path):
    """classifier_job.run with unfreeze_steps=2, layer_lr_decay=2.6, lr_schedule=stlr on a
    1-layer BERT (groups embeddings < layer_0 < top), 6 updates, checkpoints every 2:
    between updates 2 and 4 the embeddings stay as they were while layer_0 and the top
    train; between 4 and 6 everything trains."""
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + _KeywordProcessor.WORDS
    (tmp_path / "vocab.txt").write_text("\n".join(vocab) + "\n")
    config = config_lib.BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1,
                                   num_attention_heads=2, intermediate_size=32,
                                   max_position_embeddings=16, type_vocab_size=2)
    config.to_json_file(str(tmp_path / "bert_config.json"))
    out = tmp_path / "out"
    job = classifier_job.ClassifierJob(
        processor=_KeywordProcessor(), data_dir=str(tmp_path),
        bert_config_file=str(tmp_path / "bert_config.json"),
        vocab_file=str(tmp_path / "vocab.txt"), output_dir=str(out), max_seq_length=8,
        do_train=True, train_batch_size=4, num_train_epochs=1.0, save_checkpoints_steps=2,
        keep_checkpoint_max=5, log_steps=2, seed=1, lr_schedule="stlr",
        layer_lr_decay=2.6, unfreeze_steps=2)
    classifier_job.run(job)
    at = {step: _checkpoint_groups(str(out / ("ckpt-%d" % step)), config)
          for step in (2, 4, 6)}
    assert list(at[2]) == ["embeddings", "layer_0", "top"]

    def moved(group, start, end):
        return [not np.array_equal(a, b) for a, b in zip(at[start][group], at[end][group])]

    assert not any(moved("embeddings", 2, 4))
    assert all(moved("layer_0", 2, 4)) and any(moved("top", 2, 4))
    assert all(moved("embeddings", 4, 6)) and all(moved("layer_0", 4, 6))
