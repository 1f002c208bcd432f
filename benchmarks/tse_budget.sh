#!/usr/bin/env bash
# Targeted syntactic evaluation of equal-budget PTB models (docs/results.md): AWD-LSTM,
# ON-LSTM, ONLSTM-SYD, PaLM-S and DM-LSTM from their shipped configs at one small size
# (embedding 200, LSTM 400 x 3; ON-LSTM chunk 10; PaLM's span attention window 20, rational
# RNN 100, score MLP 50), each with its own recipe (optimiser, dropouts, AR/TAR, seed), for
# the same budget: STEPS training windows of 20 x 70 tokens (DM-LSTM: a quarter of them of
# dependency modelling, then the mixture from that checkpoint), then one validation on the
# whole valid split. Then `synlm evaluate-syntax` scores each on BLiMP, SyntaxGym and
# Marvin & Linzen, and three untrained AWD-LSTMs of the same size (the chance row); each
# writes OUT_DIR/NAME.tse.json (the summary) and NAME.tse.jsonl (one record per pair or item).
#   SYNLM_DATA_DIR=/path/to/data bash benchmarks/tse_budget.sh OUT_DIR [STEPS]
set -euo pipefail
out=${1:?output folder}
steps=${2:-600}
mkdir -p "$out"
small=(--model.backbone.init_args.input_size=200 --model.backbone.init_args.hidden_size=400
       --trainer.max_epochs=1 --trainer.enable_progress_bar=false
       --trainer.enable_model_summary=false --trainer.enable_checkpointing=true)
span='--model.backbone.init_args.inserts=[{"class_path": "SpanAttention", "init_args":
  {"after": 1, "window": 20, "rrnn_size": 100, "parser_size": 50}}]'
train() {  # name config steps extra-args...; a finished run (its last.ckpt) is kept
  local name=$1 config=$2 n=$3
  shift 3
  if ls "$out/$name"/version_*/checkpoints/last.ckpt > /dev/null 2>&1; then return; fi
  /usr/bin/time -f "$name %e s" synlm fit --config "configs/$config" "${small[@]}" \
    --trainer.limit_train_batches="$n" --trainer.default_root_dir="$out/$name" "$@" \
    > "$out/$name.log" 2>&1
}
train awd_lstm awd_lstm.yaml "$steps"
train onlstm onlstm.yaml "$steps"
train onlstm_syd onlstm_syd.yaml "$steps"
train palm_s palm_s.yaml "$steps" "$span"
train dm_lstm_dep dm_lstm_dep.yaml "$((steps / 4))"
train dm_lstm dm_lstm.yaml "$((steps - steps / 4))" --model.init_from="$out/dm_lstm_dep"
evaluate() {  # name evaluate-syntax-args...; a finished evaluation (its JSON) is kept
  local name=$1
  shift
  if [ -s "$out/$name.tse.json" ]; then return; fi
  /usr/bin/time -f "$name evaluate-syntax %e s" synlm evaluate-syntax "$@" \
    --output "$out/$name.tse.jsonl" > "$out/$name.tse.partial" 2> "$out/$name.tse.log"
  mv "$out/$name.tse.partial" "$out/$name.tse.json"
}
for name in awd_lstm onlstm onlstm_syd palm_s dm_lstm; do
  evaluate "$name" --ckpt_path "$out/$name"
done
evaluate untrained --config awd_lstm.yaml --seeds 3 --set \
  model.backbone.init_args.input_size=200 model.backbone.init_args.hidden_size=400
