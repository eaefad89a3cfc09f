#!/usr/bin/env bash
# Delta refit end to end under mpirun (UCX): bytes and time per step against the change fraction,
# next to the dense refit of the same plan. A mid-size model (tests/data/models/mid-qwen3.json,
# 0.43 GB of bf16) from Megatron tp=2 to vLLM tp=2 (4 processes), the direct plan (the delta
# executor takes no relays): for each change fraction, `refit run --delta F --iterations STEPS`
# (step 0 moves the initial weights densely, the later ones only what changed), reporting the
# median over the later steps of the bytes sent, the slowest rank's wall and its encode, decode
# and exchange seconds; then `refit run` of the same plan without --delta (dense, STEPS
# iterations, median). Prints one table; RUNS repeats each run and takes the median of medians.
# QUANTIZE=fp8-block128 or mxfp8: FP8 in flight, quantized at the senders (--quantize-at sender),
# delta and dense alike: the deltas are of the fp8 values and scales the senders make;
# QUANTIZE_AT=training: trained in fp8 instead (the training ranks hold the fp8 they make of a bf16
# master, and quantize nothing during the refit).
#
#   bench/run_delta_bench.sh [BUILD_DIR]   (default build/release; env RUNS=1 STEPS=4
#                                           FRACTIONS="0.001 0.01 0.03 0.1 0.3 1" QUANTIZE=
#                                           QUANTIZE_AT=sender)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/release}
RUNS=${RUNS:-1}
STEPS=${STEPS:-4}
FRACTIONS=${FRACTIONS:-0.001 0.01 0.03 0.1 0.3 1}
REFIT=$BUILD/cli/refit
[ -x "$REFIT" ] || { echo "missing $REFIT: cmake --build $BUILD --target refit" >&2; exit 2; }
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
PROBLEM=(--model tests/data/models/mid-qwen3.json --train tp=2 --infer tp=2 --strategy direct --timeout 300)
QUANTIZE=${QUANTIZE:-}
QUANTIZE_AT=${QUANTIZE_AT:-sender}
if [ -n "$QUANTIZE" ]; then PROBLEM+=(--quantize "$QUANTIZE" --quantize-at "$QUANTIZE_AT"); fi

# --verify checks every step outside the timed execution: the figures are those of exact refits.
run() { mpirun --oversubscribe -np 4 "$REFIT" run "${PROBLEM[@]}" --iterations "$STEPS" --verify --json "$@"; }

# The median over runs of each field of the later steps' medians (python3 reads the JSON).
summarise() {
  python3 -c '
import json, statistics, sys
runs = [json.loads(line) for line in sys.stdin if line.strip()]
def later(run, key): return statistics.median(s[key] for s in run["delta"]["steps"][1:])
def over(key): return statistics.median(later(r, key) for r in runs)
dense = runs[0]["delta"]["steps"][0]["dense_bytes"]
first = statistics.median(r["delta"]["steps"][0]["seconds"] for r in runs)
print("%9.3f %% %10.3f MB %8.3f s %8.3f %8.3f %8.3f %8.3f" % (over("bytes") / dense * 100, over("bytes") / 1e6,
      over("seconds"), over("encode_seconds"), over("decode_seconds"), over("exchange_seconds"), first))
'
}

printf '%-9s %11s %13s %10s %8s %8s %8s %8s\n' changed "bytes/dense" "bytes" "step" encode decode exchange "step 0"
for f in $FRACTIONS; do
  for ((i = 0; i < RUNS; i++)); do run --delta "$f"; done | { printf '%-9s ' "$f"; summarise; }
done
dense=$(for ((i = 0; i < RUNS; i++)); do run; done | python3 -c '
import json, statistics, sys
print(statistics.median(json.loads(line)["seconds"] for line in sys.stdin if line.strip()))')
printf 'dense refit of the same plan, no delta: %.3f s per step (median)\n' "$dense"
