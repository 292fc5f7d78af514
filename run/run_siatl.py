"""Fine-tunes a pre-trained LSTM language model for classification the SiATL way.

Chronopoulou et al. (2019): the LM (ULMFiT's AWD-LSTM from
`run_pretraining.py --recipe=ulmfit`), a task BiLSTM with self-attention
pooling on top, the LM's own loss on the task text kept as an auxiliary loss
(weight 0.2 decaying to 0.1), and sequential unfreezing: new layers, then
the pre-trained LM, then everything, each stage with a fresh optimizer.

    python run/run_pretraining.py --recipe=ulmfit --output_dir=/tmp/lm
    python run/run_siatl.py --task_name=generic --data_dir=my_task \
      --text_a_column=text --label_column=label \
      --vocab_file=data/sample/elmo/vocab.txt \
      --bert_config_file=/tmp/lm/ulmfit_config.json --init_checkpoint=/tmp/lm \
      --do_train --do_eval --output_dir=/tmp/siatl \
      [--stage_1_steps=N --stage_2_steps=N --stage_3_steps=N]

The data flags are run_classifier.py's (`--task_name`, `--processor`, the
generic-task flags). Outputs in `--output_dir`: stage_1/, stage_2/, stage_3/
(checkpoints and TensorBoard logs of each stage; a killed run resumes in the
stage it was in), eval_results.txt, test_results.tsv.

This script only parses flags: the run is `modeling.siatl.job.run`.
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import common_flags
from modeling.siatl import job as siatl_job

main = common_flags.job_main(siatl_job.SiatlJob, siatl_job.run)


if __name__ == "__main__":
    script.run(main)
