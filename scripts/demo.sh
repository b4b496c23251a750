#!/usr/bin/env bash
# The main job, on a fresh machine: installs what is missing, builds, then
# compiles the GPT fixture's training step fully sharded over 4 ranks
# (FULL_SHARD, each transformer block an FSDP unit, AdamW), prints the FSDP
# report, trains it for 5 steps on 4 local CPU ranks with fsdp-run --nproc 4
# (Gloo), and checks the losses and the final parameters against 4
# data-parallel ranks in eager PyTorch. Writes into demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
mkdir -p demo
PY=.venv/bin/python
RANKS=4
# One thread for fsdp-run's ranks and for eager PyTorch alike: AdamW turns an
# attention key bias's noise-level gradient into lr-sized steps, so the
# parameters match to 1e-5 only where both sides sum in the same order.
export OMP_NUM_THREADS=1

echo
echo "== The GPT fixture: exported with one rank's batch (2), batches of $RANKS x 2 =="
$PY test/fixtures/train_parity.py make gpt demo/gpt.pt demo/gpt-batches.pt \
  --loss cross_entropy --batch 2 --data-batch $((RANKS * 2)) --steps 5 2>/dev/null
echo "demo/gpt.pt, demo/gpt-batches.pt"

echo
echo "== fsdp-opt: loss, backward, AdamW, sharded over $RANKS ranks =="
build/bin/fsdp-opt demo/gpt.pt --loss cross_entropy --optimizer adamw --lr 0.01 \
  --world-size $RANKS --sharding FULL_SHARD --auto-wrap class --wrap-class GPTBlock \
  --fsdp-report --memory-report --memory-report-json demo/gpt.memory.json \
  --emit plan -o demo/gpt.plan
build/bin/fsdp-opt demo/gpt.pt --loss cross_entropy --optimizer adamw --lr 0.01 \
  --world-size $RANKS --sharding FULL_SHARD --auto-wrap class --wrap-class GPTBlock \
  -o demo/gpt.mlir
echo "the plan: demo/gpt.plan; its IR: demo/gpt.mlir (collectives:" \
  "$(grep -c 'all_gather.start' demo/gpt.mlir) all-gathers," \
  "$(grep -c 'reduce_scatter.start' demo/gpt.mlir) reduce-scatters)"

echo
echo "== fsdp-run on $RANKS local ranks (Gloo) =="
build/bin/fsdp-run demo/gpt.plan --model demo/gpt.pt --data demo/gpt-batches.pt \
  --nproc $RANKS --threads 1 --metrics demo/gpt-metrics.jsonl --save demo/gpt-final.pt
$PY -c "import json; p = json.load(open('demo/gpt.memory.json'))['peak_bytes']; \
m = [json.loads(l) for l in open('demo/gpt-metrics.jsonl')][-1]['peak_bytes']; \
print(f'peak per rank: predicted {p} bytes, measured {m} bytes')"

echo
echo "== The same 5 steps as $RANKS data-parallel ranks in eager PyTorch (torch.optim.AdamW) =="
$PY test/fixtures/train_parity.py check gpt demo/gpt.pt demo/gpt-batches.pt \
  demo/gpt-metrics.jsonl demo/gpt-final.pt --loss cross_entropy --optimizer adamw \
  --lr 0.01 --micro-batches $RANKS
