// fsdp-apply-schedule moves the gathers fsdp-prefetch marked; fsdp-verify-plan
// accepts the result.
// RUN: fsdp-opt %S/Inputs/three-units.mlir --fsdp-prefetch=forward-prefetch=true --fsdp-apply-schedule --fsdp-verify-plan | FileCheck %s --check-prefix=APPLY
// RUN: fsdp-opt %S/Inputs/three-units.mlir --fsdp-prefetch=backward-prefetch=BACKWARD_POST --fsdp-apply-schedule --fsdp-verify-plan | FileCheck %s --check-prefix=APPLYPOST

// Applied: each marked start (and its shard's read) right after the previous
// gather's wait; waits and frees stay; no mark is left.
// APPLY-NOT: fsdp.prefetch
// APPLY:      %[[BA:.*]] = fsdp.wait %{{.*}} :
// APPLY-NEXT: %[[SB:.*]] = fsdp.get @b
// APPLY-NEXT: %[[FB:.*]] = fsdp.all_gather.start %[[SB]] for @b
// APPLY-NEXT: aten.call "aten::mul.Tensor"(%{{.*}}, %[[BA]])
// APPLY-NEXT: %[[BB:.*]] = fsdp.wait %[[FB]]
// APPLY-NEXT: %[[SC:.*]] = fsdp.get @c
// APPLY-NEXT: %[[FC:.*]] = fsdp.all_gather.start %[[SC]] for @c
// APPLY-NEXT: aten.call "aten::mul.Tensor"(%{{.*}}, %[[BB]])
// APPLY:      {fsdp.backward_start}
// APPLY-NEXT: fsdp.get @c
// APPLY-NEXT: fsdp.all_gather.start
// APPLY-NEXT: fsdp.wait
// APPLY-NEXT: fsdp.get @b
// APPLY-NEXT: fsdp.all_gather.start
// APPLY-NEXT: aten.call "aten::mul.Tensor"

// APPLYPOST:      {fsdp.backward_start}
// APPLYPOST:      fsdp.free
// APPLYPOST-NEXT: fsdp.get @b
// APPLYPOST-NEXT: fsdp.all_gather.start
// APPLYPOST-NEXT: aten.call "aten::neg"
