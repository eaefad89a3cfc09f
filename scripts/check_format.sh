#!/usr/bin/env bash
# Checks that every C++ and CUDA source tracked by git follows .clang-format.
#   scripts/check_format.sh          lists the files that differ and exits 1 if any does
#   scripts/check_format.sh --fix    rewrites them in place
set -euo pipefail
cd "$(dirname "$0")/.."
formatter=${CLANG_FORMAT:-clang-format}
mapfile -t files < <(git ls-files --cached --others --exclude-standard '*.cc' '*.h' '*.cu' '*.cuh' 2>/dev/null || find . -path ./build -prune -o \( -name '*.cc' -o -name '*.h' -o -name '*.cu' \) -print)
if [ "${1:-}" = "--fix" ]; then
  "$formatter" -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$formatter" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "not formatted as .clang-format says (fix with scripts/check_format.sh --fix):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "format: ${#files[@]} files follow .clang-format"
