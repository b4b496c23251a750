// Kernel results whose storage is larger than the tensor: EmbeddingBag's
// offset2bag in mean and max modes (the CPU kernel fills one element more
// and shrinks the tensor, not its storage). Sum mode returns it empty.
// RUN: fsdp-opt %s --split-input-file --fsdp-memory-report=json=true -o /dev/null | FileCheck %s

// The batch: 32 + 48 + 16 = 96 bytes. Mean: output 16, offset2bag 7 * 8 =
// 56 (6 elements), bag_size 16, max_indices 16: 200 during; after it only
// the output is live (the batch is read for the last time).
// CHECK: "instruction_peak":[200]
// CHECK-SAME: "timeline":[16]
module {
  func.func @train_step(%w: tensor<4x2xf32>, %i: tensor<6xi64>, %o: tensor<2xi64>) -> tensor<2x2xf32> {
    %r:4 = aten.call "aten::embedding_bag.padding_idx"(%w, %i, %o, false, 1, false, none, false, none) : (tensor<4x2xf32>, tensor<6xi64>, tensor<2xi64>) -> (tensor<2x2xf32>, tensor<6xi64>, tensor<2xi64>, tensor<2xi64>)
    return %r#0 : tensor<2x2xf32>
  }
}

// -----

// Sum: offset2bag is empty (144 during).
// CHECK: "instruction_peak":[144]
// CHECK-SAME: "timeline":[16]
module {
  func.func @train_step(%w: tensor<4x2xf32>, %i: tensor<6xi64>, %o: tensor<2xi64>) -> tensor<2x2xf32> {
    %r:4 = aten.call "aten::embedding_bag.padding_idx"(%w, %i, %o, false, 0, false, none, false, none) : (tensor<4x2xf32>, tensor<6xi64>, tensor<2xi64>) -> (tensor<2x2xf32>, tensor<0xi64>, tensor<2xi64>, tensor<2xi64>)
    return %r#0 : tensor<2x2xf32>
  }
}
