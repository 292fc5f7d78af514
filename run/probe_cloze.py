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
over all facts (--noplot: none; modeling/analysis/plots.py). The flags are the
fields of `modeling.analysis.cloze.ClozeSettings`.
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import common_flags
from data import atomic
from data import tokenization
from modeling import bert as config_lib
from modeling import checkpoints
from modeling import recipes
from modeling.analysis import cloze
from modeling.analysis import plots
from modeling.serving import inference

common_flags.define_job_flags(cloze.ClozeSettings)


def main(_):
    settings = common_flags.job_from_flags(cloze.ClozeSettings)
    common_flags.require(settings, "bert_config_file", "vocab_file")
    tokenization.validate_case_matches_checkpoint(settings.do_lower_case,
                                                  settings.init_checkpoint)
    plot_file = settings.plot_file()
    if settings.output_file:
        atomic.check_outputs([("--output_file", settings.output_file)]
                             + ([("--plot", plot_file)] if plot_file else []),
                             [("--facts_file", settings.facts_file),
                              ("--vocab_file", settings.vocab_file),
                              ("--bert_config_file", settings.bert_config_file),
                              ("--init_checkpoint", settings.init_checkpoint)])
    facts = cloze.read_facts(settings.facts_file)
    bert_config = config_lib.load_bert_config(settings.bert_config_file)
    tokenizer = tokenization.FullTokenizer(settings.vocab_file, settings.do_lower_case)
    inference.check_vocab_fits(len(tokenizer.vocab), bert_config.vocab_size,
                               settings.vocab_file, settings.bert_config_file)
    # Every bad line, and a file of no usable fact, before the model is built.
    cloze.usable_facts(facts, tokenizer, settings.max_seq_length, settings.facts_file)
    model = recipes.build_bert_pretrainer(bert_config)
    checkpoints.init_from_checkpoint(model, settings.init_checkpoint)
    report = cloze.probe(model, tokenizer, facts, path=settings.facts_file,
                         max_seq_length=settings.max_seq_length, batch_size=settings.batch_size,
                         top_k=settings.top_k)
    print("facts: %d (skipped %d)  P@1 %.3f  P@10 %.3f  MRR %.3f"
          % (report["num_facts"], len(report["skipped"]), report["precision_at_1"],
             report["precision_at_10"], report["mean_reciprocal_rank"]))
    for name, row in report["per_relation"].items():
        print("  %-24s n=%-4d P@1 %.3f  P@10 %.3f"
              % (name, row["num_facts"], row["precision_at_1"], row["precision_at_10"]))
    if settings.output_file:
        cloze.write_report(report, settings.output_file, extra={
            "facts_file": settings.facts_file, "init_checkpoint": settings.init_checkpoint})
    if plot_file:
        plots.plot_cloze(report, plot_file)
        plots.png_to_tensorboard(plot_file)
        print("wrote %s" % plot_file)


if __name__ == "__main__":
    script.run(main, required_flags=["init_checkpoint", "facts_file"])
