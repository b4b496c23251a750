#!/usr/bin/env bash
# The main job, on a fresh machine: installs what is missing, builds, exports
# the example models (traced and scripted) and imports each with fsdp-opt,
# printing a summary of its IR; then compiles the GPT fixture's training step
# and trains it for 5 steps with fsdp-run, beside eager PyTorch. Writes into
# demo/.
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
echo "== Training the GPT fixture: fsdp-opt builds the step (loss, backward, AdamW), fsdp-run runs it =="
$PY test/fixtures/train_parity.py make gpt demo/gpt.pt demo/gpt-batches.pt --loss cross_entropy --steps 5 2>/dev/null
build/bin/fsdp-opt demo/gpt.pt --loss cross_entropy --optimizer adamw --lr 0.01 \
  --emit plan -o demo/gpt.plan
build/bin/fsdp-run demo/gpt.plan --model demo/gpt.pt --data demo/gpt-batches.pt \
  --metrics demo/gpt-metrics.jsonl --save demo/gpt-final.pt
echo
echo "== The same 5 steps in eager PyTorch (torch.optim.AdamW) =="
$PY test/fixtures/train_parity.py check gpt demo/gpt.pt demo/gpt-batches.pt \
  demo/gpt-metrics.jsonl demo/gpt-final.pt --loss cross_entropy --optimizer adamw --lr 0.01
