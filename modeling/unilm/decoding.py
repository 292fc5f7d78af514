"""Sequence-to-sequence decoding with a UNILM model: greedy and beam search.

UNILM generates the way it was fine-tuned: the input is
`[CLS] source [SEP] y_1 ... y_{t-1} [MASK]` under the seq2seq attention mask
(`modeling.unilm.masks`), the source with the seq2seq source segment id and
the generated tokens and the [MASK] with the target's (4 and 5 with the
paper's ids), and the masked-LM head's distribution at the
[MASK] is the next token's. The chosen token replaces the [MASK], a new
[MASK] is appended, and decoding stops at [SEP] (the target's end, which
fine-tuning taught the model to predict) or after `max_new_tokens`.

Every step runs the whole sequence again (no key/value cache: under the
seq2seq mask a target token's representation depends only on the source and
its own prefix, so a cache would give the same numbers; the models this
project trains on a CPU are small enough not to need one). Rows are padded
to one length per call so that one traced function serves every step.

    decoder = Seq2SeqDecoder(pretrainer, vocab)      # the "unilm" recipe's model
    ids, score = decoder.greedy(source_ids, max_new_tokens=20)
    ids, score = decoder.beam_search(source_ids, beam_size=4, max_new_tokens=20)

Scores are sums of natural-log probabilities of the generated tokens (the
final [SEP] included when it was generated); beam search ranks finished
hypotheses by `score / length ** length_penalty` (0: raw sums, so beam 1
is greedy search exactly).

`DECODER` is what `run/generate.py --recipe=unilm` runs (registered in
`modeling.registry.decoders` by `modeling.unilm`).
"""

import numpy as np
import tensorflow as tf

from data import tokenization
from modeling import registry
from modeling.unilm import masks

__all__ = ["DECODER", "DecoderLoadError", "Seq2SeqDecoder", "detokenize", "generate_records",
           "load_decoder"]


class Seq2SeqDecoder:
    """Greedy and beam-search decoding (see the module docstring).

    Args:
        model: a pretrainer with a BERT-style `encoder` and a "masked_lm"
            objective (the "unilm" / "unilm_seq2seq" recipes' model).
        vocab: token -> id (for [CLS], [SEP], [MASK]).
        max_seq_length: longest input (source, generated tokens and the
            three special tokens); default the encoder's positions.
        segment_ids: "paper" (source 4, target 5) or "two" (0, 1): the
            `unilm_segment_ids` the model was fine-tuned with.
    """

    def __init__(self, model, vocab, max_seq_length=None, segment_ids="paper"):
        self.model = model
        # The seq2seq mode's segment ids, as fine-tuning gave them: the source
        # ([CLS] source [SEP]) and every generated token and [MASK] the target.
        self.source_id, self.target_id = masks.SEGMENT_IDS[
            masks.check_segment_ids(segment_ids, "segment_ids")][masks.SEQ2SEQ]
        self.encoder = model.encoder
        self.head = model.get_objective("masked_lm")
        self.cls_id = vocab[tokenization.CLS_TOKEN]
        self.sep_id = vocab[tokenization.SEP_TOKEN]
        self.mask_id = vocab[tokenization.MASK_TOKEN]
        self.max_seq_length = max_seq_length or self.encoder.max_position_embeddings
        self._step = tf.function(self._log_probs, reduce_retracing=True)

    def _log_probs(self, input_ids, segment_ids, input_mask, positions):
        attention = masks.attention_mask(masks.SEQ2SEQ, segment_ids, input_mask,
                                         target_id=self.target_id)
        outputs = self.encoder({"input_ids": input_ids, "segment_ids": segment_ids,
                                "attention_mask": attention}, training=False)
        logits = self.head.head(outputs["sequence_output"], positions[:, tf.newaxis],
                                self.encoder.embedding_table)[:, 0]
        return tf.nn.log_softmax(tf.cast(logits, tf.float32), axis=-1)

    def _budget(self, source_ids, max_new_tokens):
        if max_new_tokens < 1:
            raise ValueError("max_new_tokens must be >= 1, got %d" % max_new_tokens)
        room = self.max_seq_length - 3 - max_new_tokens
        if room < 1:
            raise ValueError("max_new_tokens=%d leaves no room for a source in %d positions"
                             % (max_new_tokens, self.max_seq_length))
        # A source too long for the budget keeps its beginning.
        return list(source_ids)[:room]

    def next_log_probs(self, source_ids, prefixes):
        """`[len(prefixes), vocab]` log-probabilities of the token after each prefix."""
        length = len(source_ids) + 2 + max(len(p) for p in prefixes) + 1
        rows = len(prefixes)
        ids = np.zeros([rows, length], np.int32)
        segments = np.zeros([rows, length], np.int32)
        mask = np.zeros([rows, length], np.int32)
        positions = np.zeros([rows], np.int32)
        head = [self.cls_id] + list(source_ids) + [self.sep_id]
        for r, prefix in enumerate(prefixes):
            row = head + list(prefix) + [self.mask_id]
            ids[r, :len(row)] = row
            segments[r, :len(head)] = self.source_id
            segments[r, len(head):len(row)] = self.target_id
            mask[r, :len(row)] = 1
            positions[r] = len(row) - 1
        return self._step(tf.constant(ids), tf.constant(segments), tf.constant(mask),
                          tf.constant(positions)).numpy()

    def greedy(self, source_ids, max_new_tokens=32):
        """`(generated ids without the final [SEP], score)`."""
        source_ids = self._budget(source_ids, max_new_tokens)
        prefix, score = [], 0.0
        for _ in range(max_new_tokens):
            log_probs = self.next_log_probs(source_ids, [prefix])[0]
            token = int(np.argmax(log_probs))
            score += float(log_probs[token])
            if token == self.sep_id:
                break
            prefix.append(token)
        return prefix, score

    def beam_search(self, source_ids, beam_size=4, max_new_tokens=32, length_penalty=0.0):
        """`(best generated ids without the final [SEP], its score)`.

        Each step extends every unfinished prefix by every token and keeps
        the `beam_size` best candidates overall; those ending in [SEP] are
        finished, the others stay in the beam (so with `beam_size` 1 this is
        greedy search exactly). Stops when no prefix is left unfinished, when
        the best finished hypothesis scores at least as well as every
        unfinished one can (with `length_penalty` 0, adding tokens only lowers
        a score), or at `max_new_tokens`, where the unfinished hypotheses
        count as finished.
        """
        if beam_size < 1:
            raise ValueError("beam_size must be >= 1, got %d" % beam_size)
        source_ids = self._budget(source_ids, max_new_tokens)

        def normalised(hypothesis):
            tokens, score, ended = hypothesis
            if not length_penalty:
                return score
            return score / (max(len(tokens) + int(ended), 1) ** length_penalty)

        alive = [([], 0.0)]
        finished = []  # (tokens, score, ended with [SEP])
        for _ in range(max_new_tokens):
            log_probs = self.next_log_probs(source_ids, [p for p, _ in alive])
            candidates = []
            for (prefix, score), row in zip(alive, log_probs):
                top = np.argsort(-row, kind="stable")[:beam_size]
                candidates.extend((score + float(row[t]), prefix, int(t)) for t in top)
            candidates.sort(key=lambda c: -c[0])
            alive = []
            for score, prefix, token in candidates[:beam_size]:
                if token == self.sep_id:
                    finished.append((prefix, score, True))
                else:
                    alive.append((prefix + [token], score))
            if not alive:
                break
            if finished and not length_penalty and (
                    max(h[1] for h in finished) >= max(s for _, s in alive)):
                break
        else:
            finished.extend((prefix, score, False) for prefix, score in alive)
        best = max(finished, key=normalised)
        return best[0], best[1]

    def score(self, source_ids, target_ids, with_end=True):
        """Sum of log-probabilities of `target_ids` (then [SEP] when `with_end`)."""
        source_ids = list(source_ids)
        tokens = list(target_ids) + ([self.sep_id] if with_end else [])
        prefixes = [tokens[:t] for t in range(len(tokens))]
        log_probs = self.next_log_probs(source_ids, prefixes)
        return float(sum(log_probs[t, token] for t, token in enumerate(tokens)))


# ------------------------------------------------------------------ files


class DecoderLoadError(ValueError):
    """A file given to `load_decoder` is missing or does not fit; `option` names it."""

    def __init__(self, option, message):
        self.option = option
        super().__init__(message)


def load_decoder(config_file, init_checkpoint, vocab_file, do_lower_case=True,
                 segment_ids=None):
    """`(Seq2SeqDecoder, FullTokenizer)` of a UNILM (or BERT) checkpoint.

    Args:
        config_file: the `bert_config.json` run_pretraining.py wrote (or
            Google's / HF's).
        init_checkpoint: this project's checkpoint folder or `ckpt-N`
            prefix, Google's `bert_model.ckpt`, or HF safetensors; its
            masked-LM head is required (it predicts the tokens).
        vocab_file: WordPiece `vocab.txt`.
        segment_ids: the `unilm_segment_ids` of fine-tuning ("paper" or
            "two"); None: "paper" when the config has the 6 token types its
            ids need, else "two" (a config of BERT's 2 types can only have
            been fine-tuned with those).
    """
    from modeling import checkpoints  # pylint: disable=g-import-not-at-top
    from modeling import recipes  # pylint: disable=g-import-not-at-top

    recipe = recipes.load_recipe("unilm")
    try:
        config = recipe.load_config(config_file)
    except (ValueError, OSError) as e:
        raise DecoderLoadError("config_file", str(e)) from e
    try:
        tokenizer = tokenization.FullTokenizer(vocab_file, do_lower_case)
    except (ValueError, OSError) as e:
        raise DecoderLoadError("vocab_file", str(e)) from e
    missing = [t for t in (tokenization.CLS_TOKEN, tokenization.SEP_TOKEN,
                           tokenization.MASK_TOKEN) if t not in tokenizer.vocab]
    if missing:
        raise DecoderLoadError("vocab_file", "%s lacks %s" % (vocab_file, ", ".join(missing)))
    if len(tokenizer.vocab) != config.vocab_size:
        raise DecoderLoadError("vocab_file", "%s has %d tokens but the model (%s) has "
                               "vocab_size %d" % (vocab_file, len(tokenizer.vocab),
                                                  config_file, config.vocab_size))
    if segment_ids is None:
        segment_ids = ("paper" if config.type_vocab_size >= masks.min_type_vocab_size("paper")
                       else "two")
    try:
        masks.check_type_vocab_size(config, masks.check_segment_ids(segment_ids,
                                                                    "segment_ids"))
    except ValueError as e:
        raise DecoderLoadError("config_file", "%s: %s" % (config_file, e)) from e
    model = recipe.build_model(config)
    try:
        checkpoints.init_from_checkpoint(model, init_checkpoint)
    except (ValueError, OSError, TypeError) as e:
        raise DecoderLoadError("init_checkpoint", str(e)) from e
    return Seq2SeqDecoder(model, tokenizer.vocab, segment_ids=segment_ids), tokenizer


def detokenize(tokenizer, ids):
    """WordPiece ids -> text (pieces joined, `##` continuations glued, CJK unspaced)."""
    text = ""
    for token in tokenizer.convert_ids_to_tokens(list(ids)):
        if token.startswith("##"):
            text += token[2:]
        elif text and not (tokenization.is_cjk_char(token[0]) and
                           tokenization.is_cjk_char(text[-1])):
            text += " " + token
        else:
            text += token
    return text


def generate_records(decoder, tokenizer, sources, decoding="greedy", beam_size=4,
                     max_new_tokens=32, length_penalty=0.0):
    """One dict per source: `prompt`, `prompt_ids`, `generated_ids`, `text`, `score`."""
    records = []
    for source in sources:
        source_ids = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(source))
        if decoding == "greedy":
            ids, score = decoder.greedy(source_ids, max_new_tokens)
        elif decoding == "beam":
            ids, score = decoder.beam_search(source_ids, beam_size, max_new_tokens,
                                             length_penalty)
        else:
            raise DecoderLoadError("decoding", "UNILM decodes with greedy or beam, not %r"
                                   % decoding)
        records.append({"prompt": source, "prompt_ids": source_ids, "generated_ids": ids,
                        "text": detokenize(tokenizer, ids), "score": score})
    return records


def _check_settings(settings):
    if settings.decoding not in ("greedy", "beam"):
        raise ValueError("--decoding=%s: --recipe=unilm decodes with greedy or beam"
                         % settings.decoding)
    if settings.beam_size < 1:
        raise ValueError("--beam_size=%d: expected a positive integer" % settings.beam_size)
    if settings.max_new_tokens < 1:
        raise ValueError("--max_new_tokens=%d: expected a positive integer"
                         % settings.max_new_tokens)


def _generate_from_files(settings, prompts):
    try:
        decoder, tokenizer = load_decoder(settings.config_file, settings.init_checkpoint,
                                          settings.vocab_file, settings.do_lower_case)
        return generate_records(decoder, tokenizer, prompts, settings.decoding,
                                settings.beam_size, settings.max_new_tokens,
                                settings.length_penalty)
    except DecoderLoadError as e:
        raise ValueError("--%s: %s" % (e.option, e)) from None
    except ValueError as e:
        raise ValueError(str(e)) from None


# run/generate.py --recipe=unilm: a UNILM seq2seq model writes the target of each
# source, greedily or by beam search; WordPiece vocab.txt, bert_config.json.
DECODER = registry.Decoder(
    name="unilm",
    required_flags=("init_checkpoint", "config_file", "vocab_file", "output_file"),
    input_flags=("init_checkpoint", "vocab_file", "config_file"),
    check=_check_settings, generate=_generate_from_files)
