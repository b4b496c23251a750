// RUN: fsdp-opt %s --fsdp-apply-schedule -split-input-file -verify-diagnostics

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

// A mark whose anchor (the previous gather's free) comes after the gather:
// a schedule only moves a gather earlier.
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
    // expected-error@+1 {{'fsdp.all_gather.start' op is marked to start after an op that comes after it (a schedule only moves a gather earlier)}}
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

// -----

// A mark that is neither "wait" nor "free".
module {
  fsdp.param @w : tensor<4xf32> in "a" : "M"
  fsdp.param @v : tensor<4xf32> in "b" : "M"
  fsdp.flat_param @a for "a" params [@w] offsets [0] numel 4 padded 4 shards 2 : f32
  fsdp.flat_param @b for "b" params [@v] offsets [0] numel 4 padded 4 shards 2 : f32
  func.func @train_step() -> tensor<4xf32> {
    %sa = fsdp.get @a : tensor<2xf32>
    %fa = fsdp.all_gather.start %sa for @a group shard : tensor<2xf32> -> !fsdp.future<tensor<4xf32>>
    %ba = fsdp.wait %fa : !fsdp.future<tensor<4xf32>>
    %y = aten.call "aten::neg"(%ba) : (tensor<4xf32>) -> tensor<4xf32>
    fsdp.free %ba : tensor<4xf32>
    %sb = fsdp.get @b : tensor<2xf32>
    // expected-error@+1 {{'fsdp.all_gather.start' op is marked fsdp.prefetch = "early": expected "wait" or "free"}}
    %fb = fsdp.all_gather.start %sb for @b group shard {fsdp.prefetch = "early"} : tensor<2xf32> -> !fsdp.future<tensor<4xf32>>
    %bb = fsdp.wait %fb : !fsdp.future<tensor<4xf32>>
    %z = aten.call "aten::mul.Tensor"(%y, %bb) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    fsdp.free %bb : tensor<4xf32>
    return %z : tensor<4xf32>
  }
}

// -----

// "free" after a gather that is never freed (fsdp-verify-plan would refuse
// the step; the scheduler says what it cannot do).
module {
  fsdp.param @w : tensor<4xf32> in "a" : "M"
  fsdp.param @v : tensor<4xf32> in "b" : "M"
  fsdp.flat_param @a for "a" params [@w] offsets [0] numel 4 padded 4 shards 2 : f32
  fsdp.flat_param @b for "b" params [@v] offsets [0] numel 4 padded 4 shards 2 : f32
  func.func @train_step() -> tensor<4xf32> {
    %sa = fsdp.get @a : tensor<2xf32>
    %fa = fsdp.all_gather.start %sa for @a group shard : tensor<2xf32> -> !fsdp.future<tensor<4xf32>>
    %ba = fsdp.wait %fa : !fsdp.future<tensor<4xf32>>
    %y = aten.call "aten::neg"(%ba) : (tensor<4xf32>) -> tensor<4xf32>
    %sb = fsdp.get @b : tensor<2xf32>
    // expected-error@+1 {{'fsdp.all_gather.start' op is marked to start after the free of the previous gather, which is never freed}}
    %fb = fsdp.all_gather.start %sb for @b group shard {fsdp.prefetch = "free"} : tensor<2xf32> -> !fsdp.future<tensor<4xf32>>
    %bb = fsdp.wait %fb : !fsdp.future<tensor<4xf32>>
    %z = aten.call "aten::mul.Tensor"(%y, %bb) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    fsdp.free %bb : tensor<4xf32>
    return %z : tensor<4xf32>
  }
}

// -----

// A move that would read a flat parameter before its update.
module {
  fsdp.param @w : tensor<4xf32> in "a" : "M"
  fsdp.param @v : tensor<4xf32> in "b" : "M"
  fsdp.flat_param @a for "a" params [@w] offsets [0] numel 4 padded 4 shards 2 : f32
  fsdp.flat_param @b for "b" params [@v] offsets [0] numel 4 padded 4 shards 2 : f32
  func.func @train_step(%n: tensor<2xf32>) -> tensor<4xf32> {
    %sa = fsdp.get @a : tensor<2xf32>
    %fa = fsdp.all_gather.start %sa for @a group shard : tensor<2xf32> -> !fsdp.future<tensor<4xf32>>
    %ba = fsdp.wait %fa : !fsdp.future<tensor<4xf32>>
    %y = aten.call "aten::neg"(%ba) : (tensor<4xf32>) -> tensor<4xf32>
    fsdp.free %ba : tensor<4xf32>
    fsdp.update @b, %n : tensor<2xf32>
    %sb = fsdp.get @b : tensor<2xf32>
    // expected-error@+1 {{'fsdp.all_gather.start' op would read @b before an fsdp.update of it}}
    %fb = fsdp.all_gather.start %sb for @b group shard {fsdp.prefetch = "wait"} : tensor<2xf32> -> !fsdp.future<tensor<4xf32>>
    %bb = fsdp.wait %fb : !fsdp.future<tensor<4xf32>>
    %z = aten.call "aten::mul.Tensor"(%y, %bb) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    fsdp.free %bb : tensor<4xf32>
    return %z : tensor<4xf32>
  }
}

// -----

// A wait marked to move later, after a reduction that follows it.
module {
  fsdp.param @w : tensor<4xf32> in "a" : "M"
  fsdp.param @v : tensor<4xf32> in "b" : "M"
  fsdp.flat_param @a for "a" params [@w] offsets [0] numel 4 padded 4 shards 2 : f32
  fsdp.flat_param @b for "b" params [@v] offsets [0] numel 4 padded 4 shards 2 : f32
  func.func @train_step(%g: tensor<4xf32>) {
    %ra = fsdp.reduce_scatter.start %g for @a group shard reduce mean : tensor<4xf32> -> !fsdp.future<tensor<2xf32>>
    // expected-error@+1 {{'fsdp.wait' op is marked to wait before a reduction that starts after it (a schedule only moves a wait earlier)}}
    %sa = fsdp.wait %ra {fsdp.wait_before = 1 : i64} : !fsdp.future<tensor<2xf32>>
    // expected-note@+1 {{that reduction}}
    %rb = fsdp.reduce_scatter.start %g for @b group shard reduce mean : tensor<4xf32> -> !fsdp.future<tensor<2xf32>>
    %sb = fsdp.wait %rb : !fsdp.future<tensor<2xf32>>
    fsdp.grad @a, %sa : tensor<2xf32>
    fsdp.grad @b, %sb : tensor<2xf32>
    return
  }
}
