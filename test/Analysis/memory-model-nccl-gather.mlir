// What an all-gather holds over NCCL: the shard it sends stays alive until
// the wait (NCCL reads it while the collective runs, and the runtime holds
// it), where over Gloo its last use, the start, frees it. Mixed precision
// sends a rounded copy of the state's shard, so the two differ by that
// copy from the start to the wait.
// RUN: fsdp-opt %s --split-input-file --fsdp-memory-report=json=true -o /dev/null | FileCheck %s

// Gloo. State: the f32 shard of @a (16 bytes); the batch 16: 32. The bf16
// read adds 8 (40); the start's output 16 (56), and the read dies with
// the start (48); %z 16 more (64), through the wait and the view; %y 16
// (80), and the batch dies there (64); the free (48).
// CHECK: "instruction_peak":[40,56,64,64,64,80,64]
// CHECK-SAME: "peak_bytes":80
// CHECK-SAME: "timeline":[40,48,64,64,64,64,48]

// NCCL: the read (8 bytes) lives until the wait: 8 more after the start
// and during %z and the wait.
// CHECK: "instruction_peak":[40,56,72,72,64,80,64]
// CHECK-SAME: "peak_bytes":80
// CHECK-SAME: "timeline":[40,56,72,64,64,64,48]

module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  fsdp.param @w : tensor<2x4xf32> in "a" : "L"
  fsdp.flat_param @a for "a" params [@w] offsets [0] numel 8 padded 8 shards 2 : f32
  func.func @train_step(%x: tensor<2x4xbf16>) -> (tensor<2x4xbf16>, tensor<2x4xbf16>) {
    %s = fsdp.get @a : tensor<4xbf16>
    %f = fsdp.all_gather.start %s for @a group shard : tensor<4xbf16> -> !fsdp.future<tensor<8xbf16>>
    %z = aten.call "aten::mul.Tensor"(%x, %x) : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<2x4xbf16>
    %b = fsdp.wait %f : !fsdp.future<tensor<8xbf16>>
    %w = fsdp.view %b[0] : tensor<8xbf16> to tensor<2x4xbf16>
    %y = aten.call "aten::mul.Tensor"(%w, %x) : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<2x4xbf16>
    fsdp.free %b : tensor<8xbf16>
    return %y, %z : tensor<2x4xbf16>, tensor<2x4xbf16>
  }
}

// -----

module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64, fsdp.backend = "nccl"} {
  fsdp.param @w : tensor<2x4xf32> in "a" : "L"
  fsdp.flat_param @a for "a" params [@w] offsets [0] numel 8 padded 8 shards 2 : f32
  func.func @train_step(%x: tensor<2x4xbf16>) -> (tensor<2x4xbf16>, tensor<2x4xbf16>) {
    %s = fsdp.get @a : tensor<4xbf16>
    %f = fsdp.all_gather.start %s for @a group shard : tensor<4xbf16> -> !fsdp.future<tensor<8xbf16>>
    %z = aten.call "aten::mul.Tensor"(%x, %x) : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<2x4xbf16>
    %b = fsdp.wait %f : !fsdp.future<tensor<8xbf16>>
    %w = fsdp.view %b[0] : tensor<8xbf16> to tensor<2x4xbf16>
    %y = aten.call "aten::mul.Tensor"(%w, %x) : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<2x4xbf16>
    fsdp.free %b : tensor<8xbf16>
    return %y, %z : tensor<2x4xbf16>, tensor<2x4xbf16>
  }
}
