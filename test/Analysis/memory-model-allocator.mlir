// What the allocator's view of a step (fsdp-opt --measure-workspaces) takes
// from the memory model besides the live bytes: the bytes of constants live
// at each instruction's peak (fsdp-run builds constants once, before the
// first step, so its allocator never sees them come and go), and CPU
// offload's host bytes during each instruction (on a CPU rank the same
// allocator's). An update of host state that nothing else holds is a copy
// into the state's own buffer, so the new value's slot lives on beside it
// until its last use.
// RUN: fsdp-opt %s --fsdp-memory-report=json=true -o /dev/null | FileCheck %s

// #0 reads the host shard (16 bytes) and #1 its optimizer state (16): 32
// host bytes. #2, the constant (16 device bytes) is live from #2 to #3.
// #4 computes %n on the host (48); #5 copies it into @"u:m"'s buffer, the
// old value staying the state's; #6 computes from %n (64 with its result),
// which dies there. (Were the state to take %n's storage, 48.)
// CHECK: "constant_bytes":[0,0,16,16,0,0,0]
// CHECK-SAME: "host_instruction_peak":[32,32,32,32,48,48,64]
// CHECK-SAME: "host_peak_bytes":64
module attributes {fsdp.world_size = 1 : i64, fsdp.shard_group_size = 1 : i64} {
  fsdp.param @w : tensor<4xf32> in "" : "M"
  fsdp.flat_param @u for "" params [@w] offsets [0] numel 4 padded 4 shards 1 : f32 {fsdp.host}
  fsdp.optim_state @"u:m" : tensor<4xf32> for @u {fsdp.host}
  func.func @train_step(%x: tensor<4xf32>) {
    %s = fsdp.get @u : tensor<4xf32>
    %m = fsdp.get @"u:m" : tensor<4xf32>
    %c = aten.constant dense<2.000000e+00> : tensor<4xf32>
    %y = aten.call "aten::mul.Tensor"(%x, %c) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %n = aten.call "aten::add.Tensor"(%m, %s, 1) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    fsdp.update @"u:m", %n : tensor<4xf32>
    %z = aten.call "aten::mul.Tensor"(%n, %s) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return
  }
}
