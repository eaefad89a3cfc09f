#!/usr/bin/env bash
# tests/python/build_wheel.sh VENV: builds the refit wheel from this source tree as `pip install .`
# does (scikit-build-core and the project's CMake; build dir under build/python, kept between
# runs so that a rebuild is incremental) and installs it into VENV, a virtual environment made
# afresh each time. The tools and the test dependencies (numpy, torch, pytest, ...) come from the
# project's own venv (.venv, which ./test sets up): no build isolation, nothing downloaded, and
# VENV sees the project venv's packages through a .pth file instead of installing them again.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=$1
project=$root/.venv
if [ ! -x "$project/bin/python" ]; then
  echo "no $project: ./test sets it up (scripts/setup.sh, refit_python_env)" >&2
  exit 1
fi
dist=$root/build/python/dist
rm -rf "$dist"
# The NCCL executor is left out of the test wheel: its CUDA kernels would double the build time
# and no GPU is here to run it (REFIT_WITH_NCCL=AUTO pip install . builds it where CUDA is).
# The compilers are named as CMake names them for the release tree (c++, cc; left to itself the
# wheel's build picks x86_64-linux-gnu-g++), because ccache keys on the compiler's name: so named,
# the wheel's library objects come from the cache the release build filled.
CXX=${CXX:-c++} CC=${CC:-cc} \
REFIT_WITH_NCCL=${REFIT_WITH_NCCL:-OFF} CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
  "$project/bin/pip" wheel "$root" --no-build-isolation --no-deps --disable-pip-version-check -w "$dist"
# Where scikit-build-core built it (build/python/<wheel tag>), for the library-only checks.
ln -sfn "$(dirname "$(ls -t "$root"/build/python/*/CMakeCache.txt | head -1)")" "$root/build/python/last-build"

rm -rf "$venv"
/usr/bin/python3 -m venv "$venv"
purelib() { "$1" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'; }
purelib "$project/bin/python" > "$(purelib "$venv/bin/python")/refit-test-dependencies.pth"
"$venv/bin/pip" install --no-deps --no-index --disable-pip-version-check "$dist"/refit-*.whl
"$venv/bin/python" -c 'import refit; print("refit", refit.__version__, "from", refit.__file__, "executors", refit.executors())'
