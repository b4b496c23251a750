// RUN: fsdp-opt %s -split-input-file --fsdp-append-loss | FileCheck %s

// A language model's [batch, seq, vocab] against [batch, seq]: the class
// scores are last; positions are flattened into rows. The target comes from
// the module (what fsdp_export.save stored in the model file).
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:      %{{.+}}: tensor<2x5x7xf32> {fsdp.name = "x"}, %[[Y:.+]]: tensor<2x5xi64> {fsdp.name = "labels"})
// CHECK:         %[[S:.+]] = aten.call "aten::reshape"(%arg0, [10, 7]) : (tensor<2x5x7xf32>) -> tensor<10x7xf32>
// CHECK-NEXT:    %[[L:.+]] = aten.call "aten::reshape"(%[[Y]], [10]) : (tensor<2x5xi64>) -> tensor<10xi64>
// CHECK-NEXT:    %[[P:.+]] = aten.call "aten::log_softmax.int"(%[[S]], 1, none)
// CHECK-NEXT:    aten.call "aten::nll_loss_forward"(%[[P]], %[[L]], none, 1, -100)
module attributes {fsdp.targets = ["labels:2x5xi64"]} {
  func.func @forward(%x: tensor<2x5x7xf32> {fsdp.name = "x"}) -> tensor<2x5x7xf32> {
    return %x : tensor<2x5x7xf32>
  }
}

// -----

// Class scores in dimension 1, as F.cross_entropy has them for [N, C, d]:
// moved last first.
// CHECK-LABEL: func.func @train_step(
// CHECK:         %[[P:.+]] = aten.call "aten::permute"(%arg0, [0, 2, 1]) : (tensor<2x7x5xf32>) -> tensor<2x5x7xf32>
// CHECK-NEXT:    aten.call "aten::reshape"(%[[P]], [10, 7]) : (tensor<2x5x7xf32>) -> tensor<10x7xf32>
module attributes {fsdp.targets = ["labels:2x5xi64"]} {
  func.func @forward(%x: tensor<2x7x5xf32> {fsdp.name = "x"}) -> tensor<2x7x5xf32> {
    return %x : tensor<2x7x5xf32>
  }
}
