#!/usr/bin/env bash
# An RNNG beside the equal-budget PTB models of tse_budget.sh (docs/results.md): the RNNG of
# configs/rnng.yaml at their size (embedding 200, stack LSTM 400 x 2, the released recipe
# otherwise) trained on the trees synlm can read without an LDC licence, the NLTK WSJ sample
# (configs/data/nltk_sample_trees.yaml: 3,669 training sentences, 88,120 words), for about
# the same number of training words as their 600 windows of 20 x 70 tokens (840,000): STEPS
# batches of 64 sentences (552: 9.5 epochs, 839k words). Then `synlm evaluate-syntax` scores
# it and the tse_budget AWD-LSTM (TSE_DIR/awd_lstm) on the first SUBSET items of every BLiMP
# paradigm, SyntaxGym suite and Marvin & Linzen condition, the RNNG by word-synchronous beam
# search of BEAM (beam, word beam, shift) sizes. MODELS (default rnng) adds the action
# Transformers of configs/plm.yaml, plm_mask.yaml and tg.yaml (their PTB size, 4 layers of
# width 256), trained and scored the same way.
#   SYNLM_DATA_DIR=/path/to/data bash benchmarks/rnng_budget.sh OUT_DIR TSE_DIR [STEPS] [SUBSET] [BEAM] [MODELS]
set -euo pipefail
out=${1:?output folder}
tse=${2:?the tse_budget.sh output folder (its awd_lstm run)}
steps=${3:-552}
subset=${4:-10}
read -r beam word_beam shift <<< "${5:-100 10 1}"
models=${6:-rnng}
mkdir -p "$out"
train() {  # model fit-args...; a finished run (its last checkpoint) is kept
  local name=$1
  shift
  if ls "$out/$name"/version_*/checkpoints/last.ckpt > /dev/null 2>&1; then return; fi
  /usr/bin/time -f "$name %e s" synlm fit --config "configs/$name.yaml" \
    --config configs/data/nltk_sample_trees.yaml "$@" \
    --data.batch_size=64 --trainer.max_epochs=10 --trainer.max_steps="$steps" \
    --trainer.val_check_interval=1.0 --trainer.enable_progress_bar=false \
    --trainer.default_root_dir="$out/$name" > "$out/$name.log" 2>&1
}
evaluate() {  # name evaluate-syntax-args...; a finished evaluation (its JSON) is kept
  local name=$1
  shift
  if [ -s "$out/$name.tse.json" ]; then return; fi
  /usr/bin/time -f "$name evaluate-syntax %e s" synlm evaluate-syntax "$@" --subset "$subset" \
    --output "$out/$name.tse.jsonl" > "$out/$name.tse.partial" 2> "$out/$name.tse.log"
  mv "$out/$name.tse.partial" "$out/$name.tse.json"
}
evaluate awd_lstm --ckpt_path "$tse/awd_lstm"
for name in $models; do
  if [ "$name" = rnng ]; then
    train rnng --model.init_args.input_size=200 --model.init_args.hidden_size=400
  else
    train "$name"
  fi
  evaluate "$name" --ckpt_path "$out/$name" --beam-size "$beam" --word-beam-size "$word_beam" \
    --shift-size "$shift"
done
