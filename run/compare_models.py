"""Pre-trains and fine-tunes BERT, ELMo, ULMFiT, SiATL and CoVe on one task; prints one table.

    python run/compare_models.py --output_dir=/tmp/compare
    python run/compare_models.py --output_dir=/tmp/compare --models=bert,elmo --pretrain_steps=300

The task, made from the bundled corpus: is a sentence in its original word
order or shuffled (a bag of words scores chance)? Each model is pre-trained
by its recipe's demo on the same documents, fine-tuned by its own fine-tuning
job for the same number of epochs, and scored on sentences of held-out
documents. The table (held-out accuracy, pre-training and fine-tuning time,
parameters) is printed and written to `--output_dir` as comparison.txt and
comparison.json; each model's directories stay there (TensorBoard works on
them). Running it again reuses finished pre-training. The work is
`modeling.experiments.comparison`.
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import common_flags
from modeling.experiments import comparison

main = common_flags.job_main(comparison.CompareJob, comparison.compare,
                             show=comparison.format_table)


if __name__ == "__main__":
    script.run(main, required_flags=["output_dir"])
