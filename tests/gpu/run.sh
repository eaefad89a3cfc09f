#!/usr/bin/env bash
# tests/gpu/run.sh: every GPU check of refit in one bounded run on a machine with one GPU (and up
# to 16 cores), its figures printed as ratios to cudaMemcpy in the same run and gathered, with the
# versions and the verdicts, in build/gpu-results/summary.md (for bench/RESULTS.md):
#   nccl_gpu_test        every strategy's whole plan on one GPU (all plan ranks on a communicator
#                        of size 1) verified element by element and run twice; the caller's
#                        communicator; host memory; a rank that never joins (a timeout, not a
#                        hang); the copy kernel against its host run; the quantize kernels
#                        against the reference vectors through both load paths; the fp8
#                        conversion instruction against fp32_to_e4m3 for every finite fp32; FP8
#                        in flight through the executor at the senders and at the landing ranks;
#                        a step over a membership (set_membership): members filled, a
#                        non-member untouched (exclude_gone needs two GPUs: not here); the
#                        delta codec's kernels against DeltaCodec and their host bodies, bit for
#                        bit, both ways, and damaged payloads refused untouched; the NCCL
#                        executor's delta step, 16 steps of a direct and of a relayed plan with
#                        host and with device shards, every step verified on every rank and
#                        sending what the CPU codec (no zstd) sends; refit's kernels timed as
#                        `refit topo --discover --measure` times them, within cudaMemcpy's bound,
#                        and the NCCL executor's costs per operation and per step as it times them
#   quantize_gpu_bench   both quantize kernels on 2 GiB of bf16 (goal: 85 % of cudaMemcpy)
#   delta_gpu_bench      delta encode and decode of 128 MiB of bf16 at 0.1-100 % changed (no goal)
#   box_copy_bench       pack/unpack at >= 1 GiB (goals: 85 % aligned, 50 % narrow, 60 % many boxes)
#   nccl_plan_bench      a 6 GB DeepSeek-V3-like plan through the NCCL executor, per-chunk and
#                        per-step costs
#   test_python_gpu.py   the Python package built on this machine by its own python3 (torch,
#                        nanobind and scikit-build-core there), torch CUDA tensors through the
#                        NCCL executor (pytest)
# Usage:
#   tests/gpu/run.sh           on the GPU machine
#   tests/gpu/run.sh --stage   on a build machine (2 cores will do) for a GPU machine that cannot
#                              build the project (no fmt, GoogleTest, Boost, MPI there): builds the
#                              five programs here, gathers them with the libraries a bare CUDA image
#                              lacks, and the headers, CMake packages and libraries the Python
#                              extension needs (fmt, nlohmann_json, Boost.Graph's headers), in
#                              build/gpu-carry, which the GPU run takes along (carry it).
# Budget on the GPU machine: at most 6 minutes in all (Python build <= 3 min); each phase has its
# own timeout so that one stuck phase costs its bound and the others still report.
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir=build/gpu
carry_dir=build/gpu-carry
results=build/gpu-results
arch=${REFIT_CUDA_ARCH:-90}  # H100 and H200
programs=(tests/gpu/nccl_gpu_test bench/quantize_gpu_bench bench/delta_gpu_bench bench/box_copy_bench
          bench/nccl_plan_bench)

# The directory holding libnccl.so.2: the pip wheel's (the one torch loads, so that the Python
# extension and torch share one NCCL), else the CUDA toolkit's or the system's.
nccl_dir() {
  local d
  for d in "$(python3 -c 'import nvidia.nccl as n; print(n.__path__[0] + "/lib")' 2>/dev/null || true)" \
           /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu; do
    if [ -n "$d" ] && [ -e "$d/libnccl.so.2" ]; then echo "$d"; return; fi
  done
}

# CMake definitions that point at NCCL where it is not under the CUDA toolkit (the pip wheel).
nccl_defines() {
  local nccl
  nccl=$(nccl_dir)
  if [ -n "$nccl" ] && [ ! -e /usr/local/cuda/include/nccl.h ] && [ -e "$nccl/../include/nccl.h" ]; then
    echo "REFIT_NCCL_LIBRARY=$nccl/libnccl.so.2;REFIT_NCCL_INCLUDE_DIR=$(cd "$nccl/../include" && pwd)"
  fi
}

build() {
  local extra=() d
  IFS=';' read -r -a d <<<"$(nccl_defines)"
  for x in "${d[@]}"; do extra+=("-D$x"); done
  mkdir -p "$build_dir"
  timeout 1800 cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DREFIT_WITH_NCCL=ON \
    -DREFIT_WITH_UCX=OFF -DCMAKE_CUDA_ARCHITECTURES="$arch" "${extra[@]}" >"$build_dir.configure.log" 2>&1 ||
    { tail -20 "$build_dir.configure.log"; return 1; }
  timeout 3600 cmake --build "$build_dir" -j "${REFIT_GPU_JOBS:-$(nproc)}" \
    --target nccl_gpu_test quantize_gpu_bench delta_gpu_bench box_copy_bench nccl_plan_bench
}

# What the Python extension's CMake finds on a Debian build machine and a bare CUDA image lacks,
# in a tree shaped like /usr so that the packages' CMake files (which locate everything relative
# to themselves) work from there: fmt, zstd and pugixml (headers, CMake package, libraries), nlohmann_json
# (headers, CMake package), Boost (the folders of the sub-libraries the planner's Boost.Graph
# headers reach, its CMake packages, and the static libraries of Boost.Graph and of Boost.Regex,
# which Boost.Graph's static variant names as a dependency; the header-only use never pulls a
# member of either). Boost's headers go as a tarball: about 30 MB as files.
gather_python_deps() {
  local sysroot=$carry_dir/sysroot multiarch cmake_dir boost_dirs
  multiarch=$(gcc -print-multiarch)
  cmake_dir=/usr/lib/$multiarch/cmake
  mkdir -p "$sysroot/usr/include" "$sysroot/usr/lib/$multiarch/cmake" "$sysroot/usr/share/cmake"
  cp -r /usr/include/fmt /usr/include/nlohmann /usr/include/{zstd,zstd_errors,zdict}.h \
    /usr/include/{pugixml,pugiconfig}.hpp "$sysroot/usr/include/"
  cp -r "$cmake_dir"/{fmt,zstd,pugixml} "$cmake_dir"/Boost-* "$cmake_dir"/BoostDetectToolset-* \
    "$cmake_dir"/boost_{headers,graph,regex}-* "$sysroot/usr/lib/$multiarch/cmake/"
  rm -f "$sysroot/usr/lib/$multiarch/cmake"/boost_{graph,regex}-*/libboost_*-variant-shared.cmake
  cp -r /usr/share/cmake/nlohmann_json "$sysroot/usr/share/cmake/"
  cp -a /usr/lib/"$multiarch"/{libfmt.so*,libzstd.{a,so*},libpugixml.{a,so*},libboost_{graph,regex}.a} \
    "$sysroot/usr/lib/$multiarch/"
  boost_dirs=$(grep -rhoE '#include <boost/[^>]+>' core planner | sort -u | g++ -std=c++23 -M -x c++ - |
    tr ' ' '\n' | tr -d '\\' | sed -n 's|^/usr/include/\(boost/[^/]*\).*|\1|p' | sort -u)
  # shellcheck disable=SC2086  # one word per folder
  tar -C /usr/include -czf "$sysroot/boost-headers.tar.gz" $boost_dirs
}

stage() {
  build
  rm -rf "$carry_dir"
  mkdir -p "$carry_dir"
  for p in "${programs[@]}"; do cp "$build_dir/$p" "$carry_dir/"; done
  # Everything they link but glibc, libstdc++, the CUDA driver and NCCL (too large to carry).
  ldd "$carry_dir"/* | awk '/=> \// {print $3}' | sort -u |
    grep -v -E '/lib(c|m|dl|rt|pthread|gcc_s|stdc\+\+|nccl|cuda)\.so' | xargs -r cp -L -t "$carry_dir/"
  gather_python_deps
  echo "staged for the GPU machine ($(du -sh "$carry_dir" | cut -f1); carry $carry_dir):"
  ls -la "$carry_dir"
}

# Runs "$@" (a program under `timeout SECONDS`, or a function of this script, which bounds its
# own steps, when SECONDS is 0), its output to the console and LOG; records a failure.
status=0
phase() {
  local seconds=$1 log=$2
  shift 2
  echo "== $*"
  local start=$SECONDS rc=0 bound=()
  [ "$seconds" -gt 0 ] && bound=(timeout "$seconds")
  "${bound[@]}" "$@" 2>&1 | tee "$results/$log" || rc=$?
  echo "== $1: exit $rc after $((SECONDS - start)) s"
  if [ "$rc" -ne 0 ]; then status=1; fi
  echo "| $(basename "$1") | exit $rc | $((SECONDS - start)) s |" >>"$results/phases.md"
}

# The Python extension, built by this machine's python3 into build/gpu-python (the staged
# packages where the machine lacks them), then tests/gpu/test_python_gpu.py with it.
python_phase() {
  local sysroot=$PWD/$carry_dir/sysroot defines nccl prefix="" site=$PWD/build/gpu-python/site
  if [ -f "$sysroot/boost-headers.tar.gz" ] && [ ! -d "$sysroot/usr/include/boost" ]; then
    tar -C "$sysroot/usr/include" -xzf "$sysroot/boost-headers.tar.gz"
  fi
  [ -d "$sysroot/usr" ] && prefix="CMAKE_PREFIX_PATH=$sysroot/usr;"
  defines="${prefix}Boost_USE_STATIC_LIBS=ON;CMAKE_CUDA_ARCHITECTURES=$arch"
  nccl=$(nccl_defines)
  [ -n "$nccl" ] && defines="$defines;$nccl"
  rm -rf build/gpu-python
  mkdir -p build/gpu-python
  REFIT_WITH_NCCL=ON REFIT_WITH_UCX=OFF SKBUILD_CMAKE_DEFINE="$defines" SKBUILD_BUILD_DIR=build/gpu-python/build \
    CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) \
    timeout 170 python3 -m pip wheel . --no-build-isolation --no-deps --disable-pip-version-check \
    -w build/gpu-python/dist || return $?
  python3 -m pip install --no-deps --no-index --disable-pip-version-check --target "$site" \
    build/gpu-python/dist/refit-*.whl || return $?
  # The module finds the staged libfmt by LD_LIBRARY_PATH: CMake leaves directories inside the
  # project (the carry folder is) out of an installed module's run path.
  LD_LIBRARY_PATH="$sysroot/usr/lib/$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu):$LD_LIBRARY_PATH" \
    PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}" timeout 90 python3 -m pytest tests/gpu/test_python_gpu.py -v \
    -p no:cacheprovider -rs
}

run() {
  rm -rf "$results"
  mkdir -p "$results"
  local bin nccl started=$SECONDS
  nccl=$(nccl_dir)
  if [ -x "$carry_dir/nccl_gpu_test" ]; then
    bin=$carry_dir
    echo "refit: running the programs staged in $carry_dir"
  else
    echo "refit: building in $build_dir"
    build
    bin=$build_dir
  fi
  export LD_LIBRARY_PATH="$PWD/$carry_dir${nccl:+:$nccl}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  local tests=$bin/nccl_gpu_test
  [ -x "$tests" ] || tests=$bin/tests/gpu/nccl_gpu_test
  if ldd "$tests" | grep "not found"; then echo "refit: the libraries above are missing" >&2; fi
  bench() { if [ -x "$bin/$1" ]; then echo "$bin/$1"; else echo "$bin/bench/$1"; fi; }
  {
    echo "# refit GPU run, $(date -u +%Y-%m-%d\ %H:%M) UTC"
    echo
    echo "- GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null || echo unknown)"
    echo "- CUDA: $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' || echo unknown);" \
         "torch $(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none);" \
         "NCCL from ${nccl:-unknown}"
    echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  } >"$results/summary.md"
  : >"$results/phases.md"
  # The quantize vectors from this checkout, wherever the programs were built.
  REFIT_TEST_DATA_DIR=$PWD/tests/data phase 180 nccl_gpu_test.log "$tests" --gtest_color=no --gtest_brief=1
  local s=$PWD/$results/summary.md
  phase 45 quantize_gpu_bench.log "$(bench quantize_gpu_bench)" --summary "$s"
  phase 45 delta_gpu_bench.log "$(bench delta_gpu_bench)" --summary "$s"
  phase 45 box_copy_bench.log "$(bench box_copy_bench)" --summary "$s"
  phase 90 nccl_plan_bench.log "$(bench nccl_plan_bench)" --summary "$s"
  phase 0 python.log python_phase
  {
    echo
    echo "### Tests"
    echo
    echo "nccl_gpu_test: $(grep -E '^\[  (PASSED|FAILED) ' "$results/nccl_gpu_test.log" | tr '\n' ' ')"
    echo "as refit topo --discover --measure times it: $(grep -E '^NCCL executor on ' "$results/nccl_gpu_test.log" || echo 'not timed')"
    echo "test_python_gpu.py: $(grep -E '^=+ .* in [0-9.]+s' "$results/python.log" | tail -1 | tr -d '=')"
    echo
    echo "| phase | exit | time |"
    echo "|---|---|---|"
    cat "$results/phases.md"
    echo
    echo "All phases: $((SECONDS - started)) s, status $status."
  } >>"$results/summary.md"
  echo
  cat "$results/summary.md"
  echo "refit: GPU checks finished with status $status; $results/summary.md and the logs beside it"
  return "$status"
}

case "${1:-}" in
  --stage) stage ;;
  "") run ;;
  *) echo "usage: tests/gpu/run.sh [--stage]" >&2; exit 2 ;;
esac
