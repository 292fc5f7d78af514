"""The checks every encoder and every pre-training objective of the project passes.

Encoders (the contract of `modeling/encoder.py`)
-------------------------------------------------

    case = harness.EncoderCase("bert", factory, inputs, reference_forward=...)
    case.run()                            # every check, or case.run(["padding"])
    harness.run_encoder_checks(factory, inputs, reference_forward)   # the same, at once

`factory(**kwargs)` builds a fresh encoder; it must pass `kwargs` (the
harness uses `dtype=<policy>`) to the constructor. `inputs` is a dict of
NumPy `[batch, seq]` int arrays (`harness.random_encoder_inputs` makes one
with some padded rows). The case builds one encoder, re-draws its weights at
a large scale (`randomize_weights`: a wrong mask, scale, residual or
LayerNorm order cannot hide in the noise of a 0.02 initialisation) and
reuses it for every check. The checks (`ENCODER_CHECKS`):

    shapes            the output dict of the contract: sequence_output,
                      encoder_outputs (one per layer, the last one being
                      sequence_output), embedding_output, pooled_output iff
                      the encoder has a pooler, attention_probs only on
                      request (rows sum to 1), the family's extra outputs;
                      `embedding_table` has `vocab_size` rows.
    config            get_config() is JSON and from_config() rebuilds the same
                      config and variables; with the same weights, the same
                      outputs (also through keras.saving.serialize/deserialize).
    keras_file        `.keras` save and load: same class, same outputs.
    padding           positions appended with input_mask 0 (random ids in
                      them), and the ids of already-padded positions scrambled:
                      outputs at real positions (and the pooled output) do not
                      change; padded keys get no attention.
    training_flag     inference is deterministic; training=True applies dropout
                      iff the encoder has a non-zero dropout rate.
    gradients         every trainable variable gets a non-zero gradient from
                      the outputs (shared ALBERT blocks, position/segment tables).
    mixed_precision   under mixed_float16 and mixed_bfloat16: variables float32,
                      every float output in the compute dtype, finite, and close
                      to float32 (tolerance below).
    jit               tf.function(jit_compile=True) equals eager within 1e-5
                      (XLA fuses and reorders float32 arithmetic: differences
                      of a few ulps per op, ~1e-6 after the layers).
    saved_model       tf.saved_model.save of a tf.function serving signature
                      (all inputs `[None, None]` int32), reloaded without the
                      Python classes: outputs identical to the traced function's
                      before saving and equal to eager within 1e-5 (graph
                      rewrites reorder float32 arithmetic), also at another
                      batch size and sequence length.
    reference         the family's float64 NumPy forward pass (all outputs it
                      returns, attention probabilities included) within 1e-5:
                      float32 against float64 on O(1) activations leaves
                      ~1e-6 of rounding.

Mixed-precision tolerance: the relative RMS error of each output against
float32 must stay below `2 * u * (blocks + 1)`, u the unit roundoff of the
compute dtype (2^-11 for float16, 2^-8 for bfloat16) and `blocks` the number
of Transformer blocks applied. Rounding the embeddings to the compute dtype
costs about u (measured 0.85u), and each post-LayerNorm block adds an error
of the same order rather than multiplying it (LayerNorm renormalises), so
the error grows linearly with depth; `2u` per stage leaves a factor ~2 of
headroom over what BERT and ALBERT measure (about u per stage, re-drawn
weights included). What exceeds it: any part of a float16 computation done
at bfloat16 precision (u eight times larger; e.g. the attention softmax),
and overflow to inf/NaN (a -1e9 mask adder in float16) fails the finiteness
check. Subtler losses (LayerNorm statistics in half precision: +60% error,
measured) stay inside it; the bound checks the policy, not the last bit.

Objectives (the contract of `modeling/objectives/base.py`)
----------------------------------------------------------

    case = harness.ObjectiveCase("masked_lm/bert", objective_factory,
                                 encoder_factory, features)
    case.run()
    harness.run_objective_checks(objective_factory, encoder_factory, features)

`objective_factory(**kwargs)` builds a fresh objective (kwargs: `dtype`,
`loss_weight`), `encoder_factory(**kwargs)` a fresh encoder; the harness
trains them together in a `Pretrainer`. `features` is a NumPy pre-training
batch (`harness.random_pretraining_features`). The checks
(`OBJECTIVE_CHECKS`):

    contract          losses are finite float32 scalars, each with a metric of
                      the same name whose sum/count is the loss; metrics are
                      float32 (sum, count) pairs with count > 0 (accuracies:
                      0 <= sum <= count); outputs are float32; the total loss
                      is loss_weight * loss.
    initial_loss      at initialisation the model predicts near-uniformly:
                      each loss is log(baseline_num_classes()) within 10%.
    aggregation       the (sum, count) pairs of two half batches add up to the
                      full batch's.
    gradients         every variable of the objective and every encoder
                      variable it reads gets a non-zero gradient; the ones it
                      does not read (`unread_encoder_variables`, path
                      fragments such as "pooler") get none.
    gradient_direction  the gradient is the loss's derivative: a central finite
                      difference of the loss along d = -g/|g| (steps of 1e-3)
                      equals g.d = -|g| within 1%. A part of the loss cut
                      from the graph (stop_gradient, a NumPy detour), or
                      gradients of the wrong sign or scale fail it.
    mixed_precision   under mixed_float16 / mixed_bfloat16 (weights re-drawn so
                      that logits are a few units, not ~0): losses, metrics
                      and outputs float32 and finite; the logits within the
                      encoders' bound `2 * u * (layers + 2)` (relative RMS;
                      + embeddings and head) of float32, and each loss within
                      twice the largest logit change (a cross-entropy, or a
                      weighted mean of them, cannot move more).
    round_trip        objective get_config/from_config; the whole pretrainer
                      through a `.keras` file: same losses, metrics, outputs.

Adding a family (e.g. GPT-2)
----------------------------

1. Put its float64 forward pass in `tests/references/<family>_numpy.py`
   (see `references/bert_numpy.py`): `params_from_<family>(encoder)` reads
   the Keras variables at their documented paths, `forward(params, ...)`
   returns the output dict (any subset of the contract's keys: the harness
   compares the keys the reference returns).
2. Add a case, in `tests/modeling/test_encoders.py` or the family's own test file:

       from references import gpt2_numpy

       GPT2 = harness.EncoderCase(
           "gpt2",
           lambda **kw: GPT2Network(vocab_size=50, n_positions=16, n_embd=16,
                                    n_layer=3, n_head=2, **kw),
           harness.random_encoder_inputs(vocab_size=50, batch=3, seq=7,
                                         lengths=[7, 5, 2], segments=False),
           reference_forward=lambda encoder, inputs: gpt2_numpy.forward(
               gpt2_numpy.params_from_gpt2(encoder), **inputs),
           sequence_output_is_last_layer=False,   # ln_f after the last block
       )

       @pytest.mark.parametrize("case, check", harness.parametrize([GPT2]))
       def test_gpt2_network(case, check, tmp_path):
           case.run([check], tmp_dir=tmp_path)

   (one test per check; the case builds its encoder once per module). This
   GPT2Network case, without the reference, passes every other check as the
   network stands (mixed precision at a third of the bound below).
   Options for families that differ: `mask_key` (the padding-mask input),
   `attention_maps` (default the number of layers), `extra_outputs`
   ({name: trailing shape after [batch, seq]}),
   `sequence_output_is_last_layer=False` (GPT-2's final LayerNorm),
   `mixed_precision_factor` (a pre-LN residual stream is not renormalised
   after every block: measure, and justify the factor in a comment), `skip`
   (checks that do not apply, with the reason in a comment). The harness
   reads the sizes as `hidden_size`/`n_embd`, `num_hidden_layers`/`n_layer`,
   `num_attention_heads`/`n_head`, plus `vocab_size` and `embedding_table`,
   the dropout rates by their BERT or HF GPT-2 names (`DROPOUT_ATTRIBUTES`),
   and calls `encoder(inputs, training=..., output_attention_probs=...)`.
3. Objectives of the family (a causal LM, ...) get an `ObjectiveCase`
   with features holding their labels; `unread_encoder_variables` names
   what the objective does not read (e.g. a pooler).
"""

import json
import math
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from modeling.objectives import Pretrainer

__all__ = [
    "ENCODER_CHECKS",
    "OBJECTIVE_CHECKS",
    "EncoderCase",
    "ObjectiveCase",
    "random_encoder_inputs",
    "random_pretraining_features",
    "randomize_weights",
    "run_encoder_checks",
    "run_objective_checks",
    "parametrize",
]

ENCODER_CHECKS = ("shapes", "config", "keras_file", "padding", "training_flag", "gradients",
                  "mixed_precision", "jit", "saved_model", "reference")
OBJECTIVE_CHECKS = ("contract", "initial_loss", "aggregation", "gradients",
                    "gradient_direction", "mixed_precision", "round_trip")
POLICIES = ("mixed_float16", "mixed_bfloat16")
# Unit roundoff (half the distance from 1 to the next number) of the compute dtypes.
UNIT_ROUNDOFF = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}


# ----------------------------------------------------------------- data helpers


def random_encoder_inputs(vocab_size, batch=4, seq=8, lengths=None, segments=True, seed=0,
                          mask_key="input_mask"):
    """`{input_ids, input_mask[, segment_ids]}` with row b holding `lengths[b]` real tokens.

    Default lengths: the first row full, the others shorter (down to 2), so
    every batch has padding. Padded ids are 0, real ids in [1, vocab).
    """
    rng = np.random.default_rng(seed)
    if lengths is None:
        lengths = [seq] + [max(2, seq - 2 * i) for i in range(1, batch)]
    lengths = np.asarray(lengths)
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int32)
    ids = rng.integers(1, vocab_size, size=(batch, seq)).astype(np.int32) * mask
    inputs = {"input_ids": ids, mask_key: mask}
    if segments:
        boundary = np.maximum(1, lengths // 2)
        inputs["segment_ids"] = ((np.arange(seq)[None, :] >= boundary[:, None])
                                 .astype(np.int32) * mask)
    return inputs


def random_pretraining_features(vocab_size, batch=8, seq=12, predictions=4, seed=0):
    """A masked-LM pre-training batch with Google's feature names and dtypes.

    Rows have different lengths; each row masks one or two runs of
    consecutive positions (span boundaries for SpanBERT), listed in
    ascending order, and leaves some prediction slots empty (weight 0);
    `next_sentence_labels` alternate 0/1 (both halves of the batch see both).
    """
    rng = np.random.default_rng(seed)
    lengths = np.array([seq - (b % 4) for b in range(batch)])
    assert seq - 3 >= predictions + 3, "sequences too short for the predictions"
    inputs = random_encoder_inputs(vocab_size, batch, seq, lengths=lengths, seed=seed)
    positions = np.zeros((batch, predictions), np.int32)
    weights = np.zeros((batch, predictions), np.float32)
    labels = np.zeros((batch, predictions), np.int32)
    for b, length in enumerate(lengths):
        count = predictions - (b % 2)           # odd rows leave a slot empty
        first = max(1, count // 2)              # two runs: `first`, then the rest
        last_position = length - 2              # 0 and length - 1 stay unmasked
        gap = rng.integers(1, last_position - count + 1)
        start = rng.integers(1, last_position - count - gap + 2)
        run = list(range(start, start + first))
        run += list(range(start + first + gap, start + count + gap))
        assert run[-1] <= last_position
        positions[b, :count] = run
        weights[b, :count] = 1.0
        labels[b, :count] = inputs["input_ids"][b, run]
        inputs["input_ids"][b, run] = 3         # a [MASK]-like id
    inputs.update(masked_lm_positions=positions, masked_lm_ids=labels,
                  masked_lm_weights=weights,
                  next_sentence_labels=(np.arange(batch) % 2).astype(np.int32)[:, None])
    return inputs


def randomize_weights(model, seed=0, scale=0.3):
    """Re-draws every weight ~ N(0, scale) (LayerNorm gammas ~ N(1, scale))."""
    rng = np.random.default_rng(seed)
    for variable in model.weights:
        values = rng.normal(0.0, scale, size=variable.shape)
        if variable.path.endswith("gamma"):
            values += 1.0
        variable.assign(values.astype(variable.dtype))


def _float64(x):
    return np.asarray(tf.cast(x, tf.float64).numpy() if tf.is_tensor(x) else x, np.float64)


def _named_tensors(outputs):
    """[(name, tensor)] of an output dict, lists expanded as `name[i]`."""
    named = []
    for key in sorted(outputs):
        value = outputs[key]
        if isinstance(value, (list, tuple)):
            named.extend(("%s[%d]" % (key, i), v) for i, v in enumerate(value))
        else:
            named.append((key, value))
    return named


def _assert_outputs_close(got, want, atol, rtol=0.0, keys=None, what=""):
    got_named, want_named = dict(_named_tensors(got)), dict(_named_tensors(want))
    names = keys if keys is not None else sorted(want_named)
    assert names, "nothing to compare"
    for name in names:
        assert name in got_named, "%s: output %r missing" % (what, name)
        np.testing.assert_allclose(_float64(got_named[name]), _float64(want_named[name]),
                                   atol=atol, rtol=rtol, err_msg="%s %s" % (what, name))


def _gradient_norms(tape, target, variables):
    grads = tape.gradient(target, variables)
    norms = {}
    for variable, grad in zip(variables, grads):
        if grad is None:
            norms[variable.path] = None
        else:
            norms[variable.path] = float(tf.norm(tf.cast(tf.convert_to_tensor(grad),
                                                         tf.float32)))
    return norms


def _attr(obj, *names):
    """The first of `names` that `obj` has (BERT's names, then HF GPT-2's)."""
    for name in names:
        if hasattr(obj, name):
            return getattr(obj, name)
    raise AttributeError("%s has none of %s" % (type(obj).__name__, ", ".join(names)))


# Dropout-rate attributes by family naming (BERT/ALBERT, HF GPT-2).
DROPOUT_ATTRIBUTES = ("hidden_dropout_prob", "attention_probs_dropout_prob",
                      "resid_pdrop", "embd_pdrop", "attn_pdrop")


def _policy_dtype(policy):
    return keras.mixed_precision.Policy(policy).compute_dtype


# -------------------------------------------------------------------- encoders


class EncoderCase:
    """One encoder configuration under test (see the module docstring).

    Args:
        name: the case's name in test ids.
        factory: `(**kwargs) -> encoder`, kwargs passed to the constructor.
        inputs: NumPy input dict (with padding in some rows).
        reference_forward: `(encoder, inputs) -> {output name: float64 array}`.
        mask_key: the padding-mask input (1 real, 0 padding).
        attention_maps: number of `attention_probs` entries (default
            `num_hidden_layers`).
        extra_outputs: family outputs beyond the contract,
            `{name: trailing shape after [batch, seq]}`.
        randomize_scale: scale of the re-drawn weights (None: keep the
            initialisation).
        sequence_output_is_last_layer: False when sequence_output is not
            encoder_outputs[-1] (GPT-2 applies a final LayerNorm).
        mixed_precision_factor: the `c` of the mixed-precision bound
            `c * u * (blocks + 1)` (2 for post-LN families, see the module
            docstring; a family whose error grows otherwise states its own).
        skip: checks that do not apply to this encoder.
    """

    def __init__(self, name, factory, inputs, reference_forward=None, *, mask_key="input_mask",
                 attention_maps=None, extra_outputs=None, randomize_scale=0.3,
                 sequence_output_is_last_layer=True, mixed_precision_factor=2.0, skip=()):
        self.name = name
        self.factory = factory
        self.inputs = {k: np.asarray(v) for k, v in inputs.items()}
        self.reference_forward = reference_forward
        self.mask_key = mask_key
        self._attention_maps = attention_maps
        self.extra_outputs = dict(extra_outputs or {})
        self.randomize_scale = randomize_scale
        self.sequence_output_is_last_layer = sequence_output_is_last_layer
        self.mixed_precision_factor = mixed_precision_factor
        unknown = set(skip) - set(ENCODER_CHECKS)
        assert not unknown, "unknown checks %s" % sorted(unknown)
        self.checks = tuple(c for c in ENCODER_CHECKS if c not in skip
                            and (c != "reference" or reference_forward is not None))
        self._encoder = None

    def __repr__(self):
        return self.name

    @property
    def encoder(self):
        """The encoder under test, built (and its weights re-drawn) once."""
        if self._encoder is None:
            keras.utils.set_random_seed(0)
            encoder = self.factory()
            if self.randomize_scale is not None:
                randomize_weights(encoder, scale=self.randomize_scale)
            self._encoder = encoder
        return self._encoder

    @property
    def attention_maps(self):
        if self._attention_maps is not None:
            return self._attention_maps
        return _attr(self.encoder, "num_hidden_layers", "n_layer")

    def fresh(self, **kwargs):
        """A new encoder from the factory with the weights of `self.encoder`."""
        encoder = self.factory(**kwargs)
        encoder.set_weights(self.encoder.get_weights())
        return encoder

    def run(self, checks=None, tmp_dir=None):
        """Runs `checks` (default: all that apply); returns {check: details}."""
        results = {}
        for check in checks or self.checks:
            if check not in self.checks:
                raise ValueError("check %r does not apply to %s" % (check, self.name))
            if check in ("keras_file", "saved_model"):
                assert tmp_dir is not None, "check %r needs tmp_dir" % check
                results[check] = getattr(self, "check_" + check)(str(tmp_dir))
            else:
                results[check] = getattr(self, "check_" + check)()
        return results

    # The checks. Each asserts; the return values are details for reports.

    def check_shapes(self):
        encoder, inputs = self.encoder, self.inputs
        batch, seq = inputs["input_ids"].shape
        hidden = _attr(encoder, "hidden_size", "n_embd")
        layers = _attr(encoder, "num_hidden_layers", "n_layer")
        heads = _attr(encoder, "num_attention_heads", "n_head")
        outputs = encoder(inputs, training=False, output_attention_probs=True)
        expected = {"sequence_output", "encoder_outputs", "embedding_output", "attention_probs"}
        expected |= set(self.extra_outputs)
        if getattr(encoder, "pooler", None) is not None:
            expected.add("pooled_output")
        assert set(outputs) == expected, sorted(outputs)
        assert tuple(outputs["sequence_output"].shape) == (batch, seq, hidden)
        assert tuple(outputs["embedding_output"].shape) == (batch, seq, hidden)
        assert len(outputs["encoder_outputs"]) == layers
        for output in outputs["encoder_outputs"]:
            assert tuple(output.shape) == (batch, seq, hidden)
        if self.sequence_output_is_last_layer:
            np.testing.assert_array_equal(outputs["encoder_outputs"][-1],
                                          outputs["sequence_output"])
        if "pooled_output" in expected:
            assert tuple(outputs["pooled_output"].shape) == (batch, hidden)
        for name, trailing in self.extra_outputs.items():
            assert tuple(outputs[name].shape) == (batch, seq) + tuple(trailing), name
        assert len(outputs["attention_probs"]) == self.attention_maps
        for probs in outputs["attention_probs"]:
            assert tuple(probs.shape) == (batch, heads, seq, seq)
            np.testing.assert_allclose(_float64(probs).sum(-1), 1.0, atol=1e-5)
        # Attention probabilities only on request (default off).
        assert "attention_probs" not in encoder(inputs, training=False)
        table = encoder.embedding_table
        assert tuple(table.shape)[0] == encoder.vocab_size
        assert any(table is v for v in encoder.trainable_variables)
        return {"outputs": sorted(outputs)}

    def check_config(self):
        encoder = self.encoder
        config = encoder.get_config()
        assert json.loads(json.dumps(config)) == config  # plain JSON values
        clone = type(encoder).from_config(config)
        assert clone.get_config() == config
        assert [tuple(v.shape) for v in clone.weights] == [tuple(v.shape) for v in encoder.weights]
        assert [v.path for v in clone.weights] == [v.path for v in encoder.weights]
        clone.set_weights(encoder.get_weights())
        want = encoder(self.inputs, training=False)
        _assert_outputs_close(clone(self.inputs, training=False), want, atol=0.0,
                              what="from_config")
        revived = keras.saving.deserialize_keras_object(
            json.loads(json.dumps(keras.saving.serialize_keras_object(encoder))))
        assert type(revived) is type(encoder) and revived.get_config() == config
        return {"weights": len(clone.weights)}

    def check_keras_file(self, tmp_dir):
        encoder = self.encoder
        path = os.path.join(tmp_dir, "%s.keras" % self.name.replace("/", "_"))
        encoder.save(path)
        loaded = keras.models.load_model(path)
        assert type(loaded) is type(encoder)
        assert loaded.get_config() == encoder.get_config()
        _assert_outputs_close(loaded(self.inputs, training=False),
                              encoder(self.inputs, training=False), atol=0.0, what=".keras")
        return {"path": path}

    def check_padding(self, extra=3):
        encoder, inputs, key = self.encoder, self.inputs, self.mask_key
        assert key in inputs, "the padding check needs a %r input" % key
        mask = inputs[key]
        batch, seq = mask.shape
        assert (mask == 0).any(), "the inputs need some padded positions"
        rng = np.random.default_rng(1)
        random_ids = rng.integers(1, encoder.vocab_size, size=(batch, seq + extra)).astype(np.int32)
        padded = {}
        for name, value in inputs.items():
            grown = np.concatenate([value, np.zeros((batch, extra), value.dtype)], axis=1)
            if name == "input_ids":
                # Random ids at every padded position, old and new.
                real = np.concatenate([mask, np.zeros((batch, extra), mask.dtype)], axis=1)
                grown = np.where(real > 0, grown, random_ids)
            padded[name] = grown
        short = encoder(inputs, training=False)
        long = encoder(padded, training=False, output_attention_probs=True)
        long_named = dict(_named_tensors(long))
        real = mask.astype(bool)
        for name, value in _named_tensors(short):
            other = long_named[name]
            if name == "pooled_output":
                np.testing.assert_allclose(_float64(other), _float64(value), atol=1e-5,
                                           err_msg=name)
            else:  # [batch, seq, ...]: compare the real positions
                np.testing.assert_allclose(_float64(other)[:, :seq][real],
                                           _float64(value)[real], atol=1e-5, err_msg=name)
        # The padded keys got (numerically) no attention from any query.
        padded_keys = padded[key] == 0
        worst = 0.0
        for probs in long["attention_probs"]:
            probs = _float64(probs)
            worst = max(worst, probs.transpose(0, 3, 1, 2)[padded_keys].max())
        assert worst < 1e-4, worst
        return {"max_attention_to_padding": worst}

    def check_training_flag(self):
        encoder, inputs = self.encoder, self.inputs
        first = encoder(inputs, training=False)["sequence_output"]
        second = encoder(inputs, training=False)["sequence_output"]
        np.testing.assert_array_equal(first, second)
        trained = encoder(inputs, training=True)["sequence_output"]
        rates = [getattr(encoder, name, 0.0) or 0.0 for name in DROPOUT_ATTRIBUTES]
        difference = float(np.abs(_float64(trained) - _float64(first)).max())
        if max(rates) > 0:
            assert difference > 1e-3, "training=True applied no dropout"
        else:
            assert difference == 0.0, "dropout rates are 0 but training=True changed outputs"
        return {"dropout_rates": rates, "difference": difference}

    def check_gradients(self):
        encoder, inputs = self.encoder, self.inputs
        rng = np.random.default_rng(2)
        with tf.GradientTape() as tape:
            outputs = encoder(inputs, training=False)
            target = 0.0
            for name in ("sequence_output", "pooled_output"):
                if name in outputs:
                    value = tf.cast(outputs[name], tf.float32)
                    weights = rng.normal(size=value.shape).astype(np.float32)
                    target += tf.reduce_sum(value * weights)
        norms = _gradient_norms(tape, target, encoder.trainable_variables)
        assert len(norms) == len(encoder.trainable_variables), "duplicate variable paths"
        dead = sorted(path for path, norm in norms.items() if not norm)
        assert not dead, "no gradient for %s" % dead
        return {"variables": len(norms)}

    def check_mixed_precision(self):
        encoder, inputs = self.encoder, self.inputs
        want = encoder(inputs, training=False)
        blocks = self.attention_maps
        errors = {}
        for policy in POLICIES:
            compute = _policy_dtype(policy)
            model = self.fresh(dtype=policy)
            assert all(v.dtype == "float32" for v in model.weights), policy
            got = model(inputs, training=False, output_attention_probs=True)
            tolerance = self.mixed_precision_factor * UNIT_ROUNDOFF[compute] * (blocks + 1)
            for name, value in _named_tensors(got):
                assert value.dtype == compute, (policy, name, value.dtype)
            for name, value in _named_tensors(want):
                half = _float64(dict(_named_tensors(got))[name])
                full = _float64(value)
                assert np.isfinite(half).all(), (policy, name)
                error = np.sqrt(np.mean((half - full) ** 2) / np.mean(full ** 2))
                errors[(policy, name)] = error
                assert error < tolerance, (
                    "%s %s: relative RMS error %.3g > %.3g" % (policy, name, error, tolerance))
        return errors

    def check_jit(self):
        encoder, inputs = self.encoder, self.inputs
        compiled = tf.function(lambda features: encoder(features, training=False,
                                                        output_attention_probs=True),
                               jit_compile=True)
        features = {k: tf.constant(v) for k, v in inputs.items()}
        got = compiled(features)
        want = encoder(inputs, training=False, output_attention_probs=True)
        # XLA fuses and reorders float32 arithmetic: rounding-level differences.
        _assert_outputs_close(got, want, atol=1e-5, rtol=1e-5, what="jit_compile")
        return {}

    def check_saved_model(self, tmp_dir):
        encoder, inputs = self.encoder, self.inputs
        keys = sorted(inputs)
        specs = {k: tf.TensorSpec([None, None], tf.int32, name=k) for k in keys}
        want = encoder(inputs, training=False)
        served_names = [name for name, _ in _named_tensors(want)]

        def serve(**features):
            outputs = encoder(features, training=False)
            return {name.replace("[", "_").replace("]", ""): value
                    for name, value in _named_tensors(outputs)}

        module = tf.Module()
        module.encoder = encoder
        module.serve = tf.function(serve)
        signature = module.serve.get_concrete_function(**specs)
        path = os.path.join(tmp_dir, "%s_saved_model" % self.name.replace("/", "_"))
        tf.saved_model.save(module, path, signatures={"serving_default": signature})

        loaded = tf.saved_model.load(path).signatures["serving_default"]
        for rows, columns in ((slice(None), slice(None)), (slice(0, 2), slice(0, 5))):
            part = {k: tf.constant(v[rows, columns], tf.int32) for k, v in inputs.items()}
            served = loaded(**part)
            traced = signature(**part)
            eager = dict(_named_tensors(encoder(part, training=False)))
            assert sorted(served) == sorted(traced) and len(served) == len(served_names)
            for name in served_names:
                key = name.replace("[", "_").replace("]", "")
                # The reloaded graph computes exactly what the traced one did ...
                np.testing.assert_array_equal(served[key].numpy(), traced[key].numpy(),
                                              err_msg=name)
                # ... which is the eager computation up to graph rewrites of
                # float32 arithmetic (as for jit_compile).
                np.testing.assert_allclose(_float64(served[key]), _float64(eager[name]),
                                           atol=1e-5, rtol=1e-5, err_msg=name)
        return {"path": path}

    def check_reference(self):
        encoder, inputs = self.encoder, self.inputs
        want = self.reference_forward(encoder, inputs)
        got = encoder(inputs, training=False,
                      output_attention_probs="attention_probs" in want)
        names = [name for name, _ in _named_tensors(want)]
        _assert_outputs_close(got, want, atol=1e-5, rtol=1e-5, keys=names, what="reference")
        # The comparison is not vacuous: outputs vary across positions.
        spread = float(np.std(_float64(want["sequence_output"])))
        assert spread > 0.1, spread
        return {"compared": names}


def run_encoder_checks(encoder_factory, inputs, reference_forward=None, checks=None,
                       tmp_dir=None, **options):
    """Runs the encoder checks on `encoder_factory()` (see the module docstring)."""
    case = EncoderCase(options.pop("name", "encoder"), encoder_factory, inputs,
                       reference_forward, **options)
    if tmp_dir is None:
        import tempfile  # pylint: disable=g-import-not-at-top
        with tempfile.TemporaryDirectory() as tmp:
            return case.run(checks, tmp)
    return case.run(checks, tmp_dir)


# ------------------------------------------------------------------ objectives


class ObjectiveCase:
    """One objective trained with one encoder (see the module docstring).

    Args:
        name: the case's name in test ids.
        objective_factory: `(**kwargs) -> Objective` (kwargs: dtype,
            loss_weight).
        encoder_factory: `(**kwargs) -> encoder` (kwargs: dtype).
        features: a NumPy pre-training batch holding the objective's labels
            (an even batch size: the aggregation check halves it).
        unread_encoder_variables: path fragments of encoder variables the
            objective does not read (they must get no gradient).
        skip: checks that do not apply.
    """

    def __init__(self, name, objective_factory, encoder_factory, features, *,
                 unread_encoder_variables=(), skip=()):
        self.name = name
        self.objective_factory = objective_factory
        self.encoder_factory = encoder_factory
        self.features = {k: np.asarray(v) for k, v in features.items()}
        self.unread_encoder_variables = tuple(unread_encoder_variables)
        unknown = set(skip) - set(OBJECTIVE_CHECKS)
        assert not unknown, "unknown checks %s" % sorted(unknown)
        self.checks = tuple(c for c in OBJECTIVE_CHECKS if c not in skip)
        self._model = None

    def __repr__(self):
        return self.name

    def build(self, dtype=None, loss_weight=None, seed=0):
        kwargs = {} if dtype is None else {"dtype": dtype}
        objective_kwargs = dict(kwargs)
        if loss_weight is not None:
            objective_kwargs["loss_weight"] = loss_weight
        keras.utils.set_random_seed(seed)
        encoder = self.encoder_factory(**kwargs)
        return Pretrainer(encoder, [self.objective_factory(**objective_kwargs)], **kwargs)

    @property
    def model(self):
        """Encoder + objective at initialisation (built once)."""
        if self._model is None:
            self._model = self.build()
        return self._model

    @property
    def objective(self):
        return self.model.objectives[0]

    def run(self, checks=None, tmp_dir=None):
        results = {}
        for check in checks or self.checks:
            if check not in self.checks:
                raise ValueError("check %r does not apply to %s" % (check, self.name))
            if check == "round_trip":
                assert tmp_dir is not None, "check %r needs tmp_dir" % check
                results[check] = self.check_round_trip(str(tmp_dir))
            else:
                results[check] = getattr(self, "check_" + check)()
        return results

    def _result(self, model=None, features=None, training=False):
        model = model or self.model
        features = self.features if features is None else features
        encoder_outputs = model.encoder(features, training=training)
        return model.objectives[0](encoder_outputs, features, training=training)

    def check_contract(self):
        result = self._result()
        assert set(result) == {"losses", "metrics", "outputs"}
        losses, metrics, outputs = result["losses"], result["metrics"], result["outputs"]
        assert losses and metrics and outputs
        for name, loss in losses.items():
            assert loss.dtype == tf.float32 and loss.shape.rank == 0, name
            assert np.isfinite(loss.numpy()), name
            assert name in metrics, "loss %r has no metric of the same name" % name
            total, count = (float(x) for x in metrics[name])
            np.testing.assert_allclose(float(loss), total / count, rtol=1e-4, err_msg=name)
        for name, pair in metrics.items():
            assert len(pair) == 2, name
            total, count = pair
            assert total.dtype == tf.float32 and count.dtype == tf.float32, name
            assert total.shape.rank == 0 and count.shape.rank == 0, name
            assert float(count) > 0 and np.isfinite(float(total)), name
            if name.endswith("accuracy"):
                assert 0.0 <= float(total) <= float(count), name
        for name, value in outputs.items():
            assert value.dtype == tf.float32, name
            assert np.isfinite(value.numpy()).all(), name
        # The total loss is sum(loss_weight * loss), and metrics hold it as ("loss", 1).
        total, all_metrics = self.model.compute_loss_and_metrics(self.features)
        np.testing.assert_allclose(float(total), sum(float(v) for v in losses.values()),
                                   rtol=1e-6)
        assert [float(x) for x in all_metrics["loss"]] == [float(total), 1.0]
        weighted = self.build(loss_weight=0.25)
        weighted.set_weights(self.model.get_weights())
        np.testing.assert_allclose(float(weighted.compute_loss_and_metrics(self.features)[0]),
                                   0.25 * float(total), rtol=1e-5)
        return {"losses": sorted(losses), "metrics": sorted(metrics)}

    def check_initial_loss(self):
        classes = self.objective.baseline_num_classes()
        assert classes, "the objective names no target space (baseline_num_classes)"
        losses = self._result()["losses"]
        for name, loss in losses.items():
            np.testing.assert_allclose(float(loss), math.log(classes), rtol=0.1, err_msg=name)
        return {name: float(v) for name, v in losses.items()}

    def check_aggregation(self):
        batch = len(next(iter(self.features.values())))
        assert batch % 2 == 0 and batch >= 4
        full = self._result()["metrics"]
        halves = [self._result(features={k: v[s] for k, v in self.features.items()})["metrics"]
                  for s in (slice(0, batch // 2), slice(batch // 2, None))]
        for name, (total, count) in full.items():
            np.testing.assert_allclose(float(halves[0][name][0]) + float(halves[1][name][0]),
                                       float(total), rtol=1e-5, atol=1e-5, err_msg=name)
            np.testing.assert_allclose(float(halves[0][name][1]) + float(halves[1][name][1]),
                                       float(count), rtol=1e-6, err_msg=name)
        return {}

    def check_gradients(self):
        model = self.model
        with tf.GradientTape() as tape:
            total, _ = model.compute_loss_and_metrics(self.features, training=False)
        variables = model.trainable_variables
        norms = _gradient_norms(tape, total, variables)
        encoder_paths = {v.path for v in model.encoder.trainable_variables}
        head = [p for p in norms if p not in encoder_paths]
        assert head, "the objective has no variables of its own"
        dead_head = [p for p in head if not norms[p]]
        assert not dead_head, "no gradient for the objective's %s" % dead_head
        unread = {p for p in encoder_paths
                  if any(fragment in p for fragment in self.unread_encoder_variables)}
        dead = sorted(p for p in encoder_paths - unread if not norms[p])
        assert not dead, "no gradient for encoder variables %s" % dead
        leaked = sorted(p for p in unread if norms[p])
        assert not leaked, "gradient for variables the objective does not read: %s" % leaked
        assert model.encoder.embedding_table.path in encoder_paths - unread
        return {"head_variables": len(head), "unread": sorted(unread)}

    def check_gradient_direction(self, eps=1e-3):
        """The gradient is the loss's derivative: a central finite difference
        along the normalised gradient direction d = -g/|g| gives g.d = -|g|."""
        model = self.model
        variables = model.trainable_variables
        with tf.GradientTape() as tape:
            loss, _ = model.compute_loss_and_metrics(self.features, training=False)
        grads = [tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
                 for v, g in zip(variables, tape.gradient(loss, variables))]
        norm = math.sqrt(sum(float(tf.reduce_sum(tf.square(g))) for g in grads))
        assert norm > 0
        direction = [-g / norm for g in grads]
        # A step of 1e-3 in parameter space: the central difference's error
        # (eps^2 times the third derivative) is ~1e-4 relative on these
        # models, and float32 rounding of the loss (6e-8 relative) over the
        # difference eps * |g| stays ~1e-3 even for the smallest gradients
        # here (|g| ~ 0.03, loss ~ 0.7), against a 1e-2 tolerance.
        originals = [v.numpy() for v in variables]

        def loss_at(t):
            for variable, original, d in zip(variables, originals, direction):
                variable.assign(original + t * d.numpy())
            return float(model.compute_loss_and_metrics(self.features, training=False)[0])

        try:
            slope = (loss_at(eps) - loss_at(-eps)) / (2 * eps)
        finally:
            for variable, original in zip(variables, originals):
                variable.assign(original)
        np.testing.assert_allclose(slope, -norm, rtol=1e-2)
        return {"slope": slope, "gradient_norm": norm}

    def check_mixed_precision(self):
        # Re-drawn weights: logits of a few units, where rounding shows (at
        # initialisation they are ~0 and every loss is log(classes)).
        reference = self.build()
        randomize_weights(reference, seed=3)
        layers = _attr(reference.encoder, "num_hidden_layers", "n_layer")
        want = self._result(model=reference)
        want_total = float(reference.compute_loss_and_metrics(self.features)[0])
        results = {}
        for policy in POLICIES:
            u = UNIT_ROUNDOFF[_policy_dtype(policy)]
            model = self.build(dtype=policy)
            model.set_weights(reference.get_weights())
            assert all(v.dtype == "float32" for v in model.weights), policy
            total, metrics = model.compute_loss_and_metrics(self.features)
            assert total.dtype == tf.float32 and np.isfinite(total.numpy()), policy
            for name, (s, c) in metrics.items():
                assert s.dtype == tf.float32 and c.dtype == tf.float32, (policy, name)
            got = self._result(model=model)
            worst_logit = 0.0
            for name, value in got["outputs"].items():
                assert value.dtype == tf.float32, (policy, name)
                half, full = _float64(value), _float64(want["outputs"][name])
                assert np.isfinite(half).all(), (policy, name)
                error = np.sqrt(np.mean((half - full) ** 2) / np.mean(full ** 2))
                tolerance = 2.0 * u * (layers + 2)   # embeddings, blocks, head
                assert error < tolerance, (policy, name, error, tolerance)
                worst_logit = max(worst_logit, float(np.abs(half - full).max()))
                results[(policy, name)] = error
            for name, loss in got["losses"].items():
                assert loss.dtype == tf.float32, (policy, name)
                difference = abs(float(loss) - float(want["losses"][name]))
                # A (weighted mean of) cross-entropies moves by at most twice
                # the largest change of any logit.
                assert difference <= 2 * worst_logit + 1e-6, (policy, name, difference)
                results[(policy, name)] = difference
            assert abs(float(total) - want_total) <= 2 * worst_logit * len(got["losses"]) + 1e-6
        return results

    def check_round_trip(self, tmp_dir):
        model, objective = self.model, self.objective
        config = objective.get_config()
        clone = type(objective).from_config(config)
        assert clone.get_config() == config
        assert [tuple(v.shape) for v in clone.weights] == [tuple(v.shape) for v in objective.weights]

        path = os.path.join(tmp_dir, "%s.keras" % self.name.replace("/", "_"))
        model.save(path)
        loaded = keras.models.load_model(path)
        assert type(loaded.objectives[0]) is type(objective)
        want_total, want = model.compute_loss_and_metrics(self.features)
        got_total, got = loaded.compute_loss_and_metrics(self.features)
        assert float(got_total) == float(want_total)
        assert set(got) == set(want)
        for name in want:
            assert [float(x) for x in got[name]] == [float(x) for x in want[name]], name
        _assert_outputs_close(loaded(self.features), model(self.features), atol=0.0,
                              what=".keras")
        return {"path": path}


def run_objective_checks(objective_factory, encoder_factory, features, checks=None,
                         tmp_dir=None, **options):
    """Runs the objective checks (see the module docstring)."""
    case = ObjectiveCase(options.pop("name", "objective"), objective_factory, encoder_factory,
                         features, **options)
    if tmp_dir is None:
        import tempfile  # pylint: disable=g-import-not-at-top
        with tempfile.TemporaryDirectory() as tmp:
            return case.run(checks, tmp)
    return case.run(checks, tmp_dir)


def parametrize(cases):
    """`pytest.param(case, check)` for every check of every case, with readable ids."""
    return [pytest.param(case, check, id="%s-%s" % (case.name, check))
            for case in cases for check in case.checks]
