#!/usr/bin/env bash
# The UCX executor's throughput on this machine, next to what UCX and MPI reach on it:
#   1. refit run moving ~2 GB from 2 training to 2 inference processes: a manifest of TENSORS
#      bf16 [8192, 8192] tensors, "rows" (each inference shard is rows of one training shard:
#      one put per chunk) and "strided" (column shards to row shards: one put per 8 KiB row);
#      shards live in memory the executor allocated (as `refit run` does), one plan is prepared
#      and executed ITERATIONS times (as an RL job refits every step): the median execution and
#      the first are reported; "rows" once more with --no-direct-stores (every put through
#      ucp_put_nbx, where by default puts into the peers' shared memory are streaming stores);
#   2. ucx_perftest -t ucp_put_bw, one pair of processes and two pairs at once (refit runs two
#      senders), twice: like for like, each sender putting as many bytes as refit's senders move
#      from a buffer that large (cold memory, as refit's shards are), and at refit's chunk size
#      from one chunk-sized buffer reused (which stays in the CPU's last-level cache, so that
#      ratio says more about caches than about refit; the cache sizes are printed);
#   3. bench/mpi_bcast_bench: rank 0 gathers the other half and MPI_Bcasts all bytes to every rank.
# Prints the median of RUNS runs of each, and the ratios.
#
#   bench/run_ucx_bench.sh [BUILD_DIR]      (default build/release; env RUNS=5 TENSORS=16 CHUNK=8388608 ITERATIONS=3,
#                                            MPIRUN_FLAGS=--oversubscribe: 4 processes on fewer cores)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build/release}
RUNS=${RUNS:-5}
TENSORS=${TENSORS:-16}
CHUNK=${CHUNK:-8388608}
ITERATIONS=${ITERATIONS:-3}
read -r -a MPIRUN <<<"mpirun ${MPIRUN_FLAGS---oversubscribe}"
REFIT=$BUILD/cli/refit
BCAST=$BUILD/bench/mpi_bcast_bench
BYTES=$((TENSORS * 8192 * 8192 * 2))
for tool in "$REFIT" "$BCAST"; do
  [ -x "$tool" ] || { echo "missing $tool: cmake --build $BUILD --target refit mpi_bcast_bench" >&2; exit 2; }
done
command -v ucx_perftest >/dev/null || { echo "missing ucx_perftest (Debian: ucx-utils)" >&2; exit 2; }
if [ "$(id -u)" -eq 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

manifest() {  # manifest NAME SOURCE_PLACEMENT DESTINATION_PLACEMENT
  local sep="" i
  {
    printf '{"format":"refit-manifest","version":1,"source_ranks":2,"destination_ranks":2,"tensors":['
    for ((i = 0; i < TENSORS; i++)); do
      printf '%s{"name":"w%d","shape":[8192,8192],"dtype":"bf16",' "$sep" "$i"
      printf '"source":{"mesh":[2],"placements":["%s"]},"destination":{"mesh":[2],"placements":["%s"]}}' "$2" "$3"
      sep=","
    done
    printf ']}\n'
  } >"$WORK/$1.json"
}

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
field() { grep -o "\"$1\":[0-9.e+-]*" | head -1 | cut -d: -f2; }

refit_seconds() {  # refit_seconds MANIFEST NAME [FLAGS]: one run; appends its median and first execution's seconds
  local json
  json=$("${MPIRUN[@]}" -np 4 "$REFIT" run --manifest "$WORK/$1.json" --chunk "$CHUNK" --iterations "$ITERATIONS" --json ${3-})
  field seconds <<<"$json" >>"$WORK/$2.s"
  grep -o '"iteration_seconds":\[[0-9.e+-]*' <<<"$json" | cut -d[ -f2 >>"$WORK/$2.first"
}

perftest_gbps() {  # perftest_gbps PORT SIZE ITERATIONS: one client run against a server on PORT, in GB/s
  ucx_perftest 127.0.0.1 -p "$1" -t ucp_put_bw -s "$2" -n "$3" -w 1 2>/dev/null |
    awk '/Final:/ {printf "%.4f\n", $6 * 1048576 / 1e9}'
}

perftest_pairs() {  # perftest_pairs N SIZE ITERATIONS: N server/client pairs at once, their summed GB/s
  local pids=() ports=() p i
  for ((i = 0; i < $1; i++)); do
    p=$((20000 + RANDOM % 20000)); ports+=("$p")
    ucx_perftest -p "$p" >/dev/null 2>&1 & pids+=($!)
  done
  sleep 1
  for p in "${ports[@]}"; do perftest_gbps "$p" "$2" "$3" >"$WORK/pair.$p" & done
  wait "${pids[@]}" 2>/dev/null || true
  wait
  cat "$WORK"/pair.* | awk '{s += $1} END {printf "%.4f\n", s}'
  rm -f "$WORK"/pair.*
}

manifest rows S0 S0
manifest strided S1 S0
SENT=$((BYTES / 2))  # what each of refit's two senders moves
echo "refit UCX benchmark: $BYTES bytes ($TENSORS bf16 [8192, 8192] tensors), 2 -> 2 processes, chunk $CHUNK, $RUNS runs" >&2
caches=$(lscpu 2>/dev/null | awk -F: '/^L[23] cache/ {gsub(/^ +/, "", $2); printf "%s%s %s", sep, $1, $2; sep = ", "}')
for ((r = 0; r < RUNS; r++)); do
  refit_seconds rows rows
  refit_seconds strided strided
  refit_seconds rows ucx --no-direct-stores
  perftest_pairs 1 "$SENT" 3 >>"$WORK/cold1.g"
  perftest_pairs 2 "$SENT" 3 >>"$WORK/cold2.g"
  perftest_pairs 1 "$CHUNK" $((SENT / CHUNK)) >>"$WORK/perf1.g"
  perftest_pairs 2 "$CHUNK" $((SENT / CHUNK)) >>"$WORK/perf2.g"
done
"${MPIRUN[@]}" -np 4 "$BCAST" --bytes "$BYTES" --iterations "$RUNS" | awk '{print $2}' >"$WORK/bcast.s"

rows=$(median <"$WORK/rows.s"); strided=$(median <"$WORK/strided.s"); ucx=$(median <"$WORK/ucx.s")
rows1=$(median <"$WORK/rows.first"); strided1=$(median <"$WORK/strided.first")
perf1=$(median <"$WORK/perf1.g"); perf2=$(median <"$WORK/perf2.g"); bcast=$(median <"$WORK/bcast.s")
cold1=$(median <"$WORK/cold1.g"); cold2=$(median <"$WORK/cold2.g")
echo "CPU caches: ${caches:-unknown}"
awk -v b="$BYTES" -v rows="$rows" -v ucx="$ucx" -v strided="$strided" -v rows1="$rows1" -v strided1="$strided1" \
    -v p1="$perf1" -v p2="$perf2" -v c1="$cold1" -v c2="$cold2" -v bc="$bcast" -v sent="$SENT" -v chunk="$CHUNK" 'BEGIN {
  gr = b / rows / 1e9; gs = b / strided / 1e9; gb = b / bc / 1e9
  printf "%-48s %9s %9s\n", "median of runs", "seconds", "GB/s"
  printf "%-48s %9.3f %9.2f\n", "refit run, rows (one put per chunk)", rows, gr
  printf "%-48s %9.3f %9.2f\n", "  first execution after prepare", rows1, b / rows1 / 1e9
  printf "%-48s %9.3f %9.2f\n", "refit run, rows, --no-direct-stores", ucx, b / ucx / 1e9
  printf "%-48s %9.3f %9.2f\n", "refit run, strided (one put per 8 KiB row)", strided, gs
  printf "%-48s %9.3f %9.2f\n", "  first execution after prepare", strided1, b / strided1 / 1e9
  printf "%-48s %9s %9.2f\n", sprintf("ucx_perftest put, %d-byte buffer, 1 pair", sent), "", c1
  printf "%-48s %9s %9.2f\n", sprintf("ucx_perftest put, %d-byte buffer, 2 pairs", sent), "", c2
  printf "%-48s %9s %9.2f\n", sprintf("ucx_perftest put, %d-byte buffer, 1 pair", chunk), "", p1
  printf "%-48s %9s %9.2f\n", sprintf("ucx_perftest put, %d-byte buffer, 2 pairs", chunk), "", p2
  printf "%-48s %9.3f %9.2f\n", "MPI gather + MPI_Bcast (mpi_bcast_bench)", bc, gb
  printf "like for like (perftest buffers as large as what each sender moves):\n"
  printf "  refit rows / perftest 2 pairs = %.2f   (goal >= 0.9)\n", gr / c2
  printf "  refit rows / perftest 1 pair  = %.2f\n", gr / c1
  printf "chunk-sized perftest buffers (cache-resident):\n"
  printf "  refit rows / perftest 2 pairs = %.2f\n", gr / p2
  printf "  refit rows / perftest 1 pair  = %.2f\n", gr / p1
  printf "refit rows vs MPI_Bcast       = %.2fx faster\n", bc / rows
  printf "refit strided vs MPI_Bcast    = %.2fx faster\n", bc / strided
}'
