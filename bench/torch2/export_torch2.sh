#!/usr/bin/env bash
# Exports every fixture with the torch on this machine (torch 2.x on the GPU
# machine), for checking that fsdp-opt / fsdp-run (built against libtorch
# 1.13) import and train torch 2.x archives. Run from the repository root:
#
#     bash bench/torch2/export_torch2.sh [OUTDIR]     # OUTDIR default $OUT or /tmp/torch2
#
# Writes OUTDIR/torch2.tar.gz holding torch2/:
#   export/NAME.MODE.pt       test/fixtures/export.py NAME --mode MODE (trace and script;
#                             aux_outputs script only), plus mlp/gpt traced on cuda
#   export/NAME.MODE.json     bench/torch2/inspect_archive.py of it (records, version,
#                             byteorder, ops of the inlined forward with their schemas)
#   train/NAME.MODE.pt,.data.pt  train_parity.py make (one rank's batch 2, data for 2
#                             ranks, 3 steps, loss target stored)
#   train/NAME.MODE.ref.json  bench/torch2/reference.py: this torch's eager losses and
#                             final state for 2 data-parallel ranks
#   logs/*.log, env.txt       every command's output, torch version, pip list excerpt
# Then, on a machine with fsdp-opt: bench/torch2/check_torch2.py OUTDIR/torch2.
set -u
OUTDIR=${1:-${OUT:-/tmp/torch2}}
W=$(mktemp -d)/torch2
mkdir -p "$W/export" "$W/train" "$W/logs" "$OUTDIR"
PY=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 PYTHONWARNINGS=default
{
  $PY -c 'import torch, sys; print("python", sys.version.split()[0]); print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())'
  $PY -c 'import torch; from torch.jit import _script; print("jit.trace", hasattr(torch.jit, "trace"), "jit.script", hasattr(torch.jit, "script"))'
  nvidia-smi -L 2>&1 | head -2
} > "$W/env.txt" 2>&1
cat "$W/env.txt"

NAMES=$($PY -c 'import sys; sys.path.insert(0, "test/fixtures"); import models; print(" ".join(models.NAMES))')
# NAME:LOSS:OPTIMIZER-FLAGS for the fixtures that train.
TRAIN="mlp:cross_entropy:adamw cnn:cross_entropy:sgdm gpt:cross_entropy:adamw
encoder:cross_entropy:adamw seq2seq:cross_entropy:adamw mlp_loss:none:sgd
quirks:cross_entropy:adamw mutations:cross_entropy:sgdm aux_outputs:cross_entropy:sgd
layouts:cross_entropy:adamw custom_state:cross_entropy:sgd tensor_attr:cross_entropy:sgd"

jobs="$W/jobs.txt"
: > "$jobs"
for n in $NAMES; do
  for m in trace script; do
    [ "$n.$m" = aux_outputs.trace ] && continue  # returns None: not traceable
    echo "$PY test/fixtures/export.py $n $W/export/$n.$m.pt --mode $m > $W/logs/export.$n.$m.log 2>&1 && $PY bench/torch2/inspect_archive.py $W/export/$n.$m.pt $W/export/$n.$m.json >> $W/logs/export.$n.$m.log 2>&1; echo \"export $n $m rc=\$?\"" >> "$jobs"
  done
done
if $PY -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  for n in mlp gpt; do
    echo "$PY test/fixtures/export.py $n $W/export/$n.cuda.pt --device cuda > $W/logs/export.$n.cuda.log 2>&1 && $PY bench/torch2/inspect_archive.py $W/export/$n.cuda.pt $W/export/$n.cuda.json >> $W/logs/export.$n.cuda.log 2>&1; echo \"export $n cuda rc=\$?\"" >> "$jobs"
  done
fi
for spec in $TRAIN; do
  IFS=: read -r n loss opt <<< "$spec"
  case $opt in
    adamw) flags="--optimizer adamw --lr 0.01" ;;
    sgd) flags="--optimizer sgd --lr 0.1" ;;
    sgdm) flags="--optimizer sgd --lr 0.1 --momentum 0.9" ;;
  esac
  for m in trace script; do
    [ "$n.$m" = aux_outputs.trace ] && continue
    b="$W/train/$n.$m"
    echo "$PY test/fixtures/train_parity.py make $n $b.pt $b.data.pt --loss $loss --batch 2 --data-batch 4 --steps 3 --mode $m > $W/logs/train.$n.$m.log 2>&1 && $PY bench/torch2/reference.py $n $b.pt $b.data.pt $b.ref.json --loss $loss --steps 3 --micro-batches 2 $flags >> $W/logs/train.$n.$m.log 2>&1; echo \"train $n $m rc=\$?\"; echo '$loss $flags' > $b.flags" >> "$jobs"
  done
done
# Several commands at a time (each one starts a Python with torch).
xargs -P "${JOBS:-12}" -I{} bash -c '{}' < "$jobs" | sort | tee "$W/summary.txt"
for f in "$W"/logs/*.log; do
  if grep -q "Error\|Traceback" "$f"; then echo "== $f"; grep -v "^  " "$f" | tail -4; fi
done
tar -C "$(dirname "$W")" -czf "$OUTDIR/torch2.tar.gz" torch2
ls -la "$OUTDIR"
