// CPU offload: state marked `fsdp.host`, its reads, `fsdp.to_host` copies
// and what ATen computes from host values are host memory, counted apart
// (host_peak_bytes); the device's peak counts the device only.
// RUN: fsdp-opt %s --fsdp-memory-report=json=true -o /dev/null | FileCheck %s

// Host: the shard (16 bytes) and its optimizer state (16) before the step;
// the reduced shard's host copy (16) and the update's result (16) bring it
// to 64. The device holds the batch (16), the gathered buffer the
// reduction sends (32), the other rank's chunk it receives (16; its own
// is added from what it sends), the mean's divisor (4) and the reduced
// shard (16): 84 at the wait, none of the host's bytes among them.
// CHECK: "host_peak_bytes":64
// CHECK-SAME: "peak_bytes":84
// CHECK-SAME: "start_bytes":16
module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  fsdp.param @w : tensor<8xf32> in "" : "M"
  fsdp.flat_param @u for "" params [@w] offsets [0] numel 8 padded 8 shards 2 : f32 {fsdp.host}
  fsdp.optim_state @"u:m" : tensor<4xf32> for @u {fsdp.host}
  func.func @train_step(%x: tensor<4xf32>) {
    %s = fsdp.get @u : tensor<4xf32>
    %d = fsdp.to_device %s : tensor<4xf32>
    %f = fsdp.all_gather.start %d for @u group shard : tensor<4xf32> -> !fsdp.future<tensor<8xf32>>
    %g = fsdp.wait %f : !fsdp.future<tensor<8xf32>>
    %v = fsdp.view %g[0] : tensor<8xf32> to tensor<8xf32>
    %r = fsdp.reduce_scatter.start %v for @u group shard reduce mean : tensor<8xf32> -> !fsdp.future<tensor<4xf32>>
    fsdp.free %g : tensor<8xf32>
    %w = fsdp.wait %r : !fsdp.future<tensor<4xf32>>
    %h = fsdp.to_host %w : tensor<4xf32>
    %m = fsdp.get @"u:m" : tensor<4xf32>
    %n = aten.call "aten::add.Tensor"(%m, %h, 1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    fsdp.update @"u:m", %n : tensor<4xf32>
    return
  }
}
