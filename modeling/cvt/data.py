"""CVT's data: word ids of tagged and plain sentences, TFRecords, the generated demo.

Words are looked up in ELMo's word vocabulary (`data.word_vocab.WordVocabulary`:
``<S> </S> <UNK>`` first; unknown words are ``<UNK>``).
Tagged sentences come from CoNLL files (`data.processors.conll`); a CoNLL word
is looked up whole (lower-cased with `do_lower_case`). Unlabelled text is one
sentence per line, split into words as ELMo's pipeline does
(`data.tokenization.BasicTokenizer`); blank lines are skipped.

Records (int64, ``[max_seq_length]`` each; words beyond are cut):
    tagged:     word_ids, input_mask, label_ids
    unlabelled: unlabeled_word_ids, unlabeled_input_mask

The demo (`write_demo_data`, `generate_demo_sentences`) is generated text,
original to this project: short sentences from frames, each with one word
of five classes (TIME, PLACE, JOB, ANIMAL and untagged nouns, "O"), 8 words
a class. The labelled sentences use only half of each class's words
("seen"); the unlabelled text uses all of them, in frames that tell their
class; the held-out dev and test sentences put all of them in those frames
or in "neutral" frames that fit any noun ("nobody mentioned the fox
again"), where only what the tagger knows of the word itself tells its tag.
A labelled-only tagger has never seen the unseen words (their embeddings
stay random); CVT learns them from the unlabelled text: on an unlabelled
sentence the primary module tags the unseen word from its context, and the
views that include the word (forward, backward) learn to agree, training
the word's embedding.

This replaced a first demo that tagged the bundled corpus
(data/sample/sample_en.txt) with a small lexicon: there the contexts did
not tell the classes apart ("in the afternoon", "in the village"), so the
unlabelled text had nothing to teach and CVT did not beat the labelled-only
tagger (test F1 0.51 / 0.53 against 0.60 / 0.56, seeds 1 / 2).
"""

import collections
import os
import random

import tensorflow as tf

from data import atomic
from data import input_pipeline
from data import tokenization
from data.processors import conll
from data.processors.base import DataError
from data import word_vocab as vocabulary

__all__ = ["DEMO_CLASSES", "generate_demo_sentences", "read_unlabeled", "tagged_input_fn",
           "unlabeled_input_fn", "word_ids_of", "write_demo_data", "write_tagged_records",
           "write_unlabeled_records"]



def word_ids_of(words, vocab, max_seq_length, do_lower_case=True):
    """(ids, mask) padded to `max_seq_length` (words beyond are cut)."""
    words = [w.lower() if do_lower_case else w for w in words][:max_seq_length]
    ids = vocab.ids(words)
    padding = max_seq_length - len(ids)
    return ids + [0] * padding, [1] * len(ids) + [0] * padding


def _write_records(path, rows):
    outputs = atomic.TemporaryOutputs([path])
    try:
        with tf.io.TFRecordWriter(outputs.temporaries[0]) as writer:
            for row in rows:
                writer.write(tf.train.Example(features=tf.train.Features(feature={
                    name: tf.train.Feature(int64_list=tf.train.Int64List(value=values))
                    for name, values in row.items()})).SerializeToString())
        outputs.commit()
    finally:
        outputs.discard()


def write_tagged_records(sentences, label_list, vocab, max_seq_length, path,
                         do_lower_case=True, pad_to_multiple=1):
    """Writes tagged sentences (`conll.TaggedSentence`); padding rows fill the last batch."""
    conll.check_known_tags(sentences, label_list)
    label_map = {label: i for i, label in enumerate(label_list)}
    rows = []
    for sentence in sentences:
        ids, mask = word_ids_of(sentence.words, vocab, max_seq_length, do_lower_case)
        labels = [label_map[t] for t in sentence.tags][:max_seq_length]
        rows.append({"word_ids": ids, "input_mask": mask,
                     "label_ids": labels + [0] * (max_seq_length - len(labels))})
    while len(rows) % pad_to_multiple:
        rows.append({name: [0] * max_seq_length
                     for name in ("word_ids", "input_mask", "label_ids")})
    _write_records(path, rows)


def read_unlabeled(path, do_lower_case=True):
    """Word lists of a plain text file (one sentence per line; blank lines skipped)."""
    tokenizer = tokenization.BasicTokenizer(do_lower_case)
    sentences = []
    try:
        with tf.io.gfile.GFile(path, "rb") as f:
            data = f.read()
    except tf.errors.NotFoundError:
        raise DataError("--unlabeled_file=%s: no such file" % path) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise DataError("%s:%d: not valid UTF-8 (expected plain text, one sentence per line)"
                        % (path, line)) from None
    for line in text.splitlines():
        words = tokenizer.tokenize(line)
        if words:
            sentences.append(words)
    return sentences


def write_unlabeled_records(sentences, vocab, max_seq_length, path, do_lower_case=True):
    rows = []
    for words in sentences:
        ids, mask = word_ids_of(words, vocab, max_seq_length, do_lower_case)
        rows.append({"unlabeled_word_ids": ids, "unlabeled_input_mask": mask})
    _write_records(path, rows)


def _spec(names, max_seq_length):
    return {name: tf.io.FixedLenFeature([max_seq_length], tf.int64) for name in names}


def tagged_input_fn(path, max_seq_length, batch_size, is_training, seed=None):
    spec = _spec(("word_ids", "input_mask", "label_ids"), max_seq_length)

    def input_fn(input_context=None):
        return input_pipeline.tfrecord_dataset(path, spec, batch_size, is_training,
                                               input_context=input_context, seed=seed,
                                               drop_remainder=is_training)

    return input_fn


def unlabeled_input_fn(tagged_fn, unlabeled_path, max_seq_length, unlabeled_batch_size,
                       seed=None, start_batch=0, rampup_batches=0):
    """Each batch of `tagged_fn` (training) with an unlabelled batch added to its dict.

    Batch i (counted in this input pipeline, from 0) also carries
    ``unlabeled_weight_scale`` ([batch] float32, one value): 0 before
    `start_batch`, then rising linearly to 1 over `rampup_batches` batches
    (the cross-view loss is multiplied by it; see `CvtTagger`).
    """
    spec = _spec(("unlabeled_word_ids", "unlabeled_input_mask"), max_seq_length)
    start, ramp = float(start_batch), float(rampup_batches)

    def add(i, a, b):
        step = tf.cast(i, tf.float32)
        if ramp > 0:
            scale = tf.clip_by_value((step - start + 1.0) / ramp, 0.0, 1.0)
        else:
            scale = tf.cast(step >= start, tf.float32)
        features = {**a, **b}
        features["unlabeled_weight_scale"] = tf.fill(
            tf.shape(b["unlabeled_input_mask"])[:1], scale)
        return features

    def input_fn(input_context=None):
        tagged = tagged_fn(input_context)
        plain = input_pipeline.tfrecord_dataset(
            unlabeled_path, spec, unlabeled_batch_size, True, input_context=input_context,
            seed=None if seed is None else seed + 1, drop_remainder=True)
        return tf.data.Dataset.zip((tagged, plain)).enumerate().map(
            lambda i, ab: add(i, *ab))

    return input_fn


# ------------------------------------------------------------------ the demo
#
# Original text of this project: sentence frames ("{}" is the word to tag,
# "{p}" a subject) and five word classes -- four entity types and "O", nouns
# of no type -- each split into words the labelled sentences use ("seen")
# and words they never use ("unseen").

DEMO_CLASSES = {
    "TIME": (("monday", "tuesday", "friday", "sunday"),
             ("wednesday", "thursday", "saturday", "weekend")),
    "PLACE": (("village", "harbour", "station", "library"),
              ("town", "market", "castle", "bridge")),
    "JOB": (("baker", "doctor", "teacher", "farmer"),
            ("nurse", "driver", "painter", "soldier")),
    "ANIMAL": (("dog", "cat", "horse", "goat"),
               ("sheep", "fox", "rabbit", "cow")),
    "O": (("box", "song", "letter", "idea"),
          ("plan", "picture", "story", "question")),
}
DEMO_SUBJECTS = ("she", "he", "we", "they", "my sister", "our friend", "the old man", "i")
# Frames whose context tells the word's class.
DEMO_FRAMES = {
    "TIME": ("{p} met them on {} afternoon .", "the shop is closed every {} .",
             "{p} will see you next {} .", "last {} it rained all day .",
             "{p} moved the meeting to {} morning .", "{p} always swam on {} evenings ."),
    "PLACE": ("{p} walked to the {} together .", "{p} lived near the old {} .",
              "the road to the {} was long .", "{p} arrived at the {} before dark .",
              "there is a church in the {} .", "{p} left the {} at dawn ."),
    "JOB": ("{p} worked as a {} there .", "my uncle was a {} for years .",
            "{p} wanted to become a {} .", "{p} asked the {} for advice .",
            "{p} trained as a {} last year .", "the {} earned good money ."),
    "ANIMAL": ("the {} barked all night .", "{p} fed the {} some grass .",
               "a {} ran across the field .", "the {} slept in the barn .",
               "{p} heard the {} bark .", "{p} chased the {} away ."),
    "O": ("{p} put the {} in a drawer .", "{p} read the {} aloud .",
          "{p} wrote down the {} .", "{p} threw the {} away after reading it .",
          "the {} was written in pencil .", "{p} copied the {} twice ."),
}
# Frames that fit any noun: there only the word itself tells its class.
DEMO_NEUTRAL_FRAMES = ("{p} wrote the word {} on the board .", "nobody mentioned the {} again .",
                       "{p} kept thinking about the {} .", "{p} said {} slowly .",
                       "the {} was in the book .", "{p} drew the {} for us .")
DEMO_TYPES = tuple(sorted(DEMO_CLASSES))


def _demo_sentence(frame, word, type_, rng):
    text = frame.replace("{p}", rng.choice(DEMO_SUBJECTS))
    words = [word if w == "{}" else w for w in text.split()]
    tags = [("O" if type_ == "O" else "B-" + type_) if w == "{}" else "O"
            for w in text.split()]
    return words, tags


def generate_demo_sentences(num_labeled=40, num_unlabeled=600, num_dev=120, num_test=120,
                            seed=0):
    """The demo's sentences: {"train", "dev", "test": [(words, tags)], "unlabeled": [words]}.

    Each sentence has one word of a class drawn uniformly (the four entity
    types and "O"), in a frame:
        train      a seen word; its class's frame (3 in 5) or a neutral one.
        unlabeled  any word of the class, seen or unseen; its class's frame.
        dev, test  any word of the class, seen or unseen; its class's frame
                   (1 in 2) or a neutral one, where only a word the tagger
                   has learned tells the tag.
    So tagging an unseen word in a neutral frame needs what the unlabelled
    text says about that word. No dev or test sentence equals a training
    sentence, labelled or not.
    """
    rng = random.Random(seed)

    def sentence(words_of, neutral_share):
        type_ = rng.choice(DEMO_TYPES)
        frames = DEMO_NEUTRAL_FRAMES if rng.random() < neutral_share else DEMO_FRAMES[type_]
        return _demo_sentence(rng.choice(frames), rng.choice(words_of(type_)), type_, rng)

    every_word = lambda type_: DEMO_CLASSES[type_][0] + DEMO_CLASSES[type_][1]
    splits = {name: [] for name in ("dev", "test", "train", "unlabeled")}
    taken = set()
    for name, count, words_of, neutral_share in (
            ("dev", num_dev, every_word, 0.5), ("test", num_test, every_word, 0.5),
            ("train", num_labeled, lambda type_: DEMO_CLASSES[type_][0], 0.4),
            ("unlabeled", num_unlabeled, every_word, 0.0)):
        while len(splits[name]) < count:
            words, tags = sentence(words_of, neutral_share)
            key = " ".join(words)
            if name in ("dev", "test"):
                if key in taken:
                    continue
                taken.add(key)
            elif key in taken:
                continue
            splits[name].append(words if name == "unlabeled" else (words, tags))
    return splits


def _write_conll(path, sentences):
    lines = []
    for words, tags in sentences:
        lines.extend("%s %s\n" % (w, t) for w, t in zip(words, tags))
        lines.append("\n")
    atomic.write_text(path, "".join(lines))


def write_demo_data(directory, num_labeled=40, seed=0):
    """Writes the demo's train.txt, dev.txt, test.txt (CoNLL), unlabeled.txt and vocab.txt.

    The sentences are `generate_demo_sentences`'s; vocab.txt holds every word
    of the four files (ELMo's format: <S> </S> <UNK> first), so no word of
    the demo is <UNK>. Returns a dict with the five paths and ``seen_words``
    / ``unseen_words`` (the classes' two halves).
    """
    splits = generate_demo_sentences(num_labeled=num_labeled, seed=seed)
    tf.io.gfile.makedirs(directory)
    paths = {name: os.path.join(directory, name + ".txt")
             for name in ("train", "dev", "test", "unlabeled", "vocab")}
    for name in ("train", "dev", "test"):
        _write_conll(paths[name], splits[name])
    atomic.write_text(paths["unlabeled"],
                      "".join(" ".join(words) + "\n" for words in splits["unlabeled"]))
    counts = collections.Counter(
        w for name in ("train", "dev", "test") for words, _ in splits[name] for w in words)
    counts.update(w for words in splits["unlabeled"] for w in words)
    vocabulary.write_vocabulary(
        list(vocabulary.SPECIAL_WORDS) + sorted(counts, key=lambda w: (-counts[w], w)),
        paths["vocab"])
    paths["seen_words"] = sorted(w for seen, _ in DEMO_CLASSES.values() for w in seen)
    paths["unseen_words"] = sorted(w for _, unseen in DEMO_CLASSES.values() for w in unseen)
    return paths
