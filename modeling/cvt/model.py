"""`CvtTagger`: Clark et al. (2018)'s BiLSTM tagger with cross-view training.

    word_ids [batch, words]
      -> word embeddings (dropout)
      -> layer 1: a forward LSTM and a backward LSTM, kept apart:
         h1_fwd[t] has read words 0..t, h1_bwd[t] words t..end
      -> layer 2: a BiLSTM over [h1_fwd; h1_bwd] (dropout)
      -> primary prediction module on both layers, h1 + h2 =
         [h1_fwd; h1_bwd; h2_fwd; h2_bwd]: softmax(W ReLU(W' h))
         (Clark et al. 2018, section 3.2: NN(h1 (+) h2); the authors' tagging
         module reads `[uni_reprs, bi_reprs]`)

The auxiliary prediction modules (same form, own weights) read restricted
views of layer 1 (Clark et al. 2018, section 3.1):

    forward    h1_fwd[t]       words 0..t
    backward   h1_bwd[t]       words t..end
    future     h1_fwd[t - 1]   words 0..t-1   (not the word itself)
    past       h1_bwd[t + 1]   words t+1..end

The future view has nothing to read at the first word and the past view at
the last: those positions are left out of their losses, as the authors'
code masks them (`masked_ce_loss(..., roll_direction)`); their logits there
read zeros. `auxiliary_views` may add the authors' fifth module, "full": a
linear module (no ReLU) on the primary's inputs [h1; h2], fed the dropout
noise of the student pass (`research/cvt_text`'s `full` module; not in the
paper).

Losses (`compute_loss_and_metrics`, the trainer's contract). A step's
features hold a labelled batch (``word_ids``, ``input_mask``,
``label_ids``) and, for CVT, an unlabelled batch (``unlabeled_word_ids``,
``unlabeled_input_mask``) in the same dict:

    loss = CE(primary, smoothed gold)                          over labelled words
         + unlabeled_weight * sum_views CE(p_primary, q_view)  over unlabelled words

(`label_smoothing` eps: gold = (1 - eps) one_hot + eps / num_labels, on the
labelled loss only, as the authors' code; default 0, the paper's plain CE)

where p_primary is the primary module's distribution on the unlabelled
sentence computed without dropout and held fixed (`tf.stop_gradient`: the
unlabelled loss trains the auxiliary modules and the shared layers it reads,
never the primary module), and q_view an auxiliary module's with dropout
(the noisy student; `unlabeled_dropout`, default `dropout`: the authors'
code keeps 80% on unlabelled and 50% on labelled batches). Both are means
over real (unpadded) words, each view's over the words it predicts. If the
features hold ``unlabeled_weight_scale`` ([batch], one value: the job's
ramp-up, `modeling.cvt.data.unlabeled_input_fn`) the cross-view term is
multiplied by it. With ``unlabeled_trains_embeddings=False`` the student
pass reads the word embeddings through `tf.stop_gradient`, so the
cross-view loss trains layer 1 and the auxiliary modules only (the paper,
and the default, train the embeddings too; see `modeling.cvt.job`).

Padding is at the end of each sentence; the backward LSTMs reverse each
sentence within its own length (as `modeling.elmo.network` does), so no
real position reads a padded one, and outputs at padded positions are zero.
The LSTMs are plain `keras.layers.LSTM` (cuDNN kernel on a GPU).
"""

import keras
import tensorflow as tf

from modeling.layers.common import PACKAGE as _PACKAGE

__all__ = ["AUXILIARY_VIEWS", "FULL_VIEW", "CvtTagger", "PredictionModule"]

AUXILIARY_VIEWS = ("forward", "backward", "future", "past")
FULL_VIEW = "full"  # the authors' code's fifth module (see the module docstring)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class PredictionModule(keras.layers.Layer):
    """softmax(W ReLU(W' h)): one hidden layer, then logits over the tags.

    `activate=False` drops the ReLU (the authors' "full" module: two linear maps).
    """

    def __init__(self, hidden_dim, num_labels, activate=True, **kwargs):
        super().__init__(**kwargs)
        self.hidden_dim = hidden_dim
        self.num_labels = num_labels
        self.activate = bool(activate)
        self.hidden = keras.layers.Dense(hidden_dim, activation="relu" if activate else None,
                                         name="hidden")
        self.output_layer = keras.layers.Dense(num_labels, name="logits")

    def build(self, input_shape):
        self.hidden.build(input_shape)
        self.output_layer.build(tuple(input_shape[:-1]) + (self.hidden_dim,))
        self.built = True

    def call(self, inputs):
        return self.output_layer(self.hidden(inputs))

    def get_config(self):
        config = super().get_config()
        config.update(hidden_dim=self.hidden_dim, num_labels=self.num_labels,
                      activate=self.activate)
        return config


def _masked_mean(values, mask):
    """(sum, count) of `values` where `mask` is 1, as float32."""
    mask = tf.cast(mask, tf.float32)
    return tf.reduce_sum(tf.cast(values, tf.float32) * mask), tf.reduce_sum(mask)


@keras.saving.register_keras_serializable(package=_PACKAGE)
class CvtTagger(keras.Model):
    """The tagger (see the module docstring).

    Args:
        vocab_size: word vocabulary size (`data.word_vocab.WordVocabulary`).
        num_labels: tags (``O`` first).
        embedding_dim: word vector width.
        lstm_dim: units of each direction of layer 1.
        second_lstm_dim: units of each direction of layer 2 (default `lstm_dim`).
        hidden_dim: hidden width of the primary module.
        aux_hidden_dim: hidden width of each auxiliary module (default `hidden_dim`).
        dropout: on the embeddings and on each layer's outputs (training only).
        unlabeled_weight: weight of the cross-view loss.
        word_dropout: in training, each word is replaced by `unk_id` with this
            probability (so the tagger also learns to read the context).
        unk_id: the vocabulary's unknown word (``<UNK>``, id 2 in ELMo's vocabularies).
        unlabeled_trains_embeddings: False: the cross-view loss trains the first
            LSTM layer and the auxiliary modules but not the word embeddings.
        auxiliary_views: the auxiliary modules, of `AUXILIARY_VIEWS` (the
            paper's four, the default) and `FULL_VIEW`.
        label_smoothing: on the labelled loss (the authors' code: 0.1).
        unlabeled_dropout: dropout of the student pass on unlabelled words
            (default `dropout`; the authors' code: 0.2 against 0.5).
    """

    def __init__(self, vocab_size, num_labels, embedding_dim=64, lstm_dim=64,
                 second_lstm_dim=None, hidden_dim=64, aux_hidden_dim=None, dropout=0.3,
                 unlabeled_weight=1.0, word_dropout=0.0, unk_id=2,
                 unlabeled_trains_embeddings=True, auxiliary_views=AUXILIARY_VIEWS,
                 label_smoothing=0.0, unlabeled_dropout=None, **kwargs):
        super().__init__(**kwargs)
        self.vocab_size = int(vocab_size)
        self.num_labels = int(num_labels)
        self.embedding_dim = int(embedding_dim)
        self.lstm_dim = int(lstm_dim)
        self.second_lstm_dim = int(second_lstm_dim or lstm_dim)
        self.hidden_dim = int(hidden_dim)
        self.aux_hidden_dim = int(aux_hidden_dim or hidden_dim)
        self.dropout_rate = float(dropout)
        self.unlabeled_weight = float(unlabeled_weight)
        self.word_dropout = float(word_dropout)
        self.unk_id = int(unk_id)
        self.unlabeled_trains_embeddings = bool(unlabeled_trains_embeddings)
        known = AUXILIARY_VIEWS + (FULL_VIEW,)
        views = tuple(auxiliary_views)
        unknown = [v for v in views if v not in known]
        if unknown or not views or len(set(views)) != len(views):
            raise ValueError("auxiliary_views must be distinct names of %s, got %r"
                             % (", ".join(known), views))
        self.auxiliary_views = tuple(v for v in known if v in views)
        if not 0.0 <= float(label_smoothing) < 1.0:
            raise ValueError("label_smoothing must be in [0, 1), got %r" % (label_smoothing,))
        self.label_smoothing = float(label_smoothing)
        self.unlabeled_dropout_rate = (self.dropout_rate if unlabeled_dropout is None
                                       else float(unlabeled_dropout))
        self.seed_generator = keras.random.SeedGenerator(0, name="word_dropout_seed")
        self.embedding = keras.layers.Embedding(
            self.vocab_size, self.embedding_dim,
            embeddings_initializer=keras.initializers.RandomUniform(-0.1, 0.1),
            name="word_embeddings")
        self.lstm1_fwd = keras.layers.LSTM(self.lstm_dim, return_sequences=True,
                                           name="lstm1_forward")
        self.lstm1_bwd = keras.layers.LSTM(self.lstm_dim, return_sequences=True,
                                           name="lstm1_backward")
        self.lstm2_fwd = keras.layers.LSTM(self.second_lstm_dim, return_sequences=True,
                                           name="lstm2_forward")
        self.lstm2_bwd = keras.layers.LSTM(self.second_lstm_dim, return_sequences=True,
                                           name="lstm2_backward")
        self.dropout = keras.layers.Dropout(self.dropout_rate)
        # One layer when the rates agree (the default), so that a model without the
        # option draws the same random numbers as before it existed.
        self.unlabeled_dropout = (
            self.dropout if self.unlabeled_dropout_rate == self.dropout_rate
            else keras.layers.Dropout(self.unlabeled_dropout_rate, name="unlabeled_dropout"))
        self.primary = PredictionModule(self.hidden_dim, self.num_labels, name="primary")
        self.auxiliary = {view: PredictionModule(self.aux_hidden_dim, self.num_labels,
                                                 activate=view != FULL_VIEW,
                                                 name="aux_" + view)
                          for view in self.auxiliary_views}

    def build_all(self, max_seq_length=8):
        """Creates every weight (the primary and all auxiliary modules) with a dummy batch."""
        ids = tf.zeros([1, max_seq_length], tf.int32)
        self.views(ids, tf.ones_like(ids), training=False)
        return self

    # ------------------------------------------------------------ forward pass

    @staticmethod
    def _backward(lstm, x, lengths):
        reverse = lambda t: tf.reverse_sequence(t, lengths, seq_axis=1, batch_axis=0)
        return reverse(lstm(reverse(x)))

    def encode(self, word_ids, input_mask, training=False, freeze_embeddings=False,
               dropout=None):
        """Layer outputs: h1_fwd, h1_bwd, h2 ([h2_fwd; h2_bwd]), zero at padding.

        `dropout`: the Dropout layer to apply (default the labelled one).
        """
        dropout = dropout or self.dropout
        word_ids = tf.convert_to_tensor(word_ids)
        mask = tf.cast(input_mask, self.compute_dtype)[:, :, None]
        lengths = tf.reduce_sum(tf.cast(input_mask, tf.int32), axis=1)
        if training and self.word_dropout > 0:
            drop = keras.random.uniform(tf.shape(word_ids), seed=self.seed_generator)
            word_ids = tf.where(drop < self.word_dropout, tf.cast(self.unk_id, word_ids.dtype),
                                word_ids)
        x = self.embedding(word_ids)
        if freeze_embeddings:
            x = tf.stop_gradient(x)
        x = dropout(x, training=training) * mask
        h1_fwd = self.lstm1_fwd(x) * mask
        h1_bwd = self._backward(self.lstm1_bwd, x, lengths) * mask
        h1 = dropout(tf.concat([h1_fwd, h1_bwd], axis=-1), training=training)
        h2 = tf.concat([self.lstm2_fwd(h1), self._backward(self.lstm2_bwd, h1, lengths)],
                       axis=-1) * mask
        return h1_fwd, h1_bwd, h2

    def views(self, word_ids, input_mask, training=False, auxiliary=True,
              freeze_embeddings=False, dropout=None):
        """Logits per view: {"primary", then each of `auxiliary_views`}."""
        dropout = dropout or self.dropout
        h1_fwd, h1_bwd, h2 = self.encode(word_ids, input_mask, training, freeze_embeddings,
                                         dropout)
        both = tf.concat([h1_fwd, h1_bwd, h2], axis=-1)  # h1 (+) h2, the primary's input
        logits = {"primary": self.primary(dropout(both, training=training))}
        if auxiliary:
            # future: h1_fwd[t-1]; past: h1_bwd[t+1] (zeros beyond the ends;
            # h1_bwd is zero at padded positions, so the last real word's past
            # view is zeros too; `view_masks` leaves those positions out).
            future = tf.pad(h1_fwd[:, :-1], [[0, 0], [1, 0], [0, 0]])
            past = tf.pad(h1_bwd[:, 1:], [[0, 0], [0, 1], [0, 0]])
            inputs = {"forward": h1_fwd, "backward": h1_bwd, "future": future, "past": past,
                      FULL_VIEW: both}
            for view in self.auxiliary_views:
                logits[view] = self.auxiliary[view](dropout(inputs[view], training=training))
        return logits

    @staticmethod
    def view_masks(input_mask):
        """{view: [batch, words] float32}: the words each auxiliary view predicts.

        Every real word, except the first for "future" (it has no word before
        it) and the last for "past" (none after it).
        """
        mask = tf.cast(input_mask, tf.float32)
        inner = mask[:, 1:] * mask[:, :-1]
        return {"forward": mask, "backward": mask, FULL_VIEW: mask,
                "future": tf.pad(inner, [[0, 0], [1, 0]]),
                "past": tf.pad(inner, [[0, 0], [0, 1]])}

    def call(self, features, training=False):
        logits = self.views(features["word_ids"], features["input_mask"], training,
                            auxiliary=False)["primary"]
        return {"logits": logits,
                "predicted_ids": tf.argmax(logits, axis=-1, output_type=tf.int32)}

    # ------------------------------------------------------------------ losses

    def labeled_loss(self, features, training=False):
        """(sum, count) of the primary module's cross-entropy over labelled words, and logits."""
        logits = self.views(features["word_ids"], features["input_mask"], training,
                            auxiliary=False)["primary"]
        labels = tf.cast(features["label_ids"], tf.int32)
        logits32 = tf.cast(logits, tf.float32)
        if training and self.label_smoothing > 0:  # the authors': labelled training only
            targets = tf.one_hot(labels, self.num_labels) * (1.0 - self.label_smoothing)
            targets += self.label_smoothing / self.num_labels
            losses = tf.nn.softmax_cross_entropy_with_logits(labels=targets, logits=logits32)
        else:
            losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                    logits=logits32)
        return _masked_mean(losses, features["input_mask"]), logits

    def unlabeled_losses(self, word_ids, input_mask, training=False):
        """{view: (sum, count)} of CE(stop_gradient(p_primary), q_view) over the words
        each view predicts (`view_masks`)."""
        teacher = self.views(word_ids, input_mask, training=False, auxiliary=False)["primary"]
        targets = tf.stop_gradient(tf.nn.softmax(tf.cast(teacher, tf.float32), axis=-1))
        student = self.views(word_ids, input_mask, training=training,
                             freeze_embeddings=not self.unlabeled_trains_embeddings,
                             dropout=self.unlabeled_dropout)
        masks = self.view_masks(input_mask)
        result = {}
        for view in self.auxiliary_views:
            losses = tf.nn.softmax_cross_entropy_with_logits(
                labels=targets, logits=tf.cast(student[view], tf.float32))
            result[view] = _masked_mean(losses, masks[view])
        return result

    def compute_loss_and_metrics(self, features, training=False):
        metrics = {}
        loss = tf.constant(0.0)
        if "label_ids" in features:
            (total, count), logits = self.labeled_loss(features, training)
            loss += total / tf.maximum(count, 1.0)
            mask = tf.cast(features["input_mask"], tf.float32)
            correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32),
                                       tf.cast(features["label_ids"], tf.int32)), tf.float32)
            metrics["loss"] = (total, count)
            metrics["accuracy"] = (tf.reduce_sum(correct * mask), tf.reduce_sum(mask))
        if "unlabeled_word_ids" in features:
            per_view = self.unlabeled_losses(features["unlabeled_word_ids"],
                                             features["unlabeled_input_mask"], training)
            cvt = tf.constant(0.0)
            for view, (total, count) in per_view.items():
                cvt += total / tf.maximum(count, 1.0)
                metrics["cvt_%s_loss" % view] = (total, count)
            weight = self.unlabeled_weight
            if "unlabeled_weight_scale" in features:  # the ramp-up (modeling.cvt.data)
                weight *= tf.reduce_mean(tf.cast(features["unlabeled_weight_scale"], tf.float32))
            loss += weight * cvt
            metrics["cvt_loss"] = (cvt, tf.constant(1.0))
        return loss, metrics

    def get_config(self):
        return {"vocab_size": self.vocab_size, "num_labels": self.num_labels,
                "embedding_dim": self.embedding_dim, "lstm_dim": self.lstm_dim,
                "second_lstm_dim": self.second_lstm_dim, "hidden_dim": self.hidden_dim,
                "aux_hidden_dim": self.aux_hidden_dim, "dropout": self.dropout_rate,
                "unlabeled_weight": self.unlabeled_weight, "word_dropout": self.word_dropout,
                "unk_id": self.unk_id,
                "unlabeled_trains_embeddings": self.unlabeled_trains_embeddings,
                "auxiliary_views": list(self.auxiliary_views),
                "label_smoothing": self.label_smoothing,
                "unlabeled_dropout": self.unlabeled_dropout_rate,
                "name": self.name}
