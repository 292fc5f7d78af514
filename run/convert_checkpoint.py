"""Writes any model this project reads as an HF, keras-hub or Google folder.

    python run/convert_checkpoint.py --init_checkpoint=out/pretraining \
        --output_format=hf --output_dir=out/hf_model
    python run/convert_checkpoint.py --init_checkpoint=roberta-base/ \
        --output_format=keras_hub --output_dir=out/roberta_preset

The flags are the fields of `modeling.pretrained.convert.ConvertSettings`;
see that module.
"""

import script  # first: quiet TensorFlow start  # pylint: disable=g-bad-import-order

import common_flags
from modeling.pretrained import convert

common_flags.define_job_flags(convert.ConvertSettings)


def main(_):
    settings = common_flags.job_from_flags(convert.ConvertSettings)
    summary = convert.convert(settings)
    print("wrote %s (%s, heads: %s, %d weights) from %s"
          % (summary["output_dir"], summary["output_format"],
             ", ".join(summary["heads"]) or "none", summary["weights"], summary["input"]))


if __name__ == "__main__":
    script.run(main, required_flags=["init_checkpoint", "output_dir"])
