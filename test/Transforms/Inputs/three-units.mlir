// The input of prefetch.mlir, limit-all-gathers.mlir and apply-schedule.mlir.
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
