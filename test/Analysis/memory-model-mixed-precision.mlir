// Mixed precision: a read of state in another type is a rounded copy, a
// storage of its own that dies with the read; a write of another type is a
// new storage of the state's type, which replaces the old one.
// RUN: fsdp-opt %s --split-input-file --fsdp-memory-report=json=true -o /dev/null | FileCheck %s

// State: @w 32 bytes (8 x f32), @b 16 bytes (4 x f32); the batch 8 bytes
// (4 x bf16): 56 before the step. The bf16 read of @w adds 16 (72); the
// product 16 more (88), and the read dies there (72). The bf16 read of @b
// adds 8 (80); the update's f32 widening of %x is 16 bytes while the old
// @b is still counted (96), then replaces it (80). The add's unread result
// comes and goes (88), and @b's read and the batch die there (64).
// CHECK: "instruction_peak":[72,88,80,96,88]
// CHECK-SAME: "peak_bytes":96
// CHECK-SAME: "timeline":[72,72,80,80,64]
module {
  fsdp.param @w : tensor<8xf32> in "" : "M"
  fsdp.buffer @b : tensor<4xf32> in "" : "M"
  func.func @train_step(%x: tensor<4xbf16>) -> tensor<8xbf16> {
    %w = fsdp.get @w : tensor<8xbf16>
    %y = aten.call "aten::mul.Tensor"(%w, %w) : (tensor<8xbf16>, tensor<8xbf16>) -> tensor<8xbf16>
    %b = fsdp.get @b : tensor<4xbf16>
    fsdp.update @b, %x : tensor<4xbf16>
    %z = aten.call "aten::add.Tensor"(%b, %x, 1) : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
    return %y : tensor<8xbf16>
  }
}
