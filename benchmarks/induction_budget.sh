#!/usr/bin/env bash
# The structure-inducing LMs at one CPU budget (docs/results.md): ON-LSTM and PRPN (causal,
# PTB text as a stream) beside StructFormer and UDGN (masked, PTB sentences), each from its
# shipped config with its own recipe (optimiser, dropouts, masking) at one small size
# (ON-LSTM and PRPN: embedding 200, hidden 400; StructFormer and UDGN: width 200, 4 layers of
# 4 heads, a 2-layer parser), for the same budget: STEPS training batches of about 1,400
# tokens (20 x 70 for a stream; a masked model's batches of sentences up to 1,400 tokens),
# then one validation on the whole valid split. Each run is then scored on the staged NLTK
# treebank sample (3,900 sentences; in the PTB training text, so not held out):
#   - constituency (ON-LSTM's middle layer, PRPN's distances, StructFormer's): sentence and
#     corpus UF1 under --protocol kim (Kim et al. 2019's compare_trees);
#   - dependency (StructFormer's and UDGN's arcs): directed and undirected accuracy against
#     the Yamada head rules, punctuation dropped (as the released StructFormer/UDGN code);
#   - BLiMP (SUBSET: the first N pairs of each paradigm; "all": every pair): log-probability
#     for the causal models, pseudo-log-likelihood for the masked ones.
# SEEDS (e.g. "1 2 3") trains every model once per seed in OUT_DIR/seed_S. A finished run and
# a finished evaluation are kept and a stopped run continues from its last checkpoint
# (benchmarks/once.sh). At the end, OUT_DIR/report holds the BLiMP tables of whatever has
# finished (`evaluate-syntax --results`, each model's seeds under one label, bootstrap
# intervals over seeds and items) and OUT_DIR/parsing.md the parsing figures, each the mean
# over the seeds with their range.
#   SYNLM_DATA_DIR=/path/to/data bash benchmarks/induction_budget.sh OUT_DIR [STEPS] [SUBSET] [SEEDS]
set -euo pipefail
out=${1:?output folder}
steps=${2:-300}
subset=${3:-10}
seeds=${4:-1 2 3}
mkdir -p "$out"
treebank=${SYNLM_DATA_DIR:?set SYNLM_DATA_DIR}/nltk_treebank/treebank.zip
common=(--trainer.max_epochs=1 --trainer.limit_train_batches="$steps"
        --trainer.enable_progress_bar=false --trainer.enable_model_summary=false)
recurrent=(--model.backbone.init_args.input_size=200 --model.backbone.init_args.hidden_size=400)
masked=(--data.max_tokens=1400 --model.backbone.init_args.num_layers=4
        --model.backbone.init_args.num_heads=4 --model.backbone.init_args.parser_layers=2)
structformer=(--model.backbone.init_args.hidden_size=200)
udgn=(--model.backbone.init_args.emb_size=200 --model.backbone.init_args.head_size=50)
subset_flag=()
if [ "$subset" != all ]; then subset_flag=(--subset "$subset"); fi
source "$(dirname "$0")/once.sh"
names=(onlstm prpn structformer udgn)
labels=(ON-LSTM PRPN StructFormer UDGN)
# the structures scored: "default" is a model's only one (ON-LSTM: its middle layer)
declare -A trees=([onlstm]=default [prpn]=default [structformer]=constituency)
declare -A arcs=([structformer]=dependency [udgn]=dep)
for seed in $seeds; do
  dir=$out/seed_$seed
  mkdir -p "$dir"
  for name in "${names[@]}"; do
    case $name in
      onlstm | prpn) sized=("${recurrent[@]}") ;;
      structformer) sized=("${masked[@]}" "${structformer[@]}") ;;
      udgn) sized=("${masked[@]}" "${udgn[@]}") ;;
    esac
    fit_once "$dir/$name" "$dir/$name.log" "$name" --config "configs/$name.yaml" \
      "${common[@]}" "${sized[@]}" --seed_everything="$seed"
    score_once "$dir/$name.tse.json" "$dir/$name.tse.log" "$name evaluate-syntax" \
      evaluate-syntax --ckpt_path "$dir/$name" --benchmark blimp "${subset_flag[@]}" \
      --output "$dir/$name.tse.jsonl"
    if [ -n "${trees[$name]:-}" ]; then
      structure=()
      if [ "${trees[$name]}" != default ]; then structure=(--structure "${trees[$name]}"); fi
      score_once "$dir/$name.uf1.json" "$dir/$name.uf1.log" "$name parse" \
        parse --ckpt_path "$dir/$name" "${structure[@]}" --treebank "$treebank" --protocol kim
    fi
    if [ -n "${arcs[$name]:-}" ]; then
      score_once "$dir/$name.dda.json" "$dir/$name.dda.log" "$name parse arcs" \
        parse --ckpt_path "$dir/$name" --structure "${arcs[$name]}" --treebank "$treebank"
    fi
  done
done
results=() report_labels=()
for k in "${!names[@]}"; do
  for file in "$out"/seed_*/"${names[$k]}.tse.json"; do
    if [ -s "$file" ]; then results+=("$file") report_labels+=("${labels[$k]}"); fi
  done
done
synlm evaluate-syntax --results "${results[@]}" --label "${report_labels[@]}" \
  --report "$out/report" > "$out/report.json" 2> "$out/report.log"
python "$(dirname "$0")/seed_table.py" "$out" "${names[@]}" > "$out/parsing.md"
