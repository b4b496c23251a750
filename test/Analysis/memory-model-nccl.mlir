// The memory model for a plan that runs over NCCL (fsdp-shard's
// backend=nccl, module attribute fsdp.backend): the step of
// memory-model.mlir, whose reduce-scatter then holds its input and the
// 16-byte shard it writes and returns, where Gloo's holds a 32-byte receive
// buffer and sums it into a new shard at the wait.
// RUN: fsdp-opt %s --fsdp-memory-report=json=true -o /dev/null | FileCheck %s
// Up to #14, as over Gloo; #15 holds the sum (32) and the shard (16): 64;
// #16's wait returns that shard, the sum goes (32); #17 the update (16).
// CHECK: "instruction_peak":[48,80,80,80,80,112,112,112,80,112,80,80,112,80,112,64,64,32]
// CHECK-SAME: "timeline":[48,80,80,80,80,112,112,80,80,80,80,80,80,80,48,64,32,16]

module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64, fsdp.backend = "nccl"} {
  fsdp.param @w : tensor<2x4xf32> in "a" : "L"
  fsdp.flat_param @a for "a" params [@w] offsets [0] numel 8 padded 8 shards 2 : f32
  func.func @train_step(%x: tensor<2x4xf32>) {
    %s = fsdp.get @a : tensor<4xf32>
    %f = fsdp.all_gather.start %s for @a group shard : tensor<4xf32> -> !fsdp.future<tensor<8xf32>>
    %b = fsdp.wait %f : !fsdp.future<tensor<8xf32>>
    %w = fsdp.view %b[0] : tensor<8xf32> to tensor<2x4xf32>
    %t = aten.call "aten::t"(%w) : (tensor<2x4xf32>) -> tensor<4x2xf32>
    %c = aten.call "aten::contiguous"(%t, 0) : (tensor<4x2xf32>) -> tensor<4x2xf32>
    %r = aten.call "aten::reshape"(%c, [8]) : (tensor<4x2xf32>) -> tensor<8xf32>
    fsdp.free %b : tensor<8xf32>
    %xt = aten.call "aten::t"(%x) : (tensor<2x4xf32>) -> tensor<4x2xf32>
    %y = aten.call "aten::reshape"(%xt, [8]) : (tensor<4x2xf32>) -> tensor<8xf32>
    %z:2 = aten.call "aten::relu_"(%y) {mutates = array<i64: 0>} : (tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
    %v = aten.call "aten::view"(%z#1, [2, 4]) : (tensor<8xf32>) -> tensor<2x4xf32>
    %u:2 = aten.call "aten::relu_"(%v) {mutates = array<i64: 0>} : (tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
    %ur = aten.call "aten::reshape"(%u#1, [8]) : (tensor<2x4xf32>) -> tensor<8xf32>
    %sum = aten.call "aten::add.Tensor"(%r, %ur, 1) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %g = fsdp.reduce_scatter.start %sum for @a group shard reduce mean : tensor<8xf32> -> !fsdp.future<tensor<4xf32>>
    %gs = fsdp.wait %g : !fsdp.future<tensor<4xf32>>
    fsdp.update @a, %gs : tensor<4xf32>
    return
  }
}
