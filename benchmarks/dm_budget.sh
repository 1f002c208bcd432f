#!/usr/bin/env bash
# Same-budget comparison of AWD-LSTM and DM-LSTM (docs/results.md): the shipped configs at
# one small size (embedding 64, LSTM 192, 3 layers), the same seed, optimiser and data,
# EPOCHS epochs each: AWD-LSTM for all of them; DM-LSTM for DEP epochs of dependency
# modelling (configs/dm_lstm_dep.yaml), then the rest as the mixture (configs/dm_lstm.yaml)
# from that checkpoint. Validation every epoch on the whole valid split.
#   bash benchmarks/dm_budget.sh OUT_DIR [EPOCHS] [DEP] [CORPUS]
# CORPUS (default SyntheticTreebank, whose dependency heads are known; PTBConcatSyn for real
# PTB, with SYNLM_DATA_DIR) serves both phases and the baseline.
set -euo pipefail
out=${1:?output folder}
epochs=${2:-8}
dep=${3:-2}
corpus=${4:-SyntheticTreebank}
mkdir -p "$out"
small=(--data.corpus="$corpus" --model.backbone.init_args.input_size=64
       --model.backbone.init_args.hidden_size=192 --data.bptt=35 --optimizer.init_args.lr=10
       --trainer.enable_progress_bar=false --trainer.enable_model_summary=false)
source "$(dirname "$0")/once.sh"
run() {  # name config epochs extra-args...
  local name=$1 config=$2 n=$3
  shift 3
  fit_once "$out/$name" "$out/$name.log" "$name" --config "configs/$config" "${small[@]}" \
    --trainer.max_epochs="$n" "$@"
}
run awd_lstm awd_lstm.yaml "$epochs"
run dm_dep dm_lstm_dep.yaml "$dep"
run dm_mixture dm_lstm.yaml "$((epochs - dep))" \
  --model.init_from="$out/dm_dep"
for name in awd_lstm dm_dep dm_mixture; do
  python3 - "$out/$name/version_0/metrics.csv" "$name" <<'PY'
import csv, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r.get("val/ppl")]
print(sys.argv[2], " ".join(f"{float(r['val/ppl']):.2f}" for r in rows))
PY
done
