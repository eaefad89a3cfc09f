#!/usr/bin/env bash
# tests/gpu/run.sh: every GPU check of the NCCL executor in one bounded run, on a machine with one
# GPU (and up to 16 cores). It builds two programs (or takes them ready-made from build/gpu-carry)
# and runs them:
#   nccl_gpu_test   every strategy's whole plan on one GPU (all plan ranks on a communicator of
#                   size 1), verified element by element, run twice; the caller's communicator
#                   (adopt); a rank that never joins (a timeout, not a hang); the copy kernel
#                   against its host run; the quantize kernel against the reference vectors, and
#                   its throughput (printed); FP8 in flight through the executor (bf16 training
#                   boxes quantised by the kernel, every fp8 byte and scale checked)
#   box_copy_bench  pack/unpack throughput of the copy kernel against cudaMemcpy device to device
# Usage:
#   tests/gpu/run.sh           on the GPU machine
#   tests/gpu/run.sh --stage   on a build machine without a GPU, for a GPU machine that cannot
#                              build the project (no fmt, GoogleTest, Boost, MPI there): builds both
#                              here and gathers them, with the libraries a bare CUDA image lacks, in
#                              build/gpu-carry, which the GPU run then takes along.
# Budget: build <= 5 min, tests <= 4 min, benchmark <= 2 min; in practice well under 2 min in all.
set -euo pipefail
cd "$(dirname "$0")/../.."
build_dir=build/gpu
carry_dir=build/gpu-carry
arch=${REFIT_CUDA_ARCH:-90}  # H100 and H200

# The directory holding libnccl.so.2: the CUDA toolkit's, the system's, or the pip wheel's.
nccl_dir() {
  local d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/lib/x86_64-linux-gnu \
           "$(python3 -c 'import nvidia.nccl as n; print(n.__path__[0] + "/lib")' 2>/dev/null || true)"; do
    if [ -n "$d" ] && [ -e "$d/libnccl.so.2" ]; then echo "$d"; return; fi
  done
}

build() {
  local nccl extra=()
  nccl=$(nccl_dir)
  if [ -n "$nccl" ] && [ ! -e /usr/local/cuda/include/nccl.h ] && [ -e "$nccl/../include/nccl.h" ]; then
    extra=(-DREFIT_NCCL_LIBRARY="$nccl/libnccl.so.2" -DREFIT_NCCL_INCLUDE_DIR="$nccl/../include")
  fi
  timeout 300 cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DREFIT_WITH_NCCL=ON \
    -DREFIT_WITH_UCX=OFF -DCMAKE_CUDA_ARCHITECTURES="$arch" "${extra[@]}" >"$build_dir.configure.log" 2>&1 ||
    { tail -20 "$build_dir.configure.log"; return 1; }
  timeout 300 cmake --build "$build_dir" --target nccl_gpu_test box_copy_bench -j "${REFIT_GPU_JOBS:-$(nproc)}"
}

stage() {
  mkdir -p "$build_dir"
  build
  rm -rf "$carry_dir"
  mkdir -p "$carry_dir"
  cp "$build_dir/tests/gpu/nccl_gpu_test" "$build_dir/bench/box_copy_bench" "$carry_dir/"
  # Everything they link but glibc, libstdc++, the CUDA driver and NCCL (too large to carry).
  ldd "$carry_dir"/* | awk '/=> \// {print $3}' | sort -u |
    grep -v -E '/lib(c|m|dl|rt|pthread|gcc_s|stdc\+\+|nccl|cuda)\.so' | xargs -r cp -L -t "$carry_dir/"
  echo "staged for the GPU machine:"; ls -la "$carry_dir"
}

run() {
  nvidia-smi -L || echo "nvidia-smi: not available"
  local bin nccl
  nccl=$(nccl_dir)
  if [ -x "$carry_dir/nccl_gpu_test" ]; then
    bin=$carry_dir
    echo "refit: running the programs staged in $carry_dir"
  else
    mkdir -p "$build_dir"
    echo "refit: building in $build_dir"
    build
    bin=$build_dir
  fi
  export LD_LIBRARY_PATH="$carry_dir${nccl:+:$nccl}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  local tests=$bin/nccl_gpu_test bench=$bin/box_copy_bench
  [ -x "$tests" ] || tests=$bin/tests/gpu/nccl_gpu_test
  [ -x "$bench" ] || bench=$bin/bench/box_copy_bench
  if ldd "$tests" | grep "not found"; then echo "refit: the libraries above are missing" >&2; fi
  local status=0
  echo "== nccl_gpu_test"
  # The quantize vectors from this checkout, wherever the programs were built.
  REFIT_TEST_DATA_DIR=$PWD/tests/data timeout 240 "$tests" --gtest_color=no || status=$?
  echo "== box_copy_bench"
  timeout 120 "$bench" || status=$?
  echo "refit: GPU checks finished with status $status"
  return "$status"
}

case "${1:-}" in
  --stage) stage ;;
  "") run ;;
  *) echo "usage: tests/gpu/run.sh [--stage]" >&2; exit 2 ;;
esac
