// RUN: fsdp-opt %s --fsdp-apply-schedule -split-input-file -verify-diagnostics
// RUN: not fsdp-opt %s --fsdp-prefetch=backward-prefetch=BACKWARD_LATER -split-input-file 2>&1 | FileCheck %s --check-prefix=PREFETCH
// RUN: not fsdp-opt %s --fsdp-limit-all-gathers=limit=-1 -split-input-file 2>&1 | FileCheck %s --check-prefix=LIMIT
// RUN: not fsdp-opt %s --fsdp-limit-reductions=limit=-2 -split-input-file 2>&1 | FileCheck %s --check-prefix=REDUCTIONS
// PREFETCH: error: unknown backward prefetch 'BACKWARD_LATER': expected BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH
// LIMIT: error: the all-gather limit must not be negative, found -1
// REDUCTIONS: error: the reduction limit must not be negative, found -2

// A mark on the first gather of its phase: nothing to start after.
module {
  fsdp.param @w : tensor<4xf32> in "" : "M"
  fsdp.flat_param @u for "" params [@w] offsets [0] numel 4 padded 4 shards 2 : f32
  func.func @train_step() -> tensor<4xf32> {
    %s = fsdp.get @u : tensor<2xf32>
    // expected-error@+1 {{'fsdp.all_gather.start' op is marked fsdp.prefetch = "wait" but has no previous gather in its phase to start after}}
    %f = fsdp.all_gather.start %s for @u group shard {fsdp.prefetch = "wait"} : tensor<2xf32> -> !fsdp.future<tensor<4xf32>>
    %full = fsdp.wait %f : !fsdp.future<tensor<4xf32>>
    %y = aten.call "aten::neg"(%full) : (tensor<4xf32>) -> tensor<4xf32>
    fsdp.free %full : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// A mark whose anchor (the previous gather's free) follows this gather's
// own wait.
module {
  fsdp.param @w : tensor<4xf32> in "a" : "M"
  fsdp.param @v : tensor<4xf32> in "b" : "M"
  fsdp.flat_param @a for "a" params [@w] offsets [0] numel 4 padded 4 shards 2 : f32
  fsdp.flat_param @b for "b" params [@v] offsets [0] numel 4 padded 4 shards 2 : f32
  func.func @train_step() -> tensor<4xf32> {
    %sa = fsdp.get @a : tensor<2xf32>
    %fa = fsdp.all_gather.start %sa for @a group shard : tensor<2xf32> -> !fsdp.future<tensor<4xf32>>
    %ba = fsdp.wait %fa : !fsdp.future<tensor<4xf32>>
    %sb = fsdp.get @b : tensor<2xf32>
    // expected-error@+1 {{'fsdp.all_gather.start' op is marked to start after an op that follows its own wait}}
    %fb = fsdp.all_gather.start %sb for @b group shard {fsdp.prefetch = "free"} : tensor<2xf32> -> !fsdp.future<tensor<4xf32>>
    %bb = fsdp.wait %fb : !fsdp.future<tensor<4xf32>>
    %y = aten.call "aten::mul.Tensor"(%ba, %bb) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    fsdp.free %bb : tensor<4xf32>
    // expected-note@+1 {{that op}}
    fsdp.free %ba : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// A wait marked to come before a reduction the step does not have.
module {
  fsdp.param @w : tensor<4xf32> in "" : "M"
  fsdp.flat_param @u for "" params [@w] offsets [0] numel 4 padded 4 shards 2 : f32
  func.func @train_step(%g: tensor<4xf32>) {
    %r = fsdp.reduce_scatter.start %g for @u group shard reduce mean : tensor<4xf32> -> !fsdp.future<tensor<2xf32>>
    // expected-error@+1 {{'fsdp.wait' op is marked to wait before reduction #3 but the step starts 1 reductions}}
    %s = fsdp.wait %r {fsdp.wait_before = 3 : i64} : !fsdp.future<tensor<2xf32>>
    fsdp.grad @u, %s : tensor<2xf32>
    return
  }
}

// -----

// ... or before one that starts ahead of its own collective.
module {
  fsdp.param @w : tensor<4xf32> in "a" : "M"
  fsdp.param @v : tensor<4xf32> in "b" : "M"
  fsdp.flat_param @a for "a" params [@w] offsets [0] numel 4 padded 4 shards 2 : f32
  fsdp.flat_param @b for "b" params [@v] offsets [0] numel 4 padded 4 shards 2 : f32
  func.func @train_step(%g: tensor<4xf32>) {
    // expected-note@+1 {{that reduction}}
    %ra = fsdp.reduce_scatter.start %g for @a group shard reduce mean : tensor<4xf32> -> !fsdp.future<tensor<2xf32>>
    %rb = fsdp.reduce_scatter.start %g for @b group shard reduce mean : tensor<4xf32> -> !fsdp.future<tensor<2xf32>>
    // expected-error@+1 {{'fsdp.wait' op is marked to wait before a reduction that starts before its own collective}}
    %sb = fsdp.wait %rb {fsdp.wait_before = 0 : i64} : !fsdp.future<tensor<2xf32>>
    %sa = fsdp.wait %ra : !fsdp.future<tensor<2xf32>>
    fsdp.grad @a, %sa : tensor<2xf32>
    fsdp.grad @b, %sb : tensor<2xf32>
    return
  }
}
