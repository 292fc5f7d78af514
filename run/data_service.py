"""Runs a tf.data service dispatcher or worker for `--data_service_address`.

Training input that the trainer's own CPU cannot produce fast enough can run
on other machines: start one dispatcher and any number of workers (more can
join while training runs), then point the training script at the dispatcher.

    # machine A
    python run/data_service.py --role=dispatcher --port=5050
    # machines B, C, ... (the input files and vocabulary under the same paths)
    python run/data_service.py --role=worker --port=5051 \
      --dispatcher_address=grpc://A:5050 --worker_address=$(hostname):%port%
    # the trainer
    python run/run_pretraining.py ... --data_service_address=grpc://A:5050 \
      --data_service_job_name=my_run

The server runs until it is stopped (Ctrl-C or SIGTERM).
"""

import time

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

from absl import flags

from data import input_pipeline

FLAGS = flags.FLAGS

flags.DEFINE_enum("role", None, ["dispatcher", "worker"], "Which server to run.")
flags.DEFINE_integer("port", 0, "Port to listen on (0: any free port, printed at start).")
flags.DEFINE_string("dispatcher_address", None,
                    "worker: the dispatcher, grpc://HOST:PORT.")
flags.DEFINE_string("worker_address", None,
                    "worker: HOST:PORT under which trainers reach this worker (%port% is "
                    "replaced by the port). Default localhost:%port%: same machine only.")
flags.DEFINE_string("work_dir", None,
                    "dispatcher: journal directory, so that a restarted dispatcher "
                    "recovers its jobs.")


def main(_):
    server = input_pipeline.start_data_service_server(
        FLAGS.role, port=FLAGS.port, dispatcher_address=FLAGS.dispatcher_address,
        worker_address=FLAGS.worker_address, work_dir=FLAGS.work_dir)
    if FLAGS.role == "dispatcher":
        where = server.target
    else:
        where = server._address  # pylint: disable=protected-access
    print("tf.data service %s listening on %s" % (FLAGS.role, where), flush=True)
    # Sleep in Python rather than in server.join(), so that SIGTERM and
    # Ctrl-C end the process at once.
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    script.run(main, required_flags=["role"])
