"""Cloze knowledge probing (LAMA-style): precision@1/@10 of any MLM checkpoint.

    python run/probe_cloze.py --bert_config_file=chinese_L-12_H-768_A-12/bert_config.json \
      --vocab_file=chinese_L-12_H-768_A-12/vocab.txt \
      --init_checkpoint=chinese_L-12_H-768_A-12/bert_model.ckpt \
      --facts_file=data/sample/cloze/zh.tsv --output_file=cloze_zh.json

--facts_file is TSV ``statement<TAB>answer[<TAB>relation]`` with [MASK] where
the answer goes (one [MASK], widened to the answer's word pieces, or one per
piece; see modeling/analysis/cloze.py). Prints P@1, P@10 and the
per-relation table; --output_file gets the JSON report (every fact's rank
and top-10 answers), and cloze.png beside it: P@1 and P@10 per relation and
over all facts (--noplot: none; modeling/analysis/plots.py).
"""

import os

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

from absl import flags

from data import atomic
from data import tokenization
from modeling import bert as config_lib
from modeling import checkpoints
from modeling import recipes
from modeling.analysis import cloze
from modeling.analysis import plots
from modeling.serving import inference

FLAGS = flags.FLAGS
flags.DEFINE_string("bert_config_file", None, "bert_config.json (Google) or config.json (HF).")
flags.DEFINE_string("vocab_file", None, "The vocabulary file of the model.")
flags.DEFINE_string("init_checkpoint", None, "Google TF1 checkpoint, own checkpoint or HF safetensors.")
flags.DEFINE_bool("do_lower_case", True, "Lower-case the input (uncased models).")
flags.DEFINE_string("facts_file", None, "TSV: statement<TAB>answer[<TAB>relation].")
flags.DEFINE_string("output_file", None, "Write the JSON report here.")
flags.DEFINE_integer("max_seq_length", 128, "Word pieces per statement.", lower_bound=3)
flags.DEFINE_integer("batch_size", 32, "Statements per forward pass.", lower_bound=1)
flags.DEFINE_integer("top_k", 10, "Answers listed per fact (at least 10).", lower_bound=10)
flags.DEFINE_bool("plot", True, "With --output_file, also write cloze.png beside it (and as a TensorBoard image in tensorboard/ there).")


def main(_):
    tokenization.validate_case_matches_checkpoint(FLAGS.do_lower_case, FLAGS.init_checkpoint)
    plot_file = None
    if FLAGS.output_file and FLAGS.plot:
        plot_file = os.path.join(os.path.dirname(FLAGS.output_file), "cloze.png")
    if FLAGS.output_file:
        atomic.check_outputs([("--output_file", FLAGS.output_file)]
                             + ([("--plot", plot_file)] if plot_file else []),
                             [("--facts_file", FLAGS.facts_file),
                              ("--vocab_file", FLAGS.vocab_file)])
    facts = cloze.read_facts(FLAGS.facts_file)
    bert_config = config_lib.load_bert_config(FLAGS.bert_config_file)
    tokenizer = tokenization.FullTokenizer(FLAGS.vocab_file, FLAGS.do_lower_case)
    inference.check_vocab_fits(len(tokenizer.vocab), bert_config.vocab_size,
                               FLAGS.vocab_file, FLAGS.bert_config_file)
    for fact in facts:  # every bad line before the model is built
        cloze.prepare_fact(fact, tokenizer, FLAGS.max_seq_length, FLAGS.facts_file)
    model = recipes.build_bert_pretrainer(bert_config)
    checkpoints.init_from_checkpoint(model, FLAGS.init_checkpoint)
    report = cloze.probe(model, tokenizer, facts, path=FLAGS.facts_file,
                         max_seq_length=FLAGS.max_seq_length, batch_size=FLAGS.batch_size,
                         top_k=FLAGS.top_k)
    print("facts: %d (skipped %d)  P@1 %.3f  P@10 %.3f  MRR %.3f"
          % (report["num_facts"], len(report["skipped"]), report["precision_at_1"],
             report["precision_at_10"], report["mean_reciprocal_rank"]))
    for name, row in report["per_relation"].items():
        print("  %-24s n=%-4d P@1 %.3f  P@10 %.3f"
              % (name, row["num_facts"], row["precision_at_1"], row["precision_at_10"]))
    if FLAGS.output_file:
        cloze.write_report(report, FLAGS.output_file, extra={
            "facts_file": FLAGS.facts_file, "init_checkpoint": FLAGS.init_checkpoint})
    if plot_file:
        plots.plot_cloze(report, plot_file)
        plots.png_to_tensorboard(plot_file)
        print("wrote %s" % plot_file)


if __name__ == "__main__":
    script.run(main, required_flags=["bert_config_file", "vocab_file", "init_checkpoint",
                                     "facts_file"])
