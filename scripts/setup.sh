# Shared by ./run and ./test: install what is missing, then configure and build once
# (incrementally after). Sourced, not executed. All output goes to stderr so that
# `./run ... --json` keeps stdout to the JSON object alone.

REFIT_PACKAGES=(
  cmake ninja-build g++ pkg-config
  libfmt-dev nlohmann-json3-dev libcli11-dev libboost-graph-dev libpugixml-dev
  libgtest-dev libgmock-dev libbenchmark-dev clang-format
  libucx-dev ucx-utils libopenmpi-dev openmpi-bin
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
