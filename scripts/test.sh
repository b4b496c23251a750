#!/usr/bin/env bash
# Sets up, builds and runs the test suite (lit); the README's test command and
# what CI runs. The suite keeps one parity case per feature and strategy that
# can fail on its own; `scripts/test.sh --full` adds the exhaustive sweeps
# (every strategy x rank count x schedule product; run it before a
# release-sized change).
set -euo pipefail
cd "$(dirname "$0")/.."
LIT_ARGS=()
for arg in "$@"; do
  case "$arg" in
    --full) LIT_ARGS+=(--param full=1) ;;
    *) echo "usage: scripts/test.sh [--full]" >&2; exit 2 ;;
  esac
done
scripts/setup.sh
scripts/build.sh
set +e
/usr/lib/llvm-22/bin/lit -sv --time-tests "${LIT_ARGS[@]}" build/test 2>&1 | tee build/lit.log
status=${PIPESTATUS[0]}
set -e
passed=$(grep -oP '^\s*Passed\s*:\s*\K[0-9]+' build/lit.log || echo 0)
failed=$(grep -oP '^\s*Failed\s*:\s*\K[0-9]+' build/lit.log || echo 0)
skipped=$(grep -oP '^\s*Unsupported\s*:\s*\K[0-9]+' build/lit.log || echo 0)
echo "lit: ${passed} passed, ${failed} failed, ${skipped} skipped"
if [ "$passed" -eq 0 ]; then
  echo "error: no test ran" >&2
  exit 1
fi
exit "$status"
