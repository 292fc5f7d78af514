"""FAQ matching with a bi-encoder: encode the stored questions once, then one product per query.

    encoder = SentenceEncoder(bi_encoder.encoder, tokenizer, pooling="mean")
    build_index(encoder, ids, questions, "faq.npz", settings={...})
    index = load_index("faq.npz")
    check_encoder(index, encoder)            # refuses another model's vectors
    index.search(encoder.encode(["how do I reset my password"]), top_k=5)

`SentenceEncoder` is the fast inference path: tokenization with the
project's `FullTokenizer`, ``[CLS] text [SEP]`` by `data.packing`, each
batch padded only to its longest text (texts are sorted by length into
batches and put back in order), and encoder + pooling (+ L2 normalisation)
as ONE traced TensorFlow function for any batch size and length (no eager
dispatch, no retracing), as `modeling.serving.inference.Encoder` does.

The index file (`build_index`, written atomically) is a NumPy ``.npz``
(read without pickle):

    vectors    float32 [n, hidden]  L2-normalised when similarity is cosine
    ids        str [n]              the stored questions' ids
    questions  str [n]              their text (match.py prints it)
    settings   str                  JSON: format, pooling, similarity,
                                    normalized, dim, max_seq_length,
                                    do_lower_case, model_family, the model
                                    files it was built with, and a probe
                                    sentence with its vector

`check_encoder` compares an encoder with the index: same pooling,
similarity, dimension, casing, and the probe sentence's vector within 1e-3
(so another checkpoint of the same shape is refused too). `MatchIndex.search`
scores every stored vector with one matrix product and takes the top k
(`np.argpartition`, then a sort of those k).

Every problem is a `MatchingError` (a ValueError) with a one-line message.
"""

import dataclasses
import json
import os
from typing import Optional
import zipfile

import numpy as np
import tensorflow as tf

from data import atomic
from data import packing
from modeling import registry
from modeling.serving import inference
from modeling.tasks import siamese
from modeling.training.options import option

__all__ = ["MatchingError", "SentenceEncoder", "MatchIndex", "Matcher", "build_index", "load_index",
           "check_encoder", "load_sentence_encoder", "INDEX_FORMAT", "PROBE_TEXT",
           "IndexSettings", "MatchSettings"]

INDEX_FORMAT = "bert-siamese-index/1"
PROBE_TEXT = "How do I change the password of my account?"
_REQUIRED = ("vectors", "ids", "questions", "settings")
_COMPARED = ("pooling", "similarity", "dim", "do_lower_case")


class MatchingError(ValueError):
    """A missing or foreign index, or an encoder that does not fit it (one line)."""


class SentenceEncoder(object):
    """Texts to pooled vectors through a BERT-shaped encoder, fast.

    Args:
        encoder: a BERT-shaped encoder (returns `sequence_output`).
        tokenizer: its `FullTokenizer`.
        pooling: "cls", "mean" or "max" (`modeling.tasks.siamese.pool`).
        normalize: L2-normalise the vectors (for cosine similarity).
        max_seq_length: word pieces per text, [CLS] and [SEP] included.
        precision: "fp32" or "bf16" (`modeling.serving.inference.with_precision`).
    """

    def __init__(self, encoder, tokenizer, pooling="mean", normalize=True, max_seq_length=128,
                 precision="fp32"):
        if pooling not in siamese.POOLINGS:
            raise MatchingError("--pooling=%s: expected one of %s"
                                % (pooling, ", ".join(siamese.POOLINGS)))
        self.encoder = inference.with_precision(encoder, precision)
        self.tokenizer = tokenizer
        self.pooling = pooling
        self.normalize = bool(normalize)
        self.max_seq_length = int(max_seq_length)
        spec = tf.TensorSpec([None, None], tf.int32)
        self._call = tf.function(self._forward, input_signature=[
            {name: spec for name in siamese.FEATURE_NAMES}])

    @property
    def dim(self):
        return int(self.encoder.hidden_size)

    def _forward(self, features):
        outputs = self.encoder(features, training=False)
        vectors = siamese.pool(outputs["sequence_output"], features["input_mask"],
                               self.pooling)
        if self.normalize:
            vectors = tf.math.l2_normalize(vectors, axis=-1, epsilon=1e-12)
        return vectors

    def features(self, texts, tokens=None):
        """The padded int32 features of `texts` (each ``[CLS] text [SEP]``), as numpy.

        `tokens`: the texts' word pieces when already known.
        """
        if tokens is None:
            tokens = [self.tokenizer.tokenize(text) for text in texts]
        id_lists, segment_lists = [], []
        for pieces in tokens:
            packed, segments = packing.pack(pieces, None, self.max_seq_length)
            id_lists.append(self.tokenizer.convert_tokens_to_ids(packed))
            segment_lists.append(segments)
        return packing.pad_batch(id_lists, segment_lists, max(len(i) for i in id_lists))

    def encode(self, texts, batch_size=64):
        """float32 ``[len(texts), hidden]``; rows in the order of `texts`."""
        texts = list(texts)
        if not texts:
            return np.zeros([0, self.dim], np.float32)
        if len(texts) == 1:
            return self._call(self.features(texts)).numpy()
        tokens = [self.tokenizer.tokenize(t) for t in texts]
        order = np.argsort([len(t) for t in tokens], kind="stable")
        out = np.zeros([len(texts), self.dim], np.float32)
        for start in range(0, len(texts), batch_size):
            rows = order[start:start + batch_size]
            features = self.features(None, [tokens[i] for i in rows])
            out[rows] = self._call(features).numpy()
        return out


class MatchIndex(object):
    """Stored vectors, ids, questions and the settings they were built with."""

    def __init__(self, vectors, ids, questions, settings, path=None):
        self.vectors = np.asarray(vectors, np.float32)
        self.ids = [str(i) for i in ids]
        self.questions = [str(q) for q in questions]
        self.settings = dict(settings)
        self.path = path

    def __len__(self):
        return len(self.ids)

    def scores(self, query_vectors):
        """``[queries, stored]`` similarities (one matrix product)."""
        query_vectors = np.asarray(query_vectors, np.float32)
        if query_vectors.ndim == 1:
            query_vectors = query_vectors[None, :]
        if query_vectors.shape[-1] != self.vectors.shape[-1]:
            raise MatchingError(
                "query vectors have %d dimensions but the index %s holds %d-dimensional "
                "vectors; expected the encoder the index was built with"
                % (query_vectors.shape[-1], self.path or "", self.vectors.shape[-1]))
        if self.settings.get("similarity") == "cosine":
            norms = np.linalg.norm(query_vectors, axis=-1, keepdims=True)
            query_vectors = query_vectors / np.maximum(norms, 1e-12)
        return query_vectors @ self.vectors.T

    def search(self, query_vectors, top_k=5):
        """Per query, the `top_k` best ``(id, question, score)``, best first.

        Ties are broken by index order (the earlier stored question first).
        """
        if top_k < 1:
            raise MatchingError("--top_k=%r: expected at least 1" % (top_k,))
        scores = self.scores(query_vectors)
        k = min(int(top_k), scores.shape[1])
        results = []
        for row in scores:
            if k < row.shape[0]:
                candidates = np.argpartition(-row, k - 1)[:k]
            else:
                candidates = np.arange(row.shape[0])
            best = candidates[np.lexsort((candidates, -row[candidates]))]
            results.append([(self.ids[i], self.questions[i], float(row[i])) for i in best])
        return results


class Matcher(object):
    """Query texts to their top-k stored questions in ONE compiled call per batch.

    Encoding, scoring against the index (held as a constant) and
    `tf.math.top_k` run as one traced function, so a query costs one
    TensorFlow call after tokenization; results equal `MatchIndex.search` on
    the encoder's vectors (ties: the earlier stored question first). Check
    the encoder with `check_encoder` first.

    Args:
        sentence_encoder: the `SentenceEncoder` the index was built with.
        index: a `MatchIndex`.
        top_k: results per query (at most the index size).
    """

    def __init__(self, sentence_encoder, index, top_k=5):
        if top_k < 1:
            raise MatchingError("--top_k=%r: expected at least 1" % (top_k,))
        if sentence_encoder.dim != index.vectors.shape[1]:
            raise MatchingError(
                "the encoder gives %d-dimensional vectors but the index %s holds %d-dimensional "
                "ones; expected the encoder the index was built with"
                % (sentence_encoder.dim, index.path or "", index.vectors.shape[1]))
        self.encoder = sentence_encoder
        self.index = index
        self.top_k = min(int(top_k), len(index))
        self._vectors = tf.constant(index.vectors, tf.float32)
        spec = tf.TensorSpec([None, None], tf.int32)
        self._match = tf.function(self._forward, input_signature=[
            {name: spec for name in siamese.FEATURE_NAMES}])

    def _forward(self, features):
        queries = self.encoder._forward(features)  # pylint: disable=protected-access
        if self.index.settings.get("similarity") == "cosine" and not self.encoder.normalize:
            queries = tf.math.l2_normalize(queries, axis=-1, epsilon=1e-12)
        scores = tf.matmul(queries, self._vectors, transpose_b=True)
        return tf.math.top_k(scores, self.top_k)

    def __call__(self, queries):
        """Per query, the `top_k` best ``(id, question, score)``, best first."""
        values, indices = self._match(self.encoder.features(list(queries)))
        values, indices = values.numpy(), indices.numpy()
        return [[(self.index.ids[i], self.index.questions[i], float(v))
                 for v, i in zip(row_values, row_indices)]
                for row_values, row_indices in zip(values, indices)]


@dataclasses.dataclass
class IndexSettings:
    """An index to build (`load_sentence_encoder`, `build_index`); `run/build_index.py`'s flags."""

    input_file: Optional[str] = option(None, "Stored questions: id<TAB>question per line.")
    output_file: Optional[str] = option(None, "The index file to write (.npz).")
    model_family: str = option(
        registry.DEFAULT_FAMILY, "The encoder's model family (bert, albert, ...).")
    bert_config_file: Optional[str] = option(
        None, "bert_config.json (Google) or config.json (HF).")
    vocab_file: Optional[str] = option(None, "The vocabulary file of the model.")
    init_checkpoint: Optional[str] = option(
        None, "The bi-encoder's weights: HF safetensors, Google TF1, or a "
        "run_siamese.py output dir.")
    do_lower_case: bool = option(True, "Lower-case the input (uncased models).")
    max_seq_length: int = option(64, "Word pieces per question with [CLS] and [SEP].")
    pooling: str = option("mean", "Sentence vector pooling.", choices=siamese.POOLINGS)
    similarity: str = option(
        "cosine", "cosine stores L2-normalised vectors; dot stores them as they are.",
        choices=siamese.SIMILARITIES)
    batch_size: int = option(64, "Questions encoded per call.")

    def recorded(self):
        """The model settings the index records (`build_index`'s `settings`)."""
        return {"model_family": self.model_family, "bert_config_file": self.bert_config_file,
                "vocab_file": self.vocab_file, "init_checkpoint": self.init_checkpoint,
                "do_lower_case": self.do_lower_case}


@dataclasses.dataclass
class MatchSettings:
    """Queries against an index (`Matcher`); `run/match.py`'s flags.

    The model fields left None are the index's (`encoder_setting`).
    """

    index_file: Optional[str] = option(None, "The index written by build_index.py.")
    query: Optional[str] = option(None, "One query.")
    query_file: Optional[str] = option(None, "Queries, one per line (blank lines skipped).")
    top_k: int = option(5, "Stored questions to return per query.")
    output_file: Optional[str] = option(None, "Optional JSON lines output.")
    model_family: Optional[str] = option(None, "Default: the index's.")
    bert_config_file: Optional[str] = option(None, "Default: the index's.")
    vocab_file: Optional[str] = option(None, "Default: the index's.")
    init_checkpoint: Optional[str] = option(None, "Default: the index's.")

    def encoder_setting(self, name, index):
        """The model field `name`, or the `MatchIndex`'s recorded value when it is None."""
        value = getattr(self, name)
        return value if value is not None else index.settings.get(name)


def build_index(sentence_encoder, ids, questions, path, settings=None, batch_size=64,
                similarity="cosine"):
    """Encodes `questions` and writes the index file `path` atomically; returns a `MatchIndex`.

    Args:
        sentence_encoder: a `SentenceEncoder` (normalising iff `similarity`
            is cosine).
        ids, questions: parallel lists of strings.
        settings: extra JSON-able settings to record (model files, family,
            ...).
        similarity: "cosine" or "dot".
    """
    if similarity not in siamese.SIMILARITIES:
        raise MatchingError("--similarity=%s: expected one of %s"
                            % (similarity, ", ".join(siamese.SIMILARITIES)))
    if len(ids) != len(questions):
        raise MatchingError("%d ids but %d questions" % (len(ids), len(questions)))
    if sentence_encoder.normalize != (similarity == "cosine"):
        raise MatchingError("cosine similarity needs normalised vectors and dot raw ones; "
                            "the encoder has normalize=%s" % sentence_encoder.normalize)
    vectors = sentence_encoder.encode(questions, batch_size=batch_size)
    record = dict(settings or {})
    record.update({
        "format": INDEX_FORMAT, "pooling": sentence_encoder.pooling, "similarity": similarity,
        "normalized": sentence_encoder.normalize, "dim": int(vectors.shape[1]),
        "max_seq_length": sentence_encoder.max_seq_length,
        "do_lower_case": bool(getattr(sentence_encoder.tokenizer, "do_lower_case",
                                      record.get("do_lower_case", True))),
        "count": len(ids), "probe_text": PROBE_TEXT,
        "probe_vector": [float(x) for x in sentence_encoder.encode([PROBE_TEXT])[0]],
    })
    with atomic.atomic_output(path, "wb") as f:
        np.savez(f, vectors=vectors.astype(np.float32), ids=np.array(ids, dtype=str),
                 questions=np.array(questions, dtype=str),
                 settings=np.array(json.dumps(record, sort_keys=True)))
    return MatchIndex(vectors, ids, questions, record, path)


def load_index(path):
    """The `MatchIndex` of a file written by `build_index`."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise MatchingError("--index_file=%s: no such file; build it with run/build_index.py"
                            % path)
    if not zipfile.is_zipfile(path):
        raise MatchingError("%s: not an index written by build_index.py (not a NumPy .npz "
                            "file)" % path)
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = [name for name in _REQUIRED if name not in data.files]
            if missing:
                raise MatchingError("%s: not an index written by build_index.py (no %s)"
                                    % (path, ", ".join(missing)))
            vectors, ids, questions = data["vectors"], data["ids"], data["questions"]
            settings = json.loads(str(data["settings"]))
    except MatchingError:
        raise
    except (OSError, ValueError, EOFError) as e:
        raise MatchingError("%s: not an index written by build_index.py (%s)"
                            % (path, str(e).splitlines()[0] if str(e) else type(e).__name__)
                            ) from None
    if settings.get("format") != INDEX_FORMAT:
        raise MatchingError("%s: index format %r; expected %r (rebuild it with "
                            "run/build_index.py)" % (path, settings.get("format"), INDEX_FORMAT))
    if vectors.ndim != 2 or vectors.shape[0] != len(ids) or len(ids) != len(questions):
        raise MatchingError("%s: %s vectors for %d ids and %d questions; the file is damaged"
                            % (path, "x".join(map(str, vectors.shape)), len(ids),
                               len(questions)))
    return MatchIndex(vectors, ids, questions, settings, path)


def check_encoder(index, sentence_encoder, tolerance=1e-3):
    """Raises `MatchingError` unless `sentence_encoder` is the encoder `index` was built with."""
    settings = index.settings
    actual = {"pooling": sentence_encoder.pooling, "dim": sentence_encoder.dim,
              "do_lower_case": bool(getattr(sentence_encoder.tokenizer, "do_lower_case", True)),
              "similarity": "cosine" if sentence_encoder.normalize else "dot"}
    for name in _COMPARED:
        if name in settings and settings[name] != actual[name]:
            raise MatchingError(
                "the index %s was built with %s=%s but the encoder has %s=%s; expected the "
                "same model and settings as build_index.py used"
                % (index.path, name, settings[name], name, actual[name]))
    probe = settings.get("probe_vector")
    if probe is not None:
        vector = sentence_encoder.encode([settings.get("probe_text", PROBE_TEXT)])[0]
        difference = float(np.max(np.abs(vector - np.asarray(probe, np.float32))))
        if difference > tolerance:
            raise MatchingError(
                "the index %s was built with another encoder: the probe sentence's vector "
                "differs by %.3g (tolerance %g); expected the checkpoint it was built with (%s)"
                % (index.path, difference, tolerance,
                   settings.get("init_checkpoint") or "random weights"))


def load_sentence_encoder(bert_config_file, vocab_file, init_checkpoint=None,
                          do_lower_case=True, pooling="mean", similarity="cosine",
                          max_seq_length=128, model_family=registry.DEFAULT_FAMILY,
                          precision="fp32"):
    """A `SentenceEncoder` from model files (what build_index.py and match.py load).

    `init_checkpoint`: Google TF1, HF safetensors or this project's own (e.g. a
    `run_siamese.py` output dir); None keeps random weights (tests).
    """
    from data import tokenization  # pylint: disable=import-outside-toplevel
    if similarity not in siamese.SIMILARITIES:
        raise MatchingError("--similarity=%s: expected one of %s"
                            % (similarity, ", ".join(siamese.SIMILARITIES)))
    for flag, path in (("--bert_config_file", bert_config_file), ("--vocab_file", vocab_file)):
        if not path or not os.path.exists(path):
            raise MatchingError("%s=%s: no such file" % (flag, path))
    try:
        family = registry.families.get(model_family)
    except registry.RegistryError as e:
        raise MatchingError("--model_family: %s" % e) from None
    config = family.load_config(bert_config_file)
    if max_seq_length > getattr(config, "max_position_embeddings", max_seq_length):
        raise MatchingError("--max_seq_length=%d exceeds max_position_embeddings=%d of %s"
                            % (max_seq_length, config.max_position_embeddings,
                               bert_config_file))
    tokenization.validate_case_matches_checkpoint(do_lower_case, init_checkpoint)
    encoder, tokenizer = inference.wordpiece_encoder(family, config, vocab_file, do_lower_case,
                                                     init_checkpoint, bert_config_file)
    return SentenceEncoder(encoder, tokenizer, pooling=pooling,
                           normalize=similarity == "cosine", max_seq_length=max_seq_length,
                           precision=precision)

