// RUN: fsdp-opt %s --fsdp-verify-plan -split-input-file -verify-diagnostics -allow-unregistered-dialect

// A correct sharded step: no diagnostics.
module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  fsdp.param @w : tensor<4xf32> in "" : "M"
  fsdp.flat_param @u for "" params [@w] offsets [0] numel 4 padded 4 shards 2 : f32
  func.func @train_step() -> tensor<f32> {
    %s = fsdp.get @u : tensor<2xf32>
    %f = fsdp.all_gather.start %s for @u group shard : tensor<2xf32> -> !fsdp.future<tensor<4xf32>>
    %full = fsdp.wait %f : !fsdp.future<tensor<4xf32>>
    %w = fsdp.view %full[0] : tensor<4xf32> to tensor<4xf32>
    %l = aten.call "aten::sum"(%w, none) : (tensor<4xf32>) -> tensor<f32>
    fsdp.free %full : tensor<4xf32>
    %g = aten.call "aten::expand"(%l, [4], false) : (tensor<f32>) -> tensor<4xf32>
    %r = fsdp.reduce_scatter.start %g for @u group shard reduce mean : tensor<4xf32> -> !fsdp.future<tensor<2xf32>>
    %gs = fsdp.wait %r : !fsdp.future<tensor<2xf32>>
    fsdp.grad @u, %gs : tensor<2xf32>
    return %l : tensor<f32>
  }
}

// -----

// Every gathered buffer is freed.
module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  fsdp.param @w : tensor<4xf32> in "" : "M"
  fsdp.flat_param @u for "" params [@w] offsets [0] numel 4 padded 4 shards 2 : f32
  func.func @train_step() -> tensor<f32> {
    %s = fsdp.get @u : tensor<2xf32>
    %f = fsdp.all_gather.start %s for @u group shard : tensor<2xf32> -> !fsdp.future<tensor<4xf32>>
    // expected-error@+1 {{'fsdp.wait' op gathers a buffer that is never freed}}
    %full = fsdp.wait %f : !fsdp.future<tensor<4xf32>>
    %l = aten.call "aten::sum"(%full, none) : (tensor<4xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// ... exactly once.
module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  fsdp.param @w : tensor<4xf32> in "" : "M"
  fsdp.flat_param @u for "" params [@w] offsets [0] numel 4 padded 4 shards 2 : f32
  func.func @train_step() -> tensor<f32> {
    %s = fsdp.get @u : tensor<2xf32>
    %f = fsdp.all_gather.start %s for @u group shard : tensor<2xf32> -> !fsdp.future<tensor<4xf32>>
    %full = fsdp.wait %f : !fsdp.future<tensor<4xf32>>
    %l = aten.call "aten::sum"(%full, none) : (tensor<4xf32>) -> tensor<f32>
    fsdp.free %full : tensor<4xf32>
    // expected-error@+1 {{'fsdp.free' op frees a gathered buffer a second time}}
    fsdp.free %full : tensor<4xf32>
    return %l : tensor<f32>
  }
}

// -----

// Nothing reads a freed buffer or a view of it.
module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  fsdp.param @w : tensor<4xf32> in "" : "M"
  fsdp.flat_param @u for "" params [@w] offsets [0] numel 4 padded 4 shards 2 : f32
  func.func @train_step() -> tensor<f32> {
    %s = fsdp.get @u : tensor<2xf32>
    %f = fsdp.all_gather.start %s for @u group shard : tensor<2xf32> -> !fsdp.future<tensor<4xf32>>
    %full = fsdp.wait %f : !fsdp.future<tensor<4xf32>>
    %w = fsdp.view %full[0] : tensor<4xf32> to tensor<4xf32>
    // expected-note@+1 {{freed here}}
    fsdp.free %full : tensor<4xf32>
    // expected-error@+1 {{'aten.call' op uses a gathered buffer after its free}}
    %l = aten.call "aten::sum"(%w, none) : (tensor<4xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// Every collective is waited.
module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error@+1 {{'fsdp.all_reduce.start' op starts a collective that is never waited}}
    %f = fsdp.all_reduce.start %x group world reduce mean : tensor<4xf32> -> !fsdp.future<tensor<4xf32>>
    return %x : tensor<4xf32>
  }
}

// -----

// A collective's input is not written before its wait.
module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
    %f = fsdp.all_reduce.start %x group world reduce mean : tensor<4xf32> -> !fsdp.future<tensor<4xf32>>
    // expected-error@+1 {{'aten.call' op writes the input of a collective before its wait}}
    %y:2 = aten.call "aten::mul_.Scalar"(%x, 2.0) {mutates = array<i64: 0>} : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
    %r = fsdp.wait %f : !fsdp.future<tensor<4xf32>>
    return %r : tensor<4xf32>
  }
}

// -----

// An all-gather sends the unit's own shard.
module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  fsdp.param @w : tensor<4xf32> in "" : "M"
  fsdp.flat_param @u for "" params [@w] offsets [0] numel 4 padded 4 shards 2 : f32
  func.func @train_step(%x: tensor<2xf32>) -> tensor<4xf32> {
    // expected-error@+1 {{'fsdp.all_gather.start' op gathers a tensor that is not the shard of @u (an fsdp.get of it)}}
    %f = fsdp.all_gather.start %x for @u group shard : tensor<2xf32> -> !fsdp.future<tensor<4xf32>>
    %full = fsdp.wait %f : !fsdp.future<tensor<4xf32>>
    %y = aten.call "aten::neg"(%full) : (tensor<4xf32>) -> tensor<4xf32>
    fsdp.free %full : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// Every rank of a shard group holds one shard.
module attributes {fsdp.world_size = 4 : i64, fsdp.shard_group_size = 4 : i64} {
  fsdp.param @w : tensor<4xf32> in "" : "M"
  // expected-error@+1 {{'fsdp.flat_param' op has 2 shards, but every rank of a shard group of 4 holds one}}
  fsdp.flat_param @u for "" params [@w] offsets [0] numel 4 padded 4 shards 2 : f32
}

// -----

// expected-error@+1 {{shard-group size 2 does not divide the world size 3}}
module attributes {fsdp.world_size = 3 : i64, fsdp.shard_group_size = 2 : i64} {
}

// -----

module {
  fsdp.param @w : tensor<4xf32> in "" : "M"
  // expected-error@+1 {{'fsdp.flat_param' op is a flat parameter, but the module does not say its world and shard-group sizes (fsdp.world_size, fsdp.shard_group_size)}}
  fsdp.flat_param @u for "" params [@w] offsets [0] numel 4 padded 4 shards 2 : f32
}

// -----

// Straight-line code only: a collective under a branch could run on some
// ranks and not on others.
module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
    "test.branch"() ({
      // expected-error@+1 {{'fsdp.all_reduce.start' op is inside a region: ranks could issue different collective sequences}}
      %f = fsdp.all_reduce.start %x group world reduce mean : tensor<4xf32> -> !fsdp.future<tensor<4xf32>>
      // expected-error@+1 {{'fsdp.wait' op is inside a region: ranks could issue different collective sequences}}
      %r = fsdp.wait %f : !fsdp.future<tensor<4xf32>>
      "test.yield"() : () -> ()
    }) : () -> ()
    return %x : tensor<4xf32>
  }
}

// -----

// A view of a gathered buffer (a transposed weight) is the buffer too.
module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  fsdp.param @w : tensor<4x3xf32> in "" : "M"
  fsdp.flat_param @u for "" params [@w] offsets [0] numel 12 padded 12 shards 2 : f32
  func.func @train_step() -> tensor<3x4xf32> {
    %s = fsdp.get @u : tensor<6xf32>
    %f = fsdp.all_gather.start %s for @u group shard : tensor<6xf32> -> !fsdp.future<tensor<12xf32>>
    %full = fsdp.wait %f : !fsdp.future<tensor<12xf32>>
    %w = fsdp.view %full[0] : tensor<12xf32> to tensor<4x3xf32>
    %wt = aten.call "aten::t"(%w) : (tensor<4x3xf32>) -> tensor<3x4xf32>
    // A copy is not: reading it after the free is fine.
    %c = aten.call "aten::mul.Scalar"(%wt, 2.0) : (tensor<3x4xf32>) -> tensor<3x4xf32>
    // expected-note@+1 {{freed here}}
    fsdp.free %full : tensor<12xf32>
    %n = aten.call "aten::neg"(%c) : (tensor<3x4xf32>) -> tensor<3x4xf32>
    // expected-error@+1 {{'aten.call' op uses a gathered buffer after its free}}
    %y = aten.call "aten::add.Tensor"(%n, %wt, 1) : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
    return %y : tensor<3x4xf32>
  }
}

// -----

// A replicated flat parameter (OSS) is held whole: gathering its shards is
// its update, nothing else.
module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  fsdp.param @w : tensor<4x3xf32> in "" : "M"
  fsdp.flat_param @u for "" params [@w] offsets [0] numel 12 padded 12 shards 2 replicated : f32
  func.func @train_step() -> tensor<12xf32> {
    %whole = fsdp.get @u : tensor<12xf32>
    %s = fsdp.local_shard %whole for @u group shard : tensor<12xf32> -> tensor<6xf32>
    // expected-error@+1 {{'fsdp.all_gather.start' op gathers the replicated flat parameter @u into something other than its update (every rank holds it whole)}}
    %f = fsdp.all_gather.start %s for @u group shard : tensor<6xf32> -> !fsdp.future<tensor<12xf32>>
    %full = fsdp.wait %f : !fsdp.future<tensor<12xf32>>
    return %full : tensor<12xf32>
  }
}

// -----

// Its update from the gathered shards needs no free.
module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  fsdp.param @w : tensor<4x3xf32> in "" : "M"
  fsdp.flat_param @u for "" params [@w] offsets [0] numel 12 padded 12 shards 2 replicated : f32
  func.func @train_step() {
    %whole = fsdp.get @u : tensor<12xf32>
    %s = fsdp.local_shard %whole for @u group shard : tensor<12xf32> -> tensor<6xf32>
    %n = aten.call "aten::neg"(%s) : (tensor<6xf32>) -> tensor<6xf32>
    %f = fsdp.all_gather.start %n for @u group shard : tensor<6xf32> -> !fsdp.future<tensor<12xf32>>
    %full = fsdp.wait %f : !fsdp.future<tensor<12xf32>>
    fsdp.update @u, %full : tensor<12xf32>
    return
  }
}

// -----

// A plan for NCCL (fsdp.backend = "nccl") reduces only what NCCL can:
// floating-point numbers (complex ones as pairs of reals) by sum or mean,
// bytes and 32- and 64-bit integers by sum.
module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64, fsdp.backend = "nccl"} {
  func.func @train_step(%a: tensor<4xcomplex<f32>>, %b: tensor<4xi64>, %c: tensor<4xi16>, %d: tensor<4xi32>) {
    %fa = fsdp.all_reduce.start %a group world reduce mean : tensor<4xcomplex<f32>> -> !fsdp.future<tensor<4xcomplex<f32>>>
    %ra = fsdp.wait %fa : !fsdp.future<tensor<4xcomplex<f32>>>
    %fb = fsdp.all_reduce.start %b group world reduce sum : tensor<4xi64> -> !fsdp.future<tensor<4xi64>>
    %rb = fsdp.wait %fb : !fsdp.future<tensor<4xi64>>
    // expected-error@+1 {{'fsdp.all_reduce.start' op reduces tensors of i16 by sum, which NCCL cannot (fsdp.backend = "nccl")}}
    %fc = fsdp.all_reduce.start %c group world reduce sum : tensor<4xi16> -> !fsdp.future<tensor<4xi16>>
    %rc = fsdp.wait %fc : !fsdp.future<tensor<4xi16>>
    // expected-error@+1 {{'fsdp.all_reduce.start' op reduces tensors of i32 by mean, which NCCL cannot (fsdp.backend = "nccl")}}
    %fd = fsdp.all_reduce.start %d group world reduce mean : tensor<4xi32> -> !fsdp.future<tensor<4xi32>>
    %rd = fsdp.wait %fd : !fsdp.future<tensor<4xi32>>
    return
  }
}
