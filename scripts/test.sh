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
rm -f build/lit-results.json
/usr/lib/llvm-22/bin/lit -sv --time-tests -o build/lit-results.json "${LIT_ARGS[@]}" build/test 2>&1 | tee build/lit.log
status=${PIPESTATUS[0]}
set -e
# A failure's own lines again at the very end, where a log cut to its head
# and tail (CI's) still shows them: each failed test's failing command and
# the first 40 lines of what it said.
if [ -s build/lit-results.json ]; then
  .venv/bin/python - build/lit-results.json <<'PY' || true
import json, re, sys
tests = json.load(open(sys.argv[1]))["tests"]
for t in tests:
    if t["code"] not in ("FAIL", "XPASS", "TIMEOUT"):
        continue
    lines = t.get("output", "").splitlines()
    print(f"--- {t['code']}: {t['name']} ({t.get('elapsed', 0):.0f} s) ---")
    # The command that failed (the last RUN line before the first error),
    # then what it said.
    # FileCheck's own complaint first; else the end of the output.
    first = next((i for i, l in enumerate(lines) if re.search(r"\.test:\d+:\d+: error:", l)),
                 max(len(lines) - 40, 0))
    run = [l for l in lines[:first] if "RUN: at line" in l]
    for l in run[-1:] + [l for l in lines[first:] if l.strip()][:40]:
        print("  " + l[:400])
PY
fi
passed=$(grep -oP '^\s*Passed\s*:\s*\K[0-9]+' build/lit.log || echo 0)
failed=$(grep -oP '^\s*Failed\s*:\s*\K[0-9]+' build/lit.log || echo 0)
skipped=$(grep -oP '^\s*Unsupported\s*:\s*\K[0-9]+' build/lit.log || echo 0)
echo "lit: ${passed} passed, ${failed} failed, ${skipped} skipped"
if [ "$passed" -eq 0 ]; then
  echo "error: no test ran" >&2
  exit 1
fi
exit "$status"
