#!/usr/bin/env bash
# A full BLiMP run in parts, one paradigm a command (docs/performance.md, "A user-level run"):
# `synlm evaluate-syntax --benchmark blimp --paradigms UID` for each of BLiMP's paradigms in
# UID order, its summary in OUT_DIR/UID.json, its records in OUT_DIR/UID.jsonl, its log (the
# wall and CPU time last) in OUT_DIR/UID.log and its scores journaled in OUT_DIR/journal/UID,
# so that a part stopped half way goes on from its journal. A finished part is kept
# (benchmarks/once.sh): the script run again goes on where it stopped, on this machine or,
# OUT_DIR copied, on another. PROCESSES above 1 runs each part under `torchrun
# --nproc_per_node PROCESSES`; the FLAGS after it go to every part (the search: --beam-size
# 100 --word-beam-size 10 --shift-size 1 --batch-size 16). At the end the finished parts are
# joined into one run (`evaluate-syntax --results`, docs/syntactic-evaluation.md):
# OUT_DIR/report.json and the tables in OUT_DIR/report.
#   SYNLM_DATA_DIR=/path/to/data bash benchmarks/blimp_parts.sh RUN OUT_DIR [PROCESSES] [FLAGS...]
set -euo pipefail
run=${1:?a checkpoint or run folder}
out=${2:?an output folder}
processes=${3:-1}
shift $(($# < 3 ? $# : 3))
source "$(dirname "$0")/once.sh"
if [ "$processes" -gt 1 ]; then
  synlm_command=(torchrun --nproc_per_node "$processes" "$(command -v synlm)")
fi
uids=$(python -c "import sys
from synlm.errors import SynLMError
from synlm.tse.blimp import paradigm_uids
try:
    print(*paradigm_uids())
except SynLMError as error:
    sys.exit(f'blimp_parts.sh: {error}')")
mkdir -p "$out/journal"
parts=()
for uid in $uids; do
  score_once "$out/$uid.json" "$out/$uid.log" "$uid" evaluate-syntax --ckpt_path "$run" \
    --benchmark blimp --paradigms "$uid" --journal "$out/journal/$uid" \
    --output "$out/$uid.jsonl" --no-progress "$@"
  parts+=("$out/$uid.json")
done
synlm evaluate-syntax --results "${parts[@]}" --report "$out/report" > "$out/report.json" \
  2> "$out/report.log"
