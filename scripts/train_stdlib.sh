#!/usr/bin/env bash
# The main job on real text: a small GPT learns Python from the Python
# standard library's own sources (on every machine, written by no one here),
# as byte-level tokens.
#
#   scripts/train_stdlib.sh [OUT_DIR]       (default build/stdlib)
#
# Sets up and builds as scripts/test.sh does; then
#  1. examples/stdlib/prepare.py: every .py file of the standard library as
#     byte tokens, split into training and validation by file (train.bin,
#     val.bin: uint16, nanoGPT's format), and the unigram baseline;
#  2. examples/stdlib/model.py: a 4-block GPT (width 128, 0.84M parameters,
#     sequences of 128 bytes) exported by torch.export;
#  3. fsdp-opt: its training step (cross-entropy, AdamW, cosine schedule)
#     and evaluation step, fully sharded over NPROC ranks (each block an FSDP
#     unit), with the predicted peak memory;
#  4. fsdp-run: STEPS steps on NPROC local CPU ranks, each rank streaming
#     its own windows of the token file, the validation loss on 16 batches
#     every 100 steps, progress with ETA, --metrics;
#  5. examples/stdlib/plot.py: training and validation loss against the
#     step (OUT_DIR/loss.png), and a check that the validation loss fell
#     well below the unigram baseline.
# STEPS (default 400) and NPROC (default 2) are read from the environment;
# it takes about 4 minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/stdlib}
STEPS=${STEPS:-1600}
NPROC=${NPROC:-2}
scripts/setup.sh
scripts/build.sh
mkdir -p "$OUT"
PY=.venv/bin/python
$PY examples/stdlib/prepare.py "$OUT"
$PY examples/stdlib/model.py "$OUT/gpt.pt2"
# One rank's batch: 8 sequences of 128 bytes (the targets: the next bytes).
build/bin/fsdp-opt "$OUT/gpt.pt2" --loss cross_entropy --target y:8x128xi64 \
  --optimizer adamw --lr 3e-3 --weight-decay 0.1 \
  --lr-schedule cosine --warmup-steps 30 --total-steps "$STEPS" \
  --world-size "$NPROC" --sharding FULL_SHARD --auto-wrap class --wrap-class Block \
  --memory-report --emit plan -o "$OUT/gpt.plan" | grep -E "^(peak [0-9]|evaluation step)"
build/bin/fsdp-run "$OUT/gpt.plan" --model "$OUT/gpt.pt2" \
  --data "$OUT/train.bin" --seq-len 128 --token-inputs idx,y --seed 0 \
  --eval-data "$OUT/val.bin" --eval-every 200 --eval-steps 32 \
  --steps "$STEPS" --nproc "$NPROC" \
  --metrics "$OUT/metrics.jsonl" --save "$OUT/final.pt"
$PY examples/stdlib/plot.py "$OUT/metrics.jsonl" "$OUT/corpus.json" "$OUT/loss.png"
