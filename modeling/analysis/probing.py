"""Layer-wise probing: how well does a linear classifier read a tag off each layer?

For a CoNLL-style tagged file (token first, tag last, a blank line between
sentences; `data.processors.conll`), every word is represented by the frozen
features of its FIRST word piece (the alignment `conll.convert_sentence` makes
for NER) at every depth: the embedding output (layer 0) and the output of each
Transformer layer (1 .. L). A linear probe per depth -- softmax regression,
``softmax(x W + b)`` on features standardised with the training words' mean
and standard deviation, trained with Adam on mini-batches for a FIXED number
of epochs with an L2 penalty on W, all in numpy (deterministic for a seed) --
is trained on the training sentences and scored on the held-out ones: word
accuracy per layer. The majority-tag baseline (the most frequent training tag,
predicted everywhere) is reported beside it. A tag the training words never
carry counts as an error in dev.

Tags: with ``tag_scheme="any"`` (part-of-speech and other tag sets) any tag
is accepted; ``"bio"`` / ``"bioes"`` are checked against the scheme
(`conll.read_conll` / `conll.check_tags`). The tag is the last column unless
`tag_column` says otherwise (CoNLL-2003's part-of-speech tags: column 1).
"""

import json
import os

import numpy as np

from data import atomic
from data.processors import conll
from data.processors.base import DataError

__all__ = ["TAG_SCHEMES", "read_tagged_file", "split_sentences", "layer_features",
           "train_linear_probe", "probe_layers", "write_probe_results", "probe_figure"]

TAG_SCHEMES = ("any",) + tuple(conll.SCHEMES)


def read_tagged_file(path, tag_scheme="any", tag_column=-1):
    """The `conll.TaggedSentence`s of a CoNLL-style file (`conll.read_conll`).

    The token is the first column, the tag column `tag_column` (default the
    last; CoNLL-2003's part-of-speech tags are column 1, counting from 0), a
    blank line ends a sentence, ``-DOCSTART-`` lines are skipped; any tag is
    accepted for ``"any"``, the others check the tags against their scheme.
    A line without the tag column, or a file without sentences, is a
    `DataError` naming ``file:line``.
    """
    if tag_scheme not in TAG_SCHEMES:
        raise ValueError("tag scheme %r: expected one of %s" % (tag_scheme, ", ".join(TAG_SCHEMES)))
    sentences = conll.read_conll(path, None if tag_scheme == "any" else tag_scheme,
                                 set_type="probe", tag_column=tag_column)
    if not sentences:
        raise DataError("%s: no tagged sentence; expected CoNLL lines 'token ... tag' with a "
                        "blank line between sentences" % path)
    return sentences


def split_sentences(sentences, dev_fraction=0.2, seed=0):
    """``(train, dev)``: a seeded random `dev_fraction` of the sentences held out."""
    if not 0.0 < dev_fraction < 1.0:
        raise ValueError("dev fraction (--probe_dev_fraction) must be in (0, 1), got %r"
                         % (dev_fraction,))
    if len(sentences) < 2:
        raise DataError("probing needs at least 2 sentences (train and dev), got %d"
                        % len(sentences))
    order = np.random.RandomState(seed).permutation(len(sentences))
    num_dev = min(len(sentences) - 1, max(1, int(round(dev_fraction * len(sentences)))))
    dev = set(order[:num_dev].tolist())
    return ([s for i, s in enumerate(sentences) if i not in dev],
            [s for i, s in enumerate(sentences) if i in dev])


def layer_features(encoder, tokenizer, sentences, max_seq_length=128, batch_size=32):
    """Frozen first-piece features of every word at every depth.

    Returns:
      ``(features, tags)``: `features` a list of ``[words, hidden]`` float32
      arrays, index 0 the embedding output and i the output of layer i;
      `tags` the tag of each of those words (words cut off by
      `max_seq_length` are left out).
    """
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    spec = tf.TensorSpec([None, None], tf.int32)

    @tf.function(input_signature=[{"input_ids": spec, "input_mask": spec, "segment_ids": spec}])
    def run(features):
        outputs = encoder(features, training=False)
        return [tf.cast(t, tf.float32)
                for t in [outputs["embedding_output"]] + list(outputs["encoder_outputs"])]

    # convert_sentence puts a word's tag on its first piece; the tag ids are
    # not needed here, only where the first pieces are.
    label_map = {tag: 0 for sentence in sentences for tag in sentence.tags}
    converted = [conll.convert_sentence(s, label_map, max_seq_length, tokenizer)
                 for s in sentences]
    depth_features, tags = None, []
    for start in range(0, len(converted), batch_size):
        chunk = converted[start:start + batch_size]
        width = max(sum(c.input_mask) for c in chunk)
        batch = {name: np.array([getattr(c, name)[:width] for c in chunk], np.int32)
                 for name in ("input_ids", "input_mask", "segment_ids")}
        outputs = [o.numpy() for o in run(batch)]
        if depth_features is None:
            depth_features = [[] for _ in outputs]
        for row, (c, sentence) in enumerate(zip(chunk, sentences[start:start + batch_size])):
            positions = [i for i, m in enumerate(c.label_mask[:width]) if m]
            for depth, output in enumerate(outputs):
                depth_features[depth].append(output[row, positions])
            tags.extend(sentence.tags[:len(positions)])
    return [np.concatenate(f).astype(np.float32) for f in depth_features], tags


def train_linear_probe(x_train, y_train, num_classes, epochs=30, learning_rate=0.01, l2=1e-3,
                       batch_size=64, seed=0):
    """Softmax regression on standardised features; returns ``predict(x) -> class ids``.

    Adam (beta 0.9/0.999) on mini-batches of `batch_size` words, `epochs`
    passes over the data in a seeded order; loss = mean cross-entropy +
    ``l2 * sum(W**2)``.
    """
    rng = np.random.RandomState(seed)
    mean = x_train.mean(0)
    std = x_train.std(0) + 1e-6
    x = (x_train - mean) / std
    y = np.asarray(y_train)
    dim = x.shape[1]
    params = [np.zeros((dim, num_classes), np.float64), np.zeros(num_classes, np.float64)]
    moments = [[np.zeros_like(p), np.zeros_like(p)] for p in params]
    step = 0
    for _ in range(epochs):
        order = rng.permutation(len(x))
        for start in range(0, len(x), batch_size):
            index = order[start:start + batch_size]
            xb, yb = x[index].astype(np.float64), y[index]
            logits = xb @ params[0] + params[1]
            logits -= logits.max(1, keepdims=True)
            probs = np.exp(logits)
            probs /= probs.sum(1, keepdims=True)
            probs[np.arange(len(yb)), yb] -= 1.0
            probs /= len(yb)
            grads = [xb.T @ probs + 2.0 * l2 * params[0], probs.sum(0)]
            step += 1
            for param, grad, (m, v) in zip(params, grads, moments):
                m *= 0.9
                m += 0.1 * grad
                v *= 0.999
                v += 0.001 * grad * grad
                m_hat = m / (1 - 0.9 ** step)
                v_hat = v / (1 - 0.999 ** step)
                param -= learning_rate * m_hat / (np.sqrt(v_hat) + 1e-8)

    def predict(features):
        z = (np.asarray(features, np.float64) - mean) / std
        return np.argmax(z @ params[0] + params[1], axis=1)

    return predict


def probe_layers(encoder, tokenizer, train_sentences, dev_sentences, max_seq_length=128,
                 epochs=30, learning_rate=0.01, l2=1e-3, batch_size=64, seed=0):
    """Trains and scores one linear probe per depth; returns the results dict.

    ``{"layers": [{"layer": 0, "name": "embeddings", "train_accuracy",
    "dev_accuracy"}, ...], "majority_tag", "majority_baseline_dev_accuracy",
    "num_train_words", "num_dev_words", "tags", "probe": {settings}}``.
    """
    x_train, tags_train = layer_features(encoder, tokenizer, train_sentences, max_seq_length)
    x_dev, tags_dev = layer_features(encoder, tokenizer, dev_sentences, max_seq_length)
    if not tags_train or not tags_dev:
        raise DataError("probing needs tagged words in both train (%d) and dev (%d)"
                        % (len(tags_train), len(tags_dev)))
    labels = sorted(set(tags_train))
    index = {tag: i for i, tag in enumerate(labels)}
    y_train = np.array([index[t] for t in tags_train])
    y_dev = np.array([index.get(t, -1) for t in tags_dev])  # unseen tag: always wrong
    counts = np.bincount(y_train, minlength=len(labels))
    majority = int(np.argmax(counts))
    layers = []
    for depth, (train, dev) in enumerate(zip(x_train, x_dev)):
        predict = train_linear_probe(train, y_train, len(labels), epochs, learning_rate, l2,
                                     batch_size, seed)
        layers.append({"layer": depth, "name": "embeddings" if depth == 0 else "layer_%d" % depth,
                       "train_accuracy": float(np.mean(predict(train) == y_train)),
                       "dev_accuracy": float(np.mean(predict(dev) == y_dev))})
    return {
        "layers": layers,
        "majority_tag": labels[majority],
        "majority_baseline_dev_accuracy": float(np.mean(y_dev == majority)),
        "num_train_sentences": len(train_sentences),
        "num_dev_sentences": len(dev_sentences),
        "num_train_words": int(len(y_train)),
        "num_dev_words": int(len(y_dev)),
        "tags": labels,
        "probe": {"epochs": epochs, "learning_rate": learning_rate, "l2": l2,
                  "batch_size": batch_size, "seed": seed},
    }


def probe_figure(results):
    """Dev accuracy per layer, with the majority baseline as a dashed line."""
    from matplotlib.figure import Figure  # pylint: disable=g-import-not-at-top
    layers = [r["layer"] for r in results["layers"]]
    figure = Figure(figsize=(max(4.0, 0.4 * len(layers) + 2.0), 3.2), dpi=100)
    axes = figure.add_subplot(1, 1, 1)
    axes.plot(layers, [r["dev_accuracy"] for r in results["layers"]], "o-", label="dev")
    axes.plot(layers, [r["train_accuracy"] for r in results["layers"]], ".:", label="train")
    axes.axhline(results["majority_baseline_dev_accuracy"], color="grey", linestyle="--",
                 label="majority tag (%s)" % results["majority_tag"])
    axes.set_xticks(layers)
    axes.set_xlabel("layer (0 = embeddings)")
    axes.set_ylabel("word accuracy")
    axes.set_ylim(0.0, 1.02)
    axes.legend(fontsize=7, loc="lower right")
    axes.set_title("linear probe per layer", fontsize=9)
    figure.tight_layout()
    return figure


def write_probe_results(results, output_dir):
    """``probe_results.json`` and ``probe_accuracy.png`` (+ TensorBoard image), atomically."""
    from modeling.analysis import attention  # pylint: disable=g-import-not-at-top
    atomic.write_text(os.path.join(output_dir, "probe_results.json"),
                      json.dumps(results, indent=1) + "\n")
    png = attention.save_figure(probe_figure(results),
                                os.path.join(output_dir, "probe_accuracy.png"))
    attention.write_tensorboard_images({"probe_accuracy": png},
                                       os.path.join(output_dir, "tensorboard"))
    return results
