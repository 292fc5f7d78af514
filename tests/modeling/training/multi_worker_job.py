"""One worker of the two-process MultiWorkerMirroredStrategy test.

Usage: TF_CONFIG=... python multi_worker_job.py MODEL_DIR DATA_FILE NUM_STEPS [WEIGHTS]
Prints RESUMED_FROM_STEP n and FINAL_STEP n, and writes the final weights to
WEIGHTS (.npz) when given. SIGTERM (as run scripts handle it,
`data.termination`) makes every worker save the same step and exit 143.
Exits by itself (the test also bounds it with a timeout).
"""

import sys

import numpy as np

import keras
import tensorflow as tf

from data import input_pipeline
from data import termination
from modeling import bert as config_lib
from modeling.training import distribute
from modeling import objectives
from modeling import recipes
from modeling.training import optimization
from modeling.training import trainer as trainer_lib


def main(model_dir, data_file, steps, weights_file=None):
    termination.install()  # first, as run scripts do (run/script.py)
    strategy = distribute.get_strategy("multi_worker_mirrored")
    config = config_lib.BertConfig(
        vocab_size=60, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64, type_vocab_size=2)

    def model_fn():
        keras.utils.set_random_seed(1)
        return recipes.build_bert_pretrainer(config)

    trainer = trainer_lib.Trainer(
        strategy, model_fn, lambda: optimization.create_optimizer(1e-3, steps, 1),
        model_dir=model_dir, train_batch_size=8, num_train_steps=steps,
        save_checkpoints_steps=2, log_steps=2)
    trainer.restore_or_initialize()
    print("RESUMED_FROM_STEP %d" % trainer.current_step(), flush=True)
    try:
        trainer.train(input_pipeline.pretraining_input_fn_builder(
            data_file, 16, 3, is_training=True, batch_size=8, seed=5, shuffle_buffer_size=16))
    except termination.Terminated as e:
        print("TERMINATED_AT_STEP %d: %s" % (trainer.current_step(), e), flush=True)
        sys.exit(termination.EXIT_STATUS)
    print("FINAL_STEP %d" % trainer.current_step(), flush=True)
    if weights_file:
        np.savez(weights_file, *[np.asarray(w) for w in trainer.model.get_weights()])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), *sys.argv[4:5])
