#!/usr/bin/env bash
# Same-budget comparison on real PTB of AWD-LSTM, PaLM-U, PaLM-RB and PaLM-S (docs/results.md):
# the PaLM configs shrunk to one size (embedding 200, LSTM 400, rational RNN 100 per
# direction, score MLP 50, window 20), the same seed, optimiser (Adam 1e-3) and budget:
# STEPS training windows (bptt 70, batch 20), then one validation on the whole valid split;
# AWD-LSTM is PaLM-U without the span attention. Then synlm parse scores each
# checkpoint's trees on the NLTK WSJ sample (WSJ10, WSJ40, PaLM protocol).
#   SYNLM_DATA_DIR=/path/to/data bash benchmarks/palm_budget.sh OUT_DIR [STEPS]
set -euo pipefail
out=${1:?output folder}
steps=${2:-300}
mkdir -p "$out"
small=(--model.backbone.init_args.input_size=200 --model.backbone.init_args.hidden_size=400
       --model.init_range=0.1225 --trainer.max_epochs=1 --trainer.limit_train_batches="$steps"
       --trainer.enable_progress_bar=false --trainer.enable_model_summary=false)
span() {  # the span attention restated whole (a list item has no per-key override)
  echo "--model.backbone.init_args.inserts=[{\"class_path\": \"SpanAttention\", \"init_args\":
    {\"after\": 1, \"window\": 20, \"rrnn_size\": 100, \"parser_size\": 50${1:-}}}]"
}
source "$(dirname "$0")/once.sh"
run() {  # name config extra-args...
  local name=$1 config=$2
  shift 2
  fit_once "$out/$name" "$out/$name.log" "$name" --config "configs/$config" "${small[@]}" "$@"
}
run awd_lstm palm_u.yaml '--model.backbone.init_args.inserts=[]'
run palm_u palm_u.yaml "$(span)"
run palm_rb palm_rb.yaml "$(span ', "scores": "right_branching"')"
run palm_s palm_s.yaml "$(span)"
treebank=${SYNLM_DATA_DIR:?}/nltk_treebank/treebank.zip
for name in palm_u palm_rb palm_s; do
  ckpt=$(ls "$out/$name"/version_*/checkpoints/*.ckpt | grep -v last | head -1)
  for length in 10 40; do
    synlm parse --ckpt_path "$ckpt" --treebank "$treebank" --protocol palm \
      --max-length "$length" > "$out/$name.wsj$length.json"
  done
done
# PaLM Table 4's first row: the same PaLM-U, untrained, over 25 seeds
synlm parse --config configs/palm_u.yaml --seeds 25 --treebank "$treebank" --protocol palm \
  --max-length 40 --set model.backbone.init_args.input_size=200 \
  model.backbone.init_args.hidden_size=400 model.init_range=0.1225 "$(span | cut -c3-)" \
  > "$out/random.wsj40.json"
