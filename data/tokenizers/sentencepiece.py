"""SentencePiece tokenization (XLNet, ALBERT) in the TensorFlow graph, through tensorflow-text.

A SentencePiece model (`spiece.model`, a serialized `ModelProto`) holds its
own normaliser and pieces, so tokenization is a single op with no
pre-tokenization: `SentencePieceTokenizer(model_file).tokenize(texts)`
returns a `tf.RaggedTensor` of ids, the same ids as the `sentencepiece`
Python processor's `encode` (tested on English and Chinese text), and runs
inside `tf.data` and SavedModels.

XLNet's special symbols live in the model as control symbols (never produced
from text): `<cls>`, `<sep>`, `<pad>`, `<mask>`, `<eod>`; `<eop>` is a
user-defined symbol (written in text, it becomes that piece). A model
learned by `run/create_vocab.py --model=sentencepiece`
(`data.vocab_learning.learn_sentencepiece`) puts them where XLNet's
`spiece.model` has them:

    0 <unk>  1 <s>  2 </s>  3 <cls>  4 <sep>  5 <pad>  6 <mask>  7 <eod>  8 <eop>

`special_ids()` reads the ids from the model, so released models with other
layouts work too.
"""

import os

import tensorflow as tf

__all__ = ["SPECIAL_SYMBOLS", "SentencePieceError", "SentencePieceTokenizer",
           "load_model_proto"]

# XLNet's control symbols after <unk> <s> </s>, and its user-defined <eop>.
CONTROL_SYMBOLS = ("<cls>", "<sep>", "<pad>", "<mask>", "<eod>")
USER_SYMBOLS = ("<eop>",)
SPECIAL_SYMBOLS = ("<unk>", "<s>", "</s>") + CONTROL_SYMBOLS + USER_SYMBOLS


class SentencePieceError(ValueError):
    """A SentencePiece model file is missing or is not a model."""


def load_model_proto(model_file):
    """The bytes of `model_file`, checked to be a SentencePiece model (one-line errors)."""
    model_file = os.fspath(model_file)
    if not tf.io.gfile.exists(model_file):
        raise SentencePieceError("SentencePiece model file %s: no such file" % model_file)
    with tf.io.gfile.GFile(model_file, "rb") as f:
        proto = f.read()
    try:
        import sentencepiece  # pylint: disable=g-import-not-at-top
        processor = sentencepiece.SentencePieceProcessor(model_proto=proto)
    except Exception as e:  # sentencepiece raises RuntimeError/OSError variants
        raise SentencePieceError("%s is not a SentencePiece model (%s); expected a file "
                                 "written by run/create_vocab.py --model=sentencepiece or a "
                                 "released spiece.model" % (model_file, str(e).splitlines()[0]
                                                            if str(e) else type(e).__name__))
    return proto, processor


class SentencePieceTokenizer:
    """Text -> SentencePiece ids, in the graph (tensorflow-text) and in Python.

    Args:
        model_file: path of a SentencePiece model.

    `tokenize(texts)`: string tensor `[batch]` (or a scalar) -> int32
    `RaggedTensor` `[batch, (tokens)]`, in the graph. `encode(text)`: the
    same ids through the Python processor (a list). `detokenize(ids)`:
    text again.
    """

    def __init__(self, model_file):
        import tensorflow_text as tf_text  # pylint: disable=g-import-not-at-top

        self.model_file = os.fspath(model_file)
        self._proto, self._processor = load_model_proto(self.model_file)
        self._graph = tf_text.SentencepieceTokenizer(model=self._proto, out_type=tf.int32)

    def vocab_size(self):
        return int(self._processor.get_piece_size())

    def piece_to_id(self, piece):
        return int(self._processor.piece_to_id(piece))

    def id_to_piece(self, token_id):
        return self._processor.id_to_piece(int(token_id))

    def special_ids(self):
        """`{symbol: id}` of XLNet's special symbols found in the model."""
        ids = {}
        for symbol in SPECIAL_SYMBOLS:
            token_id = self.piece_to_id(symbol)
            if self.id_to_piece(token_id) == symbol:
                ids[symbol] = token_id
        return ids

    def tokenize(self, texts):
        return self._graph.tokenize(texts)

    def encode(self, text):
        return list(self._processor.encode(text))

    def detokenize(self, ids):
        return self._graph.detokenize(ids)
