#!/usr/bin/env bash
# Sets up, builds and runs the whole test suite (lit); the README's test
# command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
set +e
/usr/lib/llvm-22/bin/lit -sv build/test 2>&1 | tee build/lit.log
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
