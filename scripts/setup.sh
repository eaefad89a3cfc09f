# Shared by ./run and ./test: install what is missing, then configure and build once
# (incrementally after). Sourced, not executed. All output goes to stderr so that
# `./run ... --json` keeps stdout to the JSON object alone.

# clang-19: the sanitize preset (ASan, UBSan, libFuzzer); Debian 12's clang 14 lacks the C++20
# concepts that GCC 12's <expected> requires. doxygen: the C++ API reference of the docs site.
# libzstd-dev: the entropy stage of the delta codec (delta/). ccache: ./test compiles the library
# twice (the release tree, then the Python wheel's tree), the second time from the cache.
REFIT_PACKAGES=(
  cmake ninja-build g++ pkg-config ccache
  libfmt-dev nlohmann-json3-dev libcli11-dev libboost-graph-dev libpugixml-dev
  libgtest-dev libgmock-dev libbenchmark-dev clang-format
  libzstd-dev
  libucx-dev ucx-utils libopenmpi-dev openmpi-bin
  python3-venv python3-dev
  clang-19 libclang-rt-19-dev
  doxygen
)

refit_missing_packages() {
  local missing=() p
  for p in "${REFIT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  echo "${missing[@]}"
}

refit_install_packages() {
  local missing
  missing=$(refit_missing_packages)
  [ -z "$missing" ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "refit: missing Debian packages; run as root:" >&2
    echo "  apt-get update && apt-get install -y $missing" >&2
    return 1
  fi
  echo "refit: installing $missing" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >&2 && apt-get install -y -q --no-install-recommends $missing >&2
}

# refit_build PRESET [TARGET...]
refit_build() {
  local preset=$1; shift
  if [ ! -f "build/$preset/build.ninja" ]; then
    cmake --preset "$preset" >&2 || return 1
  fi
  cmake --build --preset "$preset" ${1:+--target "$@"} >&2
}

# refit_start NAME COMMAND...: runs COMMAND in the background, its output to build/NAME.log, so
# that ./test overlaps work that waits on the network (the venv's downloads) or fills idle cores
# (a build at the lowest priority beside ctest) with its next step; refit_join NAME waits for it,
# prints its log and returns its status. The job gets a process group of its own (monitor mode,
# for the one launch), so that one still running when the shell exits (a step failed before the
# join) is stopped whole, pip or ninja and their children.
declare -gA REFIT_JOBS=()
refit_start() {
  local name=$1; shift
  mkdir -p build
  echo "refit: $name runs in the background (build/$name.log)" >&2
  set -m
  "$@" < /dev/null > "build/$name.log" 2>&1 &
  REFIT_JOBS[$name]=$!
  set +m
  trap 'refit_stop_jobs' EXIT
}

refit_join() {
  local name=$1 status=0
  wait "${REFIT_JOBS[$name]}" || status=$?
  unset "REFIT_JOBS[$name]"
  cat "build/$name.log" >&2
  [ "$status" -eq 0 ] || echo "refit: $name failed (exit $status; build/$name.log)" >&2
  return "$status"
}

refit_stop_jobs() {
  local pid
  for pid in "${REFIT_JOBS[@]}"; do
    kill -TERM -- "-$pid" 2>/dev/null
  done
  return 0
}

# The project's Python environment, .venv (git-ignored), from Debian's python3 and PyPI: what
# builds the Python package (scikit-build-core, nanobind) and what its tests use (numpy, pytest,
# matplotlib, pandas, mpi4py, torch; ml_dtypes for the fp8 reference of tests/quantize), and what
# builds and checks the documentation site (sphinx with myst-parser for the Markdown pages, breathe
# for the C++ reference, the furo theme; jsonschema for the file formats' schemas). Installed
# once; later runs only check that it is there.
REFIT_VENV=.venv
REFIT_FRAMEWORK_PACKAGES=(vllm==0.33.0 megatron-core==0.16.1)
REFIT_PYTHON_PACKAGES=(scikit-build-core nanobind numpy pytest matplotlib pandas mpi4py ml_dtypes
                       sphinx myst-parser breathe furo jsonschema)

refit_python_env() {
  # A venv whose set-up was stopped half way (./test stops it when the build fails) may lack pip.
  if [ -x "$REFIT_VENV/bin/python" ] && ! "$REFIT_VENV/bin/python" -m pip --version >/dev/null 2>&1; then
    echo "refit: $REFIT_VENV has no working pip (a set-up stopped half way?): made again" >&2
    rm -rf "$REFIT_VENV"
  fi
  if [ ! -x "$REFIT_VENV/bin/python" ]; then
    echo "refit: creating $REFIT_VENV with $(/usr/bin/python3 --version)" >&2
    /usr/bin/python3 -m venv "$REFIT_VENV" >&2 || return 1
  fi
  local py=$REFIT_VENV/bin/python
  if ! "$py" -c "import scikit_build_core, nanobind, numpy, pytest, matplotlib, pandas, mpi4py, ml_dtypes, sphinx, myst_parser, breathe, furo, jsonschema" 2>/dev/null; then
    echo "refit: installing ${REFIT_PYTHON_PACKAGES[*]} into $REFIT_VENV" >&2
    "$py" -m pip install -q --disable-pip-version-check "${REFIT_PYTHON_PACKAGES[@]}" >&2 || return 1
  fi
  # torch for the tests (CPU tensors, torchrun, torch.distributed) comes with the frameworks the
  # integration tests drive (tests/python/integrations): vLLM pins the torch it was built against
  # (vllm 0.33.0: torch==2.14.0, numba's numpy), so torch is the one vLLM runs with, not the newest.
  # PyPI's Linux wheels bring their CUDA libraries along (about 9 GB installed, several minutes,
  # once). vllm 0.34.0 needs a flashinfer-python that PyPI lacks; 0.33.0 is the newest that
  # installs. megatron-core 0.16.1 is the newest for this Python (3.11). Later runs check versions.
  if ! "$py" - "${REFIT_FRAMEWORK_PACKAGES[@]}" 2>/dev/null <<'CHECK'
import sys
from importlib.metadata import version
sys.exit(any(version(name) != want for name, want in (p.split("==") for p in sys.argv[1:])))
CHECK
  then
    echo "refit: installing ${REFIT_FRAMEWORK_PACKAGES[*]} (and the torch they need) into $REFIT_VENV (once; several GB)" >&2
    "$py" -m pip install -q --disable-pip-version-check "${REFIT_FRAMEWORK_PACKAGES[@]}" >&2 || return 1
  fi
}
