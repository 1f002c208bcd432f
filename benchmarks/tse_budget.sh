#!/usr/bin/env bash
# Targeted syntactic evaluation of equal-budget PTB models (docs/results.md): AWD-LSTM,
# ON-LSTM, ONLSTM-SYD, PaLM-S and DM-LSTM from their shipped configs at one small size
# (embedding 200, LSTM 400 x 3; ON-LSTM chunk 10; PaLM's span attention window 20, rational
# RNN 100, score MLP 50), each with its own recipe (optimiser, dropouts, AR/TAR), for the
# same budget: STEPS training windows of 20 x 70 tokens (DM-LSTM: a quarter of them of
# dependency modelling, then the mixture from that checkpoint), then one validation on the
# whole valid split. Then `synlm evaluate-syntax` scores each on BLiMP, SyntaxGym and
# Marvin & Linzen (SUBSET: the first N pairs or items of each paradigm, suite and condition;
# "all": every one), and three untrained AWD-LSTMs of the same size (the chance row); each
# writes NAME.tse.json (the summary) and NAME.tse.jsonl (one record per pair or item), each
# model as soon as its training ends.
# SEEDS (e.g. "1 2 3") trains every model once per seed, in OUT_DIR/seed_S with
# --seed_everything=S (without it: once, with each config's own seed, in OUT_DIR). A
# finished run and a finished evaluation are kept and a stopped run continues from its last
# checkpoint (benchmarks/once.sh), so the script goes on where it stopped; at the end the
# tables of whatever has finished are written to OUT_DIR/report from the saved evaluations
# (`evaluate-syntax --results`), each model's seeds under one label.
#   SYNLM_DATA_DIR=/path/to/data bash benchmarks/tse_budget.sh OUT_DIR [STEPS] [SUBSET] [SEEDS]
set -euo pipefail
out=${1:?output folder}
steps=${2:-600}
subset=${3:-all}
seeds=${4:-}
mkdir -p "$out"
small=(--model.backbone.init_args.input_size=200 --model.backbone.init_args.hidden_size=400
       --trainer.max_epochs=1 --trainer.enable_progress_bar=false
       --trainer.enable_model_summary=false --trainer.enable_checkpointing=true)
span='--model.backbone.init_args.inserts=[{"class_path": "SpanAttention", "init_args":
  {"after": 1, "window": 20, "rrnn_size": 100, "parser_size": 50}}]'
subset_flag=()
if [ "$subset" != all ]; then subset_flag=(--subset "$subset"); fi
source "$(dirname "$0")/once.sh"
train() {  # folder name config steps extra-args...
  local dir=$1 name=$2 config=$3 n=$4
  shift 4
  fit_once "$dir/$name" "$dir/$name.log" "$name" --config "configs/$config" "${small[@]}" \
    --trainer.limit_train_batches="$n" "$@"
}
evaluate() {  # folder name evaluate-syntax-args...
  local dir=$1 name=$2
  shift 2
  score_once "$dir/$name.tse.json" "$dir/$name.tse.log" "$name evaluate-syntax" \
    evaluate-syntax "$@" "${subset_flag[@]}" --output "$dir/$name.tse.jsonl"
}
trained_and_scored() {  # as train, then the run is scored at once (a stop loses no score)
  train "$@"
  evaluate "$1" "$2" --ckpt_path "$1/$2"
}
names=(awd_lstm onlstm onlstm_syd palm_s dm_lstm)
labels=(AWD-LSTM ON-LSTM ONLSTM-SYD PaLM-S DM-LSTM)
evaluate "$out" untrained --config awd_lstm.yaml --seeds 3 --set \
  model.backbone.init_args.input_size=200 model.backbone.init_args.hidden_size=400
for seed in ${seeds:-own}; do
  dir=$out seed_flag=()
  if [ "$seed" != own ]; then dir=$out/seed_$seed seed_flag=(--seed_everything="$seed"); fi
  mkdir -p "$dir"
  trained_and_scored "$dir" awd_lstm awd_lstm.yaml "$steps" "${seed_flag[@]}"
  trained_and_scored "$dir" onlstm onlstm.yaml "$steps" "${seed_flag[@]}"
  trained_and_scored "$dir" onlstm_syd onlstm_syd.yaml "$steps" "${seed_flag[@]}"
  trained_and_scored "$dir" palm_s palm_s.yaml "$steps" "$span" "${seed_flag[@]}"
  train "$dir" dm_lstm_dep dm_lstm_dep.yaml "$((steps / 4))" "${seed_flag[@]}"
  trained_and_scored "$dir" dm_lstm dm_lstm.yaml "$((steps - steps / 4))" \
    --model.init_from="$dir/dm_lstm_dep" "${seed_flag[@]}"
done
results=() report_labels=()  # AWD-LSTM first: each model's paired test is against it
for k in "${!names[@]}"; do
  for file in "$out/${names[$k]}.tse.json" "$out"/seed_*/"${names[$k]}.tse.json"; do
    if [ -s "$file" ]; then results+=("$file") report_labels+=("${labels[$k]}"); fi
  done
done
results+=("$out/untrained.tse.json") report_labels+=("untrained AWD-LSTM")
synlm evaluate-syntax --results "${results[@]}" --label "${report_labels[@]}" \
  --report "$out/report" > "$out/report.json" 2> "$out/report.log"
