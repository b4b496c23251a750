#!/usr/bin/env bash
# The main job, on a fresh machine: installs what is missing, builds, exports
# the example models (traced and scripted) and imports each with fsdp-opt,
# printing a summary of its IR. Writes into demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
mkdir -p demo
PY=/usr/bin/python3
for model in mlp cnn gpt encoder; do
  for mode in trace script; do
    $PY test/fixtures/export.py "$model" "demo/$model-$mode.pt" --mode "$mode" 2>/dev/null
    build/bin/fsdp-opt "demo/$model-$mode.pt" -o "demo/$model-$mode.mlir"
    params=$(grep -c '^  fsdp.param' "demo/$model-$mode.mlir" || true)
    buffers=$(grep -c '^  fsdp.buffer' "demo/$model-$mode.mlir" || true)
    ops=$(grep -c 'aten.call' "demo/$model-$mode.mlir" || true)
    printf '%-8s %-6s %3d params %3d buffers %4d ATen ops -> demo/%s-%s.mlir\n' \
      "$model" "$mode" "$params" "$buffers" "$ops" "$model" "$mode"
  done
done
echo
echo "== demo/gpt-script.mlir (first lines) =="
head -n 40 demo/gpt-script.mlir

echo
echo "== fsdp-run: the GPT fixture's plan, 3 steps on one rank =="
$PY test/fixtures/forward_parity.py make gpt demo/gpt.pt demo/gpt-batches.pt --steps 3 2>/dev/null
build/bin/fsdp-opt demo/gpt.pt --emit plan -o demo/gpt.plan
build/bin/fsdp-run demo/gpt.plan --model demo/gpt.pt --data demo/gpt-batches.pt \
  --metrics demo/gpt-metrics.jsonl --save demo/gpt-final.pt --outputs demo/gpt-outputs.pt
$PY test/fixtures/forward_parity.py check gpt demo/gpt.pt demo/gpt-batches.pt \
  demo/gpt-outputs.pt demo/gpt-final.pt --steps 3
