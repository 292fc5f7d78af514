"""SiATL (Chronopoulou et al. 2019): a pre-trained LSTM LM fine-tuned with an auxiliary LM loss.

    model   `SiatlClassifier`: the pre-trained LM (ULMFiT's AWD-LSTM by
            default), a task BiLSTM with self-attention pooling and a dense
            layer; loss = task loss + gamma * the LM's own loss on the task
            text, gamma decaying from 0.2 to 0.1 (`aux_lm_weight`)
    job     the run (`run/run_siatl.py`): run_classifier's data, sequential
            unfreezing in three trainer runs with fresh optimizers,
            cumulative as in the paper (the new layers; then also the
            pre-trained LSTM and decoder; then also the embeddings);
            registered as the task "siatl"

    from modeling.siatl import SiatlJob, run
    run(SiatlJob(task_name="generic", data_dir=..., vocab_file=..., bert_config_file=...,
                 init_checkpoint=LM_DIR, output_dir=..., do_train=True, do_eval=True))
"""

from modeling.siatl import job  # registers the task "siatl"  # pylint: disable=unused-import
from modeling.siatl.job import SiatlJob
from modeling.siatl.job import SiatlJobError
from modeling.siatl.job import run
from modeling.siatl.job import stage_plan
from modeling.siatl.model import AttentionPooling
from modeling.siatl.model import SiatlClassifier
from modeling.siatl.model import aux_lm_weight

__all__ = ["AttentionPooling", "SiatlClassifier", "SiatlJob", "SiatlJobError", "aux_lm_weight",
           "job", "run", "stage_plan"]
