#!/usr/bin/env bash
# Short-budget generation runs (docs/results.md, DMLM Tables 2 and 4): AWD-LSTM and DM-LSTM
# from the shipped generation configs at one small size (embedding 200, LSTM 400, 3 layers,
# batch 40), trained on the staged splits (staged: true), then sampled and scored.
#   bash benchmarks/generation_budget.sh OUT_DIR TASK [EPOCHS] [DEP] [N] [ORACLE_EPOCHS]
# TASK roc: AWD-LSTM for EPOCHS epochs; DM-LSTM for DEP epochs of dependency modelling then
# EPOCHS - DEP of the mixture (context 56); endings for the first N test stories (nucleus
# p 0.5, the paper's), scored against sentence 5.
# TASK news: the same two models plus an oracle AWD-LSTM (another seed, ORACLE_EPOCHS, default
# 2 x EPOCHS) for
# the LM score; N unconditional samples each by pure sampling (as Tables 4's scores), scored
# by the oracle and by a reverse LM (configs/rlm.yaml) on the real test split.
# Needs SYNLM_DATA_DIR (rocstories/, emnlp2017_news/) and PARSER, a spaCy pipeline for the
# dependency heads (docs/evaluation.md trains one on UD English EWT).
set -euo pipefail
out=${1:?output folder}
task=${2:?roc or news}
epochs=${3:-3}
dep=${4:-1}
n=${5:-1000}
oracle_epochs=${6:-$((2 * epochs))}
parser=${PARSER:?a spaCy pipeline directory}
mkdir -p "$out"
small=(--data.corpus.init_args.staged=true --model.backbone.init_args.input_size=200
       --model.backbone.init_args.hidden_size=400 --data.batch_size=40
       --trainer.enable_progress_bar=false --trainer.enable_model_summary=false)
source "$(dirname "$0")/once.sh"
run() {  # name config epochs extra-args...
  local name=$1 config=$2 epochs=$3
  shift 3
  fit_once "$out/$name" "$out/$name.log" "$name fit" --config "configs/generation/$config" \
    "${small[@]}" --trainer.max_epochs="$epochs" "$@"
}
sample() {  # name extra-args...: samples and metrics of $out/$name
  local name=$1
  shift
  /usr/bin/time -f "$name generate %e s" synlm generate \
    --ckpt_path "$out/$name" --output "$out/$name.jsonl" --metrics "$@" \
    > "$out/$name.metrics.json" 2> "$out/$name.generate.log"
  echo "$name $(cat "$out/$name.metrics.json")"
}
run "awd_lstm_$task" "awd_lstm_$task.yaml" "$epochs"
run "dm_lstm_dep_$task" "dm_lstm_dep_$task.yaml" "$dep" --data.corpus.init_args.parser="$parser"
run "dm_lstm_$task" "dm_lstm_$task.yaml" "$((epochs - dep))" \
  --model.init_from="$out/dm_lstm_dep_$task"
if [ "$task" = roc ]; then
  head -n "$((n + 1))" "$SYNLM_DATA_DIR/rocstories/ROCStories_test.csv" > "$out/stories.csv"
  for name in awd_lstm_roc dm_lstm_roc; do
    sample "$name" --stories "$out/stories.csv" --top-p 0.5
  done
else
  run oracle_news awd_lstm_news.yaml "$oracle_epochs" --seed_everything=7
  for name in awd_lstm_news dm_lstm_news; do
    sample "$name" --num-samples "$n" --max-new-tokens 51 --oracle \
      "$out/oracle_news" \
      --rlm-heldout "$SYNLM_DATA_DIR/emnlp2017_news/test.txt"
  done
fi
for name in "awd_lstm_$task" "dm_lstm_dep_$task" "dm_lstm_$task"; do
  python3 - "$out/$name/version_0/metrics.csv" "$name" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r.get("val/ppl")]
print(sys.argv[2], "val/ppl by epoch:", " ".join(f"{float(r['val/ppl']):.2f}" for r in rows))
PY
done
