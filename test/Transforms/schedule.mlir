// The scheduling passes, each on its own: fsdp-prefetch decides (marks
// fsdp.prefetch), fsdp-limit-all-gathers takes decisions back, and
// fsdp-apply-schedule moves the gathers; fsdp-verify-plan accepts the result.
// RUN: fsdp-opt %s --fsdp-prefetch | FileCheck %s --check-prefix=PRE
// RUN: fsdp-opt %s --fsdp-prefetch=backward-prefetch=BACKWARD_POST | FileCheck %s --check-prefix=POST
// A buffer freed at the anchor does not count: BACKWARD_POST prefetches even
// under a limit of 1.
// RUN: fsdp-opt %s --fsdp-prefetch=backward-prefetch=BACKWARD_POST --fsdp-limit-all-gathers=limit=1 | FileCheck %s --check-prefix=POST
// RUN: fsdp-opt %s --fsdp-prefetch="backward-prefetch=NO_PREFETCH forward-prefetch=true" | FileCheck %s --check-prefix=FWD
// RUN: fsdp-opt %s --fsdp-prefetch=backward-prefetch=NO_PREFETCH | FileCheck %s --check-prefix=NONE
// RUN: fsdp-opt %s --fsdp-prefetch=forward-prefetch=true --fsdp-limit-all-gathers | FileCheck %s --check-prefix=LIMIT2
// RUN: fsdp-opt %s --fsdp-prefetch=forward-prefetch=true --fsdp-limit-all-gathers=limit=1 | FileCheck %s --check-prefix=NONE
// RUN: fsdp-opt %s --fsdp-prefetch=forward-prefetch=true --fsdp-limit-all-gathers=limit=0 | FileCheck %s --check-prefix=LIMIT0
// RUN: fsdp-opt %s --fsdp-prefetch=forward-prefetch=true --fsdp-apply-schedule --fsdp-verify-plan | FileCheck %s --check-prefix=APPLY
// RUN: fsdp-opt %s --fsdp-prefetch=backward-prefetch=BACKWARD_POST --fsdp-apply-schedule --fsdp-verify-plan | FileCheck %s --check-prefix=APPLYPOST

// Three units, a then b then c in the forward; c, b, a in the backward. The
// forward keeps a's buffer until after b's compute (a skip connection), so
// three buffers are alive where c's prefetch would start.
module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  fsdp.param @wa : tensor<4xf32> in "a" : "L"
  fsdp.param @wb : tensor<4xf32> in "b" : "L"
  fsdp.param @wc : tensor<4xf32> in "c" : "L"
  fsdp.flat_param @a for "a" params [@wa] offsets [0] numel 4 padded 4 shards 2 : f32
  fsdp.flat_param @b for "b" params [@wb] offsets [0] numel 4 padded 4 shards 2 : f32
  fsdp.flat_param @c for "c" params [@wc] offsets [0] numel 4 padded 4 shards 2 : f32
  func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
    %sa = fsdp.get @a : tensor<2xf32>
    %fa = fsdp.all_gather.start %sa for @a group shard : tensor<2xf32> -> !fsdp.future<tensor<4xf32>>
    %ba = fsdp.wait %fa : !fsdp.future<tensor<4xf32>>
    %ya = aten.call "aten::mul.Tensor"(%x, %ba) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %sb = fsdp.get @b : tensor<2xf32>
    %fb = fsdp.all_gather.start %sb for @b group shard : tensor<2xf32> -> !fsdp.future<tensor<4xf32>>
    %bb = fsdp.wait %fb : !fsdp.future<tensor<4xf32>>
    %yb = aten.call "aten::mul.Tensor"(%ya, %bb) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %skip = aten.call "aten::mul.Tensor"(%yb, %ba) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    fsdp.free %bb : tensor<4xf32>
    fsdp.free %ba : tensor<4xf32>
    %sc = fsdp.get @c : tensor<2xf32>
    %fc = fsdp.all_gather.start %sc for @c group shard : tensor<2xf32> -> !fsdp.future<tensor<4xf32>>
    %bc = fsdp.wait %fc : !fsdp.future<tensor<4xf32>>
    %yc = aten.call "aten::mul.Tensor"(%skip, %bc) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    fsdp.free %bc : tensor<4xf32>
    %seed = aten.constant dense<1.0> : tensor<4xf32> {fsdp.backward_start}
    %sc2 = fsdp.get @c : tensor<2xf32>
    %fc2 = fsdp.all_gather.start %sc2 for @c group shard : tensor<2xf32> -> !fsdp.future<tensor<4xf32>>
    %bc2 = fsdp.wait %fc2 : !fsdp.future<tensor<4xf32>>
    %gc = aten.call "aten::mul.Tensor"(%seed, %bc2) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    fsdp.free %bc2 : tensor<4xf32>
    %tc = aten.call "aten::neg"(%gc) : (tensor<4xf32>) -> tensor<4xf32>
    %sb2 = fsdp.get @b : tensor<2xf32>
    %fb2 = fsdp.all_gather.start %sb2 for @b group shard : tensor<2xf32> -> !fsdp.future<tensor<4xf32>>
    %bb2 = fsdp.wait %fb2 : !fsdp.future<tensor<4xf32>>
    %gb = aten.call "aten::mul.Tensor"(%tc, %bb2) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    fsdp.free %bb2 : tensor<4xf32>
    %sa2 = fsdp.get @a : tensor<2xf32>
    %fa2 = fsdp.all_gather.start %sa2 for @a group shard : tensor<2xf32> -> !fsdp.future<tensor<4xf32>>
    %ba2 = fsdp.wait %fa2 : !fsdp.future<tensor<4xf32>>
    %ga = aten.call "aten::mul.Tensor"(%gb, %ba2) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    fsdp.free %ba2 : tensor<4xf32>
    return %ga : tensor<4xf32>
  }
}

// BACKWARD_PRE (the default) marks the backward's gathers after the first;
// the forward keeps its place.
// PRE-LABEL: func.func @train_step
// PRE:      fsdp.all_gather.start %{{.*}} for @a group {{ *}}shard :
// PRE:      fsdp.all_gather.start %{{.*}} for @b group {{ *}}shard :
// PRE:      fsdp.all_gather.start %{{.*}} for @c group {{ *}}shard :
// PRE:      fsdp.all_gather.start %{{.*}} for @c group {{ *}}shard :
// PRE:      fsdp.all_gather.start %{{.*}} for @b group {{ *}}shard {fsdp.prefetch = "wait"}
// PRE:      fsdp.all_gather.start %{{.*}} for @a group {{ *}}shard {fsdp.prefetch = "wait"}

// BACKWARD_POST: b's gather comes after c's free (only neg between): it is
// marked, to start right after the free.
// POST:      fsdp.all_gather.start %{{.*}} for @c group {{ *}}shard :
// POST:      fsdp.all_gather.start %{{.*}} for @c group {{ *}}shard :
// POST:      fsdp.all_gather.start %{{.*}} for @b group {{ *}}shard {fsdp.prefetch = "free"}
// POST:      fsdp.all_gather.start %{{.*}} for @a group {{ *}}shard :

// FWD:       fsdp.all_gather.start %{{.*}} for @a group {{ *}}shard :
// FWD:       fsdp.all_gather.start %{{.*}} for @b group {{ *}}shard {fsdp.prefetch = "wait"}
// FWD:       fsdp.all_gather.start %{{.*}} for @c group {{ *}}shard {fsdp.prefetch = "wait"}
// FWD:       fsdp.all_gather.start %{{.*}} for @c group {{ *}}shard :
// FWD:       fsdp.all_gather.start %{{.*}} for @b group {{ *}}shard :
// FWD:       fsdp.all_gather.start %{{.*}} for @a group {{ *}}shard :

// NONE-NOT: fsdp.prefetch

// Limit 2: b prefetched while a is alive (1 other buffer); c would start
// while a and b are (2): taken back. The backward's each start with one.
// LIMIT2:    fsdp.all_gather.start %{{.*}} for @b group {{ *}}shard {fsdp.prefetch = "wait"}
// LIMIT2:    fsdp.all_gather.start %{{.*}} for @c group {{ *}}shard :
// LIMIT2:    fsdp.all_gather.start %{{.*}} for @c group {{ *}}shard :
// LIMIT2:    fsdp.all_gather.start %{{.*}} for @b group {{ *}}shard {fsdp.prefetch = "wait"}
// LIMIT2:    fsdp.all_gather.start %{{.*}} for @a group {{ *}}shard {fsdp.prefetch = "wait"}

// LIMIT0:    fsdp.all_gather.start %{{.*}} for @b group {{ *}}shard {fsdp.prefetch = "wait"}
// LIMIT0:    fsdp.all_gather.start %{{.*}} for @c group {{ *}}shard {fsdp.prefetch = "wait"}

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
