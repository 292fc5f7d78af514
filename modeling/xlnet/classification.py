"""XLNet's fine-tuning input format for `run_classifier.py --model_family=xlnet`.

XLNet classifies with the whole input visible (no permutation, no query
stream) and reads its sequence summary at the LAST position, where it puts
`<cls>` (`modeling.xlnet.finetuning`):

    <pad> ... <pad>  A <sep>  B <sep>  <cls>      left padded, SentencePiece ids

So the format is Google's in everything but the packing: the same processors,
labels, padding examples and TFRecord layout (`input_ids`, `input_mask`,
`segment_ids`, `label_ids`, `is_real_example`), the same `BertClassifier` on
the network's `pooled_output`, with `--vocab_file` a SentencePiece model
(`run/create_vocab.py --model=sentencepiece`, or XLNet's `spiece.model`) and
`--bert_config_file` an XLNet `config.json`.

    python run/run_classifier.py --model_family=xlnet --task_name=generic ... \\
      --vocab_file=data/sample/xlnet/spiece.model --bert_config_file=/tmp/xlnet/config.json \\
      --init_checkpoint=/tmp/xlnet --do_train --do_eval --output_dir=/tmp/xlnet_cls

Multiple-choice tasks work as for BERT: ``context <sep> choice <sep> <cls>``
per candidate, one shared scoring layer, a softmax across the candidates
(`modeling.tasks.multiple_choice`). Not supported (refused with a one-line
error): SavedModel export.
"""

from modeling.tasks import classifier_job
from modeling.tasks.input_formats import ClassifierJobError
from modeling.tasks.input_formats import FORMATS

__all__ = ["XLNetInputFormat"]


class XLNetInputFormat(classifier_job.PooledInputFormat):
    """`A <sep> B <sep> <cls>`, left padded, SentencePiece; `BertClassifier` on the summary."""

    def check(self):
        super().check()
        if self.job.export_dir:
            raise ClassifierJobError("--export_dir: an XLNet classifier has no SavedModel "
                                     "export yet (the serving signature packs WordPiece); "
                                     "leave --export_dir unset")

    def tokenizer(self):
        # Imported here: tensorflow-text's SentencePiece op loads with the format.
        from data.tokenizers import sentencepiece  # pylint: disable=g-import-not-at-top

        job = self.job
        if not job.vocab_file:
            raise ClassifierJobError("--vocab_file is required (XLNet: a SentencePiece model)")
        try:
            tokenizer = sentencepiece.SentencePieceTokenizer(job.vocab_file)
        except (ValueError, OSError) as e:
            raise ClassifierJobError("--vocab_file=%s: %s" % (job.vocab_file, e)) from None
        missing = [s for s in ("<sep>", "<cls>", "<pad>") if s not in tokenizer.special_ids()]
        if missing:
            raise ClassifierJobError("--vocab_file=%s: the SentencePiece model has no %s; "
                                     "expected XLNet's special symbols"
                                     % (job.vocab_file, ", ".join(missing)))
        if tokenizer.vocab_size() != self.config.vocab_size:
            raise ClassifierJobError(
                "--vocab_file=%s has %d pieces but the XLNet config %s says vocab_size=%d; "
                "use the SentencePiece model that belongs to the model"
                % (job.vocab_file, tokenizer.vocab_size(), job.bert_config_file,
                   self.config.vocab_size))
        return tokenizer

    def pack_fn(self, tokenizer):
        from modeling.xlnet import finetuning  # pylint: disable=g-import-not-at-top

        seq = self.job.max_seq_length

        def pack(example):
            features = finetuning.pack_text_pair(tokenizer, example.text_a or "",
                                                 example.text_b or None, seq)
            return features["input_ids"], features["input_mask"], features["segment_ids"]

        return pack


FORMATS.register("xlnet", XLNetInputFormat)
