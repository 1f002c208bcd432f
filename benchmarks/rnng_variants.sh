#!/usr/bin/env bash
# RNNG variants side by side at one budget, each at one size (embedding 200, stack LSTM
# 400 x 2, the released recipe otherwise; PLM-mask at its config's size), trained for STEPS
# batches of 64 sentences of the
# NLTK WSJ sample's trees (configs/data/nltk_sample_trees.yaml), then `synlm test` (joint
# perplexity, beam perplexity and UF1 of word-synchronous beam search BEAM on the sample's
# 118 test trees) and `synlm evaluate-syntax` on the first SUBSET items of every BLiMP
# paradigm and SyntaxGym suite, by the same beam search. MODELS (default: all three):
#   rnng           configs/rnng.yaml, top-down, words (training singletons as unknown classes)
#   rnng_in_order  configs/rnng_in_order.yaml, in-order, words
#   rnng_bpe       configs/rnng.yaml on the pieces of a byte-level BPE of BPE_SIZE tokens
#                  trained on the training trees (data.subwords: TrainedBPE): no unknown word
#   plm_mask       configs/plm_mask.yaml (4 layers of width 256), words
#   plm_mask_bpe   configs/plm_mask.yaml on the pieces of the same BPE
# A finished step (a run, its test, its evaluation) is kept, and a stopped run continues from
# its last checkpoint (benchmarks/once.sh).
#   SYNLM_DATA_DIR=/path/to/data bash benchmarks/rnng_variants.sh OUT_DIR [STEPS] [SUBSET] \
#     [BEAM] [MODELS] [BPE_SIZE]
set -euo pipefail
out=${1:?output folder}
steps=${2:-276}
subset=${3:-5}
read -r beam word_beam shift <<< "${4:-10 5 1}"
models=${5:-rnng rnng_in_order rnng_bpe}
bpe_size=${6:-4000}
mkdir -p "$out"
source "$(dirname "$0")/once.sh"
bpe=(--data.unknown_words=unk --data.subwords=TrainedBPE --data.subwords.vocab_size="$bpe_size")
rnng_size=(--model.init_args.model.init_args.input_size=200
           --model.init_args.model.init_args.hidden_size=400)
for name in $models; do
  case $name in
    rnng|rnng_in_order) config=$name; extra=("${rnng_size[@]}") ;;
    rnng_bpe) config=rnng; extra=("${rnng_size[@]}" "${bpe[@]}") ;;
    plm_mask) config=plm_mask; extra=() ;;
    plm_mask_bpe) config=plm_mask; extra=("${bpe[@]}") ;;
    *) echo "rnng_variants.sh: unknown model $name (rnng, rnng_in_order, rnng_bpe, plm_mask," \
            "plm_mask_bpe)" >&2; exit 2 ;;
  esac
  fit_once "$out/$name" "$out/$name.log" "$name fit" --config "configs/$config.yaml" \
    --config configs/data/nltk_sample_trees.yaml "${extra[@]}" \
    --model.init_args.beam_size="$beam" --model.init_args.word_beam_size="$word_beam" \
    --model.init_args.shift_size="$shift" \
    --data.batch_size=64 --trainer.max_epochs=20 --trainer.max_steps="$steps" \
    --trainer.val_check_interval=1.0 --trainer.enable_progress_bar=false
  score_once "$out/$name.test.txt" "$out/$name.test.log" "$name test" test \
    --ckpt_path "$out/$name" --trainer.enable_progress_bar=false
  score_once "$out/$name.tse.json" "$out/$name.tse.log" "$name evaluate-syntax" \
    evaluate-syntax --ckpt_path "$out/$name" --benchmark blimp syntaxgym --subset "$subset" \
    --beam-size "$beam" --word-beam-size "$word_beam" --shift-size "$shift" \
    --output "$out/$name.tse.jsonl"
done
