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
# width 256), trained and scored the same way; pushdown adds the Pushdown LM of
# configs/pushdown.yaml (6 layers of width 256; 64 sentences a step as 16 accumulated
# batches of 4, since its (batch, length, length, width) attachment keys took 9 GB at
# batches of 16; scored by its own beam over attachments, of the beam size alone) and cag
# the CAG of configs/cag.yaml (3 layers of width 256) over the sample's words, Berkeley
# classes for its singletons, not BLLIP-LG's BPE pieces. SEEDS (e.g. "1 2 3") trains and
# scores every model once per seed, in OUT_DIR/seed_S with --seed_everything=S, beside the
# AWD-LSTM of the same seed (TSE_DIR/seed_S/awd_lstm: tse_budget.sh with the same SEEDS);
# without it, once with each config's own seed. A finished run and a finished evaluation
# are kept, and a stopped run continues from its last checkpoint (benchmarks/once.sh); at
# the end the tables of whatever has finished are written to OUT_DIR/report from the saved
# evaluations (`evaluate-syntax --results`), each model's seeds under one label.
#   SYNLM_DATA_DIR=/path/to/data bash benchmarks/rnng_budget.sh OUT_DIR TSE_DIR [STEPS] \
#     [SUBSET] [BEAM] [MODELS] [SEEDS]
set -euo pipefail
out=${1:?output folder}
tse=${2:?the tse_budget.sh output folder (its awd_lstm run)}
steps=${3:-552}
subset=${4:-10}
read -r beam word_beam shift <<< "${5:-100 10 1}"
models=${6:-rnng}
seeds=${7:-}
mkdir -p "$out"
source "$(dirname "$0")/once.sh"
train() {  # folder model fit-args...
  local dir=$1 name=$2
  shift 2
  fit_once "$dir/$name" "$dir/$name.log" "$name" --config "configs/$name.yaml" \
    --config configs/data/nltk_sample_trees.yaml \
    --data.batch_size=64 --trainer.max_epochs=10 --trainer.max_steps="$steps" \
    --trainer.val_check_interval=1.0 --trainer.enable_progress_bar=false "$@"
}
evaluate() {  # folder name evaluate-syntax-args...
  local dir=$1 name=$2
  shift 2
  score_once "$dir/$name.tse.json" "$dir/$name.tse.log" "$name evaluate-syntax" \
    evaluate-syntax "$@" --subset "$subset" --output "$dir/$name.tse.jsonl"
}
for seed in ${seeds:-own}; do
  dir=$out awd=$tse/awd_lstm seed_flag=()
  if [ "$seed" != own ]; then
    dir=$out/seed_$seed awd=$tse/seed_$seed/awd_lstm seed_flag=(--seed_everything="$seed")
  fi
  mkdir -p "$dir"
  evaluate "$dir" awd_lstm --ckpt_path "$awd"
  for name in $models; do
    if [ "$name" = rnng ]; then
      train "$dir" rnng --model.init_args.model.init_args.input_size=200 \
        --model.init_args.model.init_args.hidden_size=400 \
        "${seed_flag[@]}"
    elif [ "$name" = pushdown ]; then
      train "$dir" pushdown --data.batch_size=4 --trainer.accumulate_grad_batches=16 \
        "${seed_flag[@]}"
    elif [ "$name" = cag ]; then
      train "$dir" cag --data.corpus.init_args.train=null --data.corpus.init_args.valid=null \
        --data.corpus.init_args.test=null --data.subwords=null --data.unknown_words=classes \
        "${seed_flag[@]}"
    else
      train "$dir" "$name" "${seed_flag[@]}"
    fi
    search=(--beam-size "$beam" --word-beam-size "$word_beam" --shift-size "$shift")
    if [ "$name" = pushdown ]; then search=(--beam-size "$beam"); fi
    evaluate "$dir" "$name" --ckpt_path "$dir/$name" "${search[@]}"
  done
done
results=() labels=()  # the AWD-LSTM first: each model's paired test is against it
for name in awd_lstm $models; do
  for file in "$out/$name.tse.json" "$out"/seed_*/"$name.tse.json"; do
    if [ -s "$file" ]; then results+=("$file") labels+=("$name"); fi
  done
done
synlm evaluate-syntax --results "${results[@]}" --label "${labels[@]}" \
  --report "$out/report" > "$out/report.json" 2> "$out/report.log"
