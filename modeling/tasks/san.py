"""`StochasticAnswerNetwork`: MT-DNN's output layer of the pairwise classification tasks.

Liu et al. (2019), "Multi-Task Deep Neural Networks for Natural Language
Understanding", section 3.1, after Liu, Duh and Gao (2018), "Stochastic
Answer Networks for Natural Language Inference". Read from the encoder's
sequence output of a packed pair ``[CLS] premise [SEP] hypothesis [SEP]``:

* working memories: M^p, the premise's vectors (segment 0, with ``[CLS]``
  and the first ``[SEP]``), and M^h, the hypothesis's (segment 1, with the
  last ``[SEP]``); padding (``input_mask`` 0) belongs to neither;
* initial state: the hypothesis's self-attentive summary
  ``s_0 = sum_j alpha_j M^h_j``, ``alpha = softmax_j(w_1 . M^h_j)``;
* K reasoning steps (``num_steps``, 5 by default), t = 0 .. K-1: bilinear
  attention of the state over the premise memory
  ``beta = softmax_j(M^p_j . (W_2 s_t + b_2))``, ``x_t = sum_j beta_j M^p_j``;
  the step's prediction ``P_t = softmax(W_3 [s_t; x_t; |s_t - x_t|;
  s_t * x_t] + b_3)``; the next state ``s_{t+1} = GRU(x_t, s_t)``;
* the answer: the average of the steps' predictions. In training, stochastic
  prediction dropout removes each step with probability ``step_dropout``
  (0.1) independently per example, one step drawn at random always kept, and
  averages the kept ones; at inference every step is averaged.

The order within a step is the authors' (`module/san.py` of namisan/mt-dnn):
step t predicts from the state it attended with, then updates it, so the
first prediction is from s_0 and the K-th update is not needed. Dropout as
in their code, at the model's rate (``dropout_rate``): on the hypothesis
memory before its summary and on the premise memory and the state for the
attention scores (one mask per example and feature, shared by the
positions), on the prediction features, and on the state before the GRU.
The GRU is PyTorch's `GRUCell` (reset gate applied after the recurrent
product, gates in the order reset, update, candidate). Where the authors'
code averages ``mask_t / (1 - p) * P_t`` over all K steps (an unnormalised
estimate of the mean), this layer averages the kept steps, as the papers
describe.

The outputs are float32 whatever the compute dtype. Variables, under the
layer's name: ``summary_weights`` [H] (w_1), ``attention_kernel`` [H, H] and
``attention_bias`` [H] (W_2, b_2), ``gru_input_kernel`` and
``gru_recurrent_kernel`` [H, 3H], ``gru_input_bias`` and
``gru_recurrent_bias`` [3H], ``output_weights`` [num_labels, 4H] and
``output_bias`` [num_labels] (W_3, b_3).
"""

import math

import keras
import tensorflow as tf

from modeling.layers.activations import truncated_normal_initializer

__all__ = ["StochasticAnswerNetwork", "DEFAULT_STEPS", "DEFAULT_STEP_DROPOUT"]

DEFAULT_STEPS = 5
DEFAULT_STEP_DROPOUT = 0.1
_MASKED = -1e9        # a score no real position reaches: exp() underflows to exactly 0
_TINY = 1e-30         # floor of the averaged probabilities before the log


def masked_softmax(scores, mask):
    """Softmax over the last axis restricted to `mask`; all-masked rows give zeros.

    Masked positions get weight exactly 0 whatever their scores, so what the
    padding holds never reaches the output.
    """
    weights = tf.nn.softmax(tf.where(mask, scores, _MASKED), axis=-1)
    return weights * tf.cast(mask, weights.dtype)


@keras.saving.register_keras_serializable(package="bert_family")
class StochasticAnswerNetwork(keras.layers.Layer):
    """SAN over a pair's sequence output (see the module docstring).

    Args:
      num_labels: classes.
      hidden_size: H, the encoder's width (memories and state).
      num_steps: K >= 1.
      step_dropout: the probability of dropping one step's prediction in
        training, in [0, 1).
      dropout_rate: the dropout inside the layer (memories, state, features).
      initializer_range: stddev of the truncated normal of w_1, W_2, W_3.
      seed: seeds the layer's dropout and step-dropout draws.
    """

    def __init__(self, num_labels, hidden_size, num_steps=DEFAULT_STEPS,
                 step_dropout=DEFAULT_STEP_DROPOUT, dropout_rate=0.1, initializer_range=0.02,
                 seed=None, **kwargs):
        # float32 whatever the policy: the softmaxes, the GRU and the log of the average.
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        if isinstance(num_steps, bool) or int(num_steps) != num_steps or num_steps < 1:
            raise ValueError("num_steps must be an integer >= 1, got %r" % (num_steps,))
        if not 0.0 <= float(step_dropout) < 1.0:
            raise ValueError("step_dropout must be in [0, 1), got %r" % (step_dropout,))
        self.num_labels = int(num_labels)
        self.hidden_size = int(hidden_size)
        self.num_steps = int(num_steps)
        self.step_dropout = float(step_dropout)
        self.dropout_rate = float(dropout_rate)
        self.initializer_range = float(initializer_range)
        self.seed = seed
        h = self.hidden_size
        normal = truncated_normal_initializer(self.initializer_range)
        # PyTorch's GRUCell initialisation (the authors keep it): U(-1/sqrt(H), 1/sqrt(H)).
        bound = 1.0 / math.sqrt(h)
        uniform = keras.initializers.RandomUniform(-bound, bound, seed=seed)
        self.summary_weights = self.add_weight(name="summary_weights", shape=(h,),
                                               initializer=normal)
        self.attention_kernel = self.add_weight(name="attention_kernel", shape=(h, h),
                                                initializer=normal)
        self.attention_bias = self.add_weight(name="attention_bias", shape=(h,),
                                              initializer="zeros")
        self.gru_input_kernel = self.add_weight(name="gru_input_kernel", shape=(h, 3 * h),
                                                initializer=uniform)
        self.gru_recurrent_kernel = self.add_weight(name="gru_recurrent_kernel",
                                                    shape=(h, 3 * h), initializer=uniform)
        self.gru_input_bias = self.add_weight(name="gru_input_bias", shape=(3 * h,),
                                              initializer=uniform)
        self.gru_recurrent_bias = self.add_weight(name="gru_recurrent_bias", shape=(3 * h,),
                                                  initializer=uniform)
        self.output_weights = self.add_weight(name="output_weights",
                                              shape=(self.num_labels, 4 * h),
                                              initializer=normal)
        self.output_bias = self.add_weight(name="output_bias", shape=(self.num_labels,),
                                           initializer="zeros")
        seeds = [None if seed is None else seed + k for k in range(3)]
        self.memory_dropout = keras.layers.Dropout(self.dropout_rate, noise_shape=(None, 1, h),
                                                   seed=seeds[0], dtype="float32",
                                                   name="memory_dropout")
        self.state_dropout = keras.layers.Dropout(self.dropout_rate, seed=seeds[1],
                                                  dtype="float32", name="state_dropout")
        self.step_seed_generator = keras.random.SeedGenerator(
            seeds[2], name="step_drop_seed_generator")
        self.built = True

    # ----------------------------------------------------------------- parts

    def summary(self, hypothesis_memory, hypothesis_mask):
        """s_0: the self-attentive summary of the (dropped-out) hypothesis memory."""
        scores = tf.einsum("bld,d->bl", hypothesis_memory, self.summary_weights)
        alpha = masked_softmax(scores, hypothesis_mask)
        return tf.einsum("bl,bld->bd", alpha, hypothesis_memory)

    def attend(self, state, premise_memory, premise_mask, training=None):
        """x_t: the premise memory read with bilinear attention from `state`."""
        query = tf.matmul(self.state_dropout(state, training=training),
                          self.attention_kernel) + self.attention_bias
        keys = self.memory_dropout(premise_memory, training=training)
        beta = masked_softmax(tf.einsum("bld,bd->bl", keys, query), premise_mask)
        return tf.einsum("bl,bld->bd", beta, premise_memory)

    def predict_step(self, state, read, training=None):
        """P_t = softmax(W_3 [s; x; |s - x|; s * x] + b_3), float32 `[batch, num_labels]`."""
        features = tf.concat([state, read, tf.abs(state - read), state * read], axis=-1)
        features = self.state_dropout(features, training=training)
        logits = tf.matmul(features, self.output_weights, transpose_b=True) + self.output_bias
        return tf.nn.softmax(logits, axis=-1)

    def gru(self, read, state):
        """PyTorch's GRUCell: the next state from input `read` and hidden `state`."""
        h = self.hidden_size
        gates_x = tf.matmul(read, self.gru_input_kernel) + self.gru_input_bias
        gates_h = tf.matmul(state, self.gru_recurrent_kernel) + self.gru_recurrent_bias
        reset = tf.sigmoid(gates_x[:, :h] + gates_h[:, :h])
        update = tf.sigmoid(gates_x[:, h:2 * h] + gates_h[:, h:2 * h])
        candidate = tf.tanh(gates_x[:, 2 * h:] + reset * gates_h[:, 2 * h:])
        return (1.0 - update) * candidate + update * state

    def step_mask(self, batch_size, training=None):
        """`[batch, K]` 1 for the steps whose predictions are averaged.

        In training: each step kept with probability 1 - step_dropout, and one
        step per row, drawn uniformly, always kept. Otherwise all ones.
        """
        shape = (batch_size, self.num_steps)
        if not training or self.step_dropout == 0.0:
            return tf.ones(shape, tf.float32)
        draws = keras.random.uniform(shape, seed=self.step_seed_generator)
        kept = tf.cast(draws >= self.step_dropout, tf.float32)
        forced = keras.random.randint((batch_size,), 0, self.num_steps,
                                      seed=self.step_seed_generator)
        return tf.maximum(kept, tf.one_hot(forced, self.num_steps, dtype=tf.float32))

    # ------------------------------------------------------------------ call

    def call(self, sequence, input_mask, segment_ids, training=None):
        """``{"probabilities": [b, n], "step_probabilities": [b, K, n], "step_mask": [b, K]}``.

        `sequence` is the encoder's `[b, L, H]` sequence output, `input_mask`
        and `segment_ids` the batch's `[b, L]` features.
        """
        memory = tf.cast(sequence, tf.float32)
        real = tf.cast(input_mask, tf.int32) > 0
        segments = tf.cast(segment_ids, tf.int32)
        premise_mask = tf.logical_and(real, tf.equal(segments, 0))
        hypothesis_mask = tf.logical_and(real, tf.equal(segments, 1))
        state = self.summary(self.memory_dropout(memory, training=training), hypothesis_mask)
        steps = []
        for t in range(self.num_steps):
            read = self.attend(state, memory, premise_mask, training=training)
            steps.append(self.predict_step(state, read, training=training))
            if t + 1 < self.num_steps:
                state = self.gru(read, self.state_dropout(state, training=training))
        step_probabilities = tf.stack(steps, axis=1)
        mask = self.step_mask(tf.shape(memory)[0], training=training)
        probabilities = (tf.reduce_sum(step_probabilities * mask[:, :, None], axis=1)
                         / tf.reduce_sum(mask, axis=1, keepdims=True))
        return {"probabilities": probabilities, "step_probabilities": step_probabilities,
                "step_mask": mask}

    @staticmethod
    def logits_of(probabilities):
        """log P: logits whose softmax is `probabilities` (floored at 1e-30)."""
        return tf.math.log(tf.maximum(probabilities, _TINY))

    def get_config(self):
        config = super().get_config()
        config.update(num_labels=self.num_labels, hidden_size=self.hidden_size,
                      num_steps=self.num_steps, step_dropout=self.step_dropout,
                      dropout_rate=self.dropout_rate,
                      initializer_range=self.initializer_range, seed=self.seed)
        return config
