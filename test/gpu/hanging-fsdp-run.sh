#!/usr/bin/env bash
# A stand-in for fsdp-run that hangs where the two-rank conformance check
# runs (--check-communicator --nproc 2) and is the real one otherwise
# (FSDP_REAL_RUN): e2e/gpu_harness.test's hung command.
for a in "$@"; do
  if [ "$a" = --nproc ] && [ "$1" = --check-communicator ]; then
    exec sleep 1000
  fi
done
exec "$FSDP_REAL_RUN" "$@"
