// fsdp-limit-reductions marks the waits that must come earlier for at most
// N reductions to be in flight (fsdp.wait_before = the index of the start
// they precede); fsdp-apply-schedule moves them; fsdp-verify-plan accepts
// the result.
// RUN: fsdp-opt %s --fsdp-limit-reductions=limit=2 | FileCheck %s --check-prefix=TWO
// RUN: fsdp-opt %s --fsdp-limit-reductions | FileCheck %s --check-prefix=ONE
// RUN: fsdp-opt %s --fsdp-limit-reductions=limit=1 | FileCheck %s --check-prefix=ONE
// RUN: fsdp-opt %s --fsdp-limit-reductions=limit=0 | FileCheck %s --check-prefix=NONE
// RUN: fsdp-opt %s --fsdp-limit-reductions=limit=3 | FileCheck %s --check-prefix=NONE
// RUN: fsdp-opt %s --fsdp-limit-reductions=limit=1 --fsdp-apply-schedule --fsdp-verify-plan | FileCheck %s --check-prefix=APPLY

// Three units' gradients reduce-scattered as they complete, all waited at
// the end (where fsdp-shard puts the waits).
module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  fsdp.param @wa : tensor<4xf32> in "a" : "L"
  fsdp.param @wb : tensor<4xf32> in "b" : "L"
  fsdp.param @wc : tensor<4xf32> in "c" : "L"
  fsdp.flat_param @a for "a" params [@wa] offsets [0] numel 4 padded 4 shards 2 : f32
  fsdp.flat_param @b for "b" params [@wb] offsets [0] numel 4 padded 4 shards 2 : f32
  fsdp.flat_param @c for "c" params [@wc] offsets [0] numel 4 padded 4 shards 2 : f32
  func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
    %seed = aten.constant dense<1.0> : tensor<4xf32> {fsdp.backward_start}
    %gc = aten.call "aten::mul.Tensor"(%seed, %x) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %rc = fsdp.reduce_scatter.start %gc for @c group shard reduce mean : tensor<4xf32> -> !fsdp.future<tensor<2xf32>>
    %gb = aten.call "aten::neg"(%gc) : (tensor<4xf32>) -> tensor<4xf32>
    %rb = fsdp.reduce_scatter.start %gb for @b group shard reduce mean : tensor<4xf32> -> !fsdp.future<tensor<2xf32>>
    %ga = aten.call "aten::neg"(%gb) : (tensor<4xf32>) -> tensor<4xf32>
    %ra = fsdp.reduce_scatter.start %ga for @a group shard reduce mean : tensor<4xf32> -> !fsdp.future<tensor<2xf32>>
    %sc = fsdp.wait %rc : !fsdp.future<tensor<2xf32>>
    fsdp.grad @c, %sc : tensor<2xf32>
    %sb = fsdp.wait %rb : !fsdp.future<tensor<2xf32>>
    fsdp.grad @b, %sb : tensor<2xf32>
    %sa = fsdp.wait %ra : !fsdp.future<tensor<2xf32>>
    fsdp.grad @a, %sa : tensor<2xf32>
    return %ga : tensor<4xf32>
  }
}

// Two in flight: c's reduction is waited before a's (the third) starts.
// TWO:      fsdp.wait %{{.*}} {fsdp.wait_before = 2 : i64}
// TWO-NEXT: fsdp.grad @c
// TWO-NOT:  fsdp.wait_before

// ONE:      fsdp.wait %{{.*}} {fsdp.wait_before = 1 : i64}
// ONE-NEXT: fsdp.grad @c
// ONE:      fsdp.wait %{{.*}} {fsdp.wait_before = 2 : i64}
// ONE-NEXT: fsdp.grad @b
// ONE-NOT:  fsdp.wait_before

// NONE-NOT: fsdp.wait_before

// One in flight: each wait right before the next reduction starts; the
// gradients stay where they were.
// APPLY-NOT:  fsdp.wait_before
// APPLY:      %[[RC:.*]] = fsdp.reduce_scatter.start
// APPLY-NEXT: aten.call "aten::neg"
// APPLY-NEXT: %[[SC:.*]] = fsdp.wait %[[RC]]
// APPLY-NEXT: %[[RB:.*]] = fsdp.reduce_scatter.start
// APPLY-NEXT: aten.call "aten::neg"
// APPLY-NEXT: %[[SB:.*]] = fsdp.wait %[[RB]]
// APPLY-NEXT: %[[RA:.*]] = fsdp.reduce_scatter.start
// APPLY-NEXT: fsdp.grad @c, %[[SC]]
// APPLY-NEXT: fsdp.grad @b, %[[SB]]
// APPLY-NEXT: %[[SA:.*]] = fsdp.wait %[[RA]]
// APPLY-NEXT: fsdp.grad @a, %[[SA]]
