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

The server runs until it is stopped (Ctrl-C or SIGTERM). The flags are the
fields of `data.input_pipeline.DataServiceServerSettings`.
"""

import time

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import common_flags
from data import input_pipeline

common_flags.define_job_flags(input_pipeline.DataServiceServerSettings)


def main(_):
    settings = common_flags.job_from_flags(input_pipeline.DataServiceServerSettings)
    server = input_pipeline.start_data_service_server(
        settings.role, port=settings.port, dispatcher_address=settings.dispatcher_address,
        worker_address=settings.worker_address, work_dir=settings.work_dir,
        dispatcher_wait_seconds=settings.dispatcher_wait_seconds)
    if settings.role == "dispatcher":
        where = server.target
    else:
        where = server._address  # pylint: disable=protected-access
    print("tf.data service %s listening on %s" % (settings.role, where), flush=True)
    # Sleep in Python rather than in server.join(), so that SIGTERM and
    # Ctrl-C end the process at once.
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    script.run(main, required_flags=["role"])
