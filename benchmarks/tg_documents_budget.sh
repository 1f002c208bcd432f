#!/usr/bin/env bash
# Transformer Grammars over documents beside Transformer Grammars over sentences at one CPU
# budget (Sartran et al. 2022 train both): on the NLTK WSJ sample (wsj_0001-0179 train,
# 0180-0189 validate, 0190-0199 test), the sentence-level TG of configs/tg.yaml (PTB size:
# 4 layers of width 256, 4 heads) on configs/data/nltk_sample_trees.yaml, 32 sentences a
# batch, and the document-level TG of configs/tg_document.yaml (the same model, a row the
# trees of one file under a root DOC, read in chunks of 256 tokens with 256 memory slots),
# 2 documents a batch, read ORDER (chunked: each batch's documents from their starts;
# streamed: documents back to back through the rows, the memory carried from batch to
# batch, a batch one chunk a row), both for EPOCHS epochs (the same training words). Each
# seed of SEEDS trains both (--seed_everything), then tests the best checkpoint on the test
# files:
#   doc_ppl   exp(-sum log p(x, y) / words) over the test documents, the joint over the
#             gold trees per word: the document model reads each document whole, the
#             sentence model each sentence alone (its test/joint_ppl, action_ppl and
#             word_ppl give it: the ratio of actions to words follows from the three);
#   sent_ppl  the same with every sentence read alone (the document model: each sentence a
#             document of its own, --data.max_document_words=1);
# and writes OUT_DIR/table.md. A finished step is kept (benchmarks/once.sh).
#   SYNLM_DATA_DIR=/path/to/data OMP_NUM_THREADS=1 bash benchmarks/tg_documents_budget.sh \
#     OUT_DIR [EPOCHS] [SEEDS] [ORDER]
set -euo pipefail
out=${1:?output folder}
epochs=${2:-2}
seeds=${3:-1 2}
order=${4:-chunked}
mkdir -p "$out"
source "$(dirname "$0")/once.sh"
common=(--trainer.max_epochs="$epochs" --trainer.enable_progress_bar=false
        --trainer.val_check_interval=1.0)
tested() {  # folder label checkpoint synlm-test-args...: the test metrics in folder/label.csv
  local dir=$1 label=$2 ckpt=$3
  shift 3
  if [ -s "$dir/$label.csv" ]; then return; fi
  rm -rf "$dir/$label.test"
  /usr/bin/time -f "$label %e s" synlm test --ckpt_path "$ckpt" \
    --trainer.default_root_dir="$dir/$label.test" --trainer.enable_progress_bar=false "$@" \
    > "$dir/$label.test.log" 2>&1
  cp "$dir/$label.test"/version_*/metrics.csv "$dir/$label.csv"
}
for seed in $seeds; do
  dir=$out/seed_$seed
  mkdir -p "$dir"
  fit_once "$dir/sentence" "$dir/sentence.log" sentence --config configs/tg.yaml \
    --config configs/data/nltk_sample_trees.yaml --data.batch_size=32 "${common[@]}" \
    --seed_everything="$seed"
  fit_once "$dir/document" "$dir/document.log" document --config configs/tg_document.yaml \
    --data.document_order="$order" "${common[@]}" --seed_everything="$seed"
  # the sentence model's test without its search's perplexity and parses: beam 1
  tested "$dir" sentence "$dir/sentence" --model.init_args.beam_size=1 \
    --model.init_args.word_beam_size=1 --model.init_args.shift_size=1
  tested "$dir" document "$dir/document"
  tested "$dir" document_sentences "$dir/document" --data.max_document_words=1
done
python - "$out" "$order" $seeds > "$out/table.md" <<'PY'
import csv, math, statistics, sys
from pathlib import Path

out, order, seeds = Path(sys.argv[1]), sys.argv[2], sys.argv[3:]


def metrics(path: Path) -> dict[str, float]:
    rows = list(csv.DictReader(path.open()))
    return {k: float(v) for row in rows for k, v in row.items() if v not in ("", None)}


def per_word(m: dict[str, float]) -> float:
    """exp(-(action + word log-likelihood) / words) from the three perplexities."""
    j, a, w = (math.log(m[f"test/{k}_ppl"]) for k in ("joint", "action", "word"))
    ratio = (w - j) / (j - a)  # actions per word
    return math.exp(ratio * a + w)


documents = f"TG, documents ({order})"
rows = {"TG, sentences": [], documents: []}
for seed in seeds:
    d = out / f"seed_{seed}"
    s = metrics(d / "sentence.csv")
    rows["TG, sentences"].append((per_word(s), per_word(s)))
    doc, alone = metrics(d / "document.csv"), metrics(d / "document_sentences.csv")
    rows[documents].append((doc["test/doc_ppl"], alone["test/doc_ppl"]))
print("| model | doc_ppl | sent_ppl | seeds |")
print("|---|---|---|---|")
for name, values in rows.items():
    cells = []
    for k in (0, 1):
        xs = [v[k] for v in values]
        spread = f" ± {statistics.stdev(xs):.1f}" if len(xs) > 1 else ""
        cells.append(f"{statistics.mean(xs):.1f}{spread}")
    print(f"| {name} | {cells[0]} | {cells[1]} | {', '.join(seeds)} |")
PY
cat "$out/table.md"
