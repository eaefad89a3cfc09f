#!/usr/bin/env bash
# run_fuzz.sh TARGET CORPUS INPUTS [SEED_FILE...]: what the fuzz_* tests run. The seed files
# (tests/data files of the target's format) are copied into CORPUS (in the build folder, grown by
# earlier runs); libFuzzer replays CORPUS and INPUTS (tests/data/fuzz/<target>: hand-written seeds
# and the input of every earlier finding), then mutates them for REFIT_FUZZ_SECONDS (default 15)
# seconds. A crash, leak, sanitizer report, an input slower than 10 s or one that needs over 2 GB
# fails the test and leaves the input as crash-*/leak-*/timeout-*/oom-* in the working folder.
set -euo pipefail
target=$1 corpus=$2 inputs=$3
shift 3
mkdir -p "$corpus"
[ $# -eq 0 ] || cp -f "$@" "$corpus"/
dirs=("$corpus")
[ -d "$inputs" ] && dirs+=("$inputs")
exec "$target" -max_total_time="${REFIT_FUZZ_SECONDS:-15}" -timeout=10 -rss_limit_mb=2048 \
  -max_len=65536 -print_final_stats=1 "${dirs[@]}"
