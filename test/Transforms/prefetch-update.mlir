// fsdp-prefetch never moves the read of a flat parameter's shard above an
// fsdp.update of it: that gather keeps its place.
// RUN: fsdp-opt %s --fsdp-prefetch=forward-prefetch=true | FileCheck %s
// CHECK:     fsdp.update @b
// CHECK:     fsdp.all_gather.start %{{.*}} for @b group {{ *}}shard :
// CHECK-NOT: fsdp.prefetch
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
    %fb = fsdp.all_gather.start %sb for @b group shard : tensor<2xf32> -> !fsdp.future<tensor<4xf32>>
    %bb = fsdp.wait %fb : !fsdp.future<tensor<4xf32>>
    %z = aten.call "aten::mul.Tensor"(%y, %bb) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    fsdp.free %bb : tensor<4xf32>
    return %z : tensor<4xf32>
  }
}
