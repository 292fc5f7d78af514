"""The contract of a pre-training input pipeline.

A pipeline turns inputs (TFRecord patterns or raw text files, whatever it
reads) into batches of feature dicts for the trainer, and makes the demo
job's inputs from the bundled corpus:

    pipeline = registry.pipelines.get(name)(recipe_data, PipelineOptions(...))
    pipeline.vocab_size()                  size of its vocabulary
    pipeline.demo_inputs(train_texts, eval_texts, work_dir)
                                           -> (train_inputs, eval_inputs)
    pipeline.demo_inputs_from_files(files, work_dir)
                                           the same from its own bundled data
                                           (`demo_data_files`), if it has any
    pipeline.input_fn(inputs, is_training, batch_size)
                                           -> input_fn(input_context=None)
    pipeline.baseline_batches(inputs, max_examples)
                                           -> NumPy feature batches, read once
                                              (for the objectives' baselines)
    pipeline.check_job(job)                refuses run settings it cannot serve
                                           (before anything is written)

`RawTextPipeline` is the base of the pipelines that read the text files
themselves (their demo inputs are the corpus's files as they are),
`WordPipeline` of those whose vocabulary is a word list (`data.word_vocab`).

`recipe_data` holds the recipe file's `data` options (masking strategy,
packing, ...); `PipelineOptions` the run's (vocabulary, lengths, seed).
"""

import dataclasses
import os
from typing import Optional

__all__ = ["Pipeline", "PipelineOptions", "RawTextPipeline", "WordPipeline"]


@dataclasses.dataclass
class PipelineOptions:
    """What a run tells every pipeline (`run_pretraining.py`'s flags)."""

    vocab_file: Optional[str] = None
    merges_file: Optional[str] = None
    do_lower_case: bool = True
    max_seq_length: int = 128
    max_predictions_per_seq: int = 20
    seed: Optional[int] = None


class Pipeline:
    """Base class; see the module docstring."""

    #: The keys a recipe's `data` may hold for this pipeline (None: any).
    data_options = None

    #: Vocabulary files (PipelineOptions fields) the pipeline reads on a user's
    #: data; None: those of `demo_vocab_files`.
    required_vocab_files = None

    #: Vocabulary files of the bundled sample corpus (repository-relative),
    #: used by the demo job when no --vocab_file is given.
    demo_vocab_files = {"vocab_file": "data/sample/vocab.txt"}

    #: Bundled data files (repository-relative) from which the demo job makes
    #: this pipeline's inputs with `demo_inputs_from_files` (e.g. parallel
    #: text that the pipeline splits itself); None: the demo splits the sample
    #: corpus by documents and calls `demo_inputs`.
    demo_data_files = None

    def __init__(self, recipe_data, options):
        self.data = dict(recipe_data or {})
        self.options = options

    def vocab_size(self):
        raise NotImplementedError("%s must implement vocab_size()" % type(self).__name__)

    def demo_inputs(self, train_texts, eval_texts, work_dir):
        """Makes this pipeline's inputs from plain-text training and held-out files."""
        raise NotImplementedError("%s must implement demo_inputs()" % type(self).__name__)

    def demo_inputs_from_files(self, files, work_dir):
        """`(train_inputs, eval_inputs)` made from `demo_data_files` (absolute paths)."""
        raise NotImplementedError("%s must implement demo_inputs_from_files()"
                                  % type(self).__name__)

    def input_fn(self, inputs, is_training, batch_size):
        raise NotImplementedError("%s must implement input_fn()" % type(self).__name__)

    def check_job(self, job):
        """Raises a one-line ValueError for settings of `job` (a `PretrainingJob`) that this
        pipeline's batches cannot serve (e.g. a strategy); any by default."""

    def check_inputs(self, inputs):
        """Raises a clear error when `inputs` or the vocabulary files are missing.

        This default is for pipelines that read raw text: the files must
        hold text (a repeating input over empty files would never yield a
        batch), and a binary file is refused. Pipelines reading other
        formats override it.
        """
        from data import corpus  # pylint: disable=g-import-not-at-top
        files = corpus.expand_file_patterns(inputs)
        self.check_vocab_files()
        with_text = [path for path in files if _holds_text(path)]
        if not with_text:
            raise corpus.CorpusError(
                "%s: no text in %s (every line is blank); expected UTF-8 text, one "
                "sentence per line" % (inputs if isinstance(inputs, str) else ",".join(inputs),
                                       "the file" if len(files) == 1 else
                                       "any of the %d files" % len(files)))

    def check_vocab_files(self):
        """Each vocabulary file this pipeline reads (`required_vocab_files`) is given."""
        required = (self.demo_vocab_files if self.required_vocab_files is None
                    else self.required_vocab_files)
        for name in required:
            path = getattr(self.options, name, None)
            if not path:
                raise ValueError("--%s is required by the recipe's input pipeline (%s)"
                                 % (name, type(self).__name__))
            if not os.path.isfile(path):
                raise FileNotFoundError("--%s=%s: no such file" % (name, path))

    def baseline_batches(self, inputs, max_examples, batch_size=256):
        """Yields NumPy feature dicts of at most `max_examples` examples, in order."""
        dataset = self.input_fn(inputs, is_training=False, batch_size=batch_size)(None)
        seen = 0
        for batch in dataset:
            batch = {k: v.numpy() for k, v in batch.items()}
            size = len(next(iter(batch.values())))
            if seen + size > max_examples:
                batch = {k: v[:max_examples - seen] for k, v in batch.items()}
                size = max_examples - seen
            if size <= 0:
                return
            yield batch
            seen += size
            if seen >= max_examples:
                return


class RawTextPipeline(Pipeline):
    """A pipeline that reads raw text files: the demo's inputs are the texts as they are."""

    def demo_inputs(self, train_texts, eval_texts, work_dir):
        del work_dir  # nothing to build: the text is read as it is
        return list(train_texts), list(eval_texts)


class WordPipeline(Pipeline):
    """A pipeline whose vocabulary is a word list (`data.word_vocab.WordVocabulary` of
    --vocab_file, read once); `pipeline_name` names it when --vocab_file is missing."""

    pipeline_name = None

    def __init__(self, recipe_data, options):
        super().__init__(recipe_data, options)
        self._vocab = None

    def vocabulary(self):
        from data import word_vocab  # pylint: disable=g-import-not-at-top
        if self._vocab is None:
            if not self.options.vocab_file:
                raise ValueError("--vocab_file (a word list starting <S> </S> <UNK>) is "
                                 "required by the %s pipeline" % self.pipeline_name)
            self._vocab = word_vocab.WordVocabulary(self.options.vocab_file)
        return self._vocab

    def vocab_size(self):
        return len(self.vocabulary())


def _holds_text(path):
    """Whether `path` has a non-blank line among its first ones (binary files refused)."""
    from data import corpus  # pylint: disable=g-import-not-at-top
    stats = corpus.ReadStats()
    with corpus.open_file(path) as f:
        for lineno, raw in enumerate(f, 1):
            if lineno > 100000:
                break
            if b"\x00" in raw:
                raise corpus.CorpusError("%s:%d: looks binary (NUL byte); expected UTF-8 "
                                         "text, one sentence per line" % (path, lineno))
            if raw.strip():
                corpus.decode_line(raw, path, lineno, stats)
                return True
    return False
