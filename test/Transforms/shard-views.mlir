// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-shard{world-size=2},fsdp-verify-plan)' | FileCheck %s
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-shard{sharding-strategy=SHARD_GRAD_OP world-size=2},fsdp-verify-plan)' | FileCheck %s --check-prefix=ZERO2

// Views of a parameter (here `w.t().t()`, which the backward reads to
// compute the input gradient of the second product) share the gathered
// buffer. FULL_SHARD frees the forward's buffer after the last read of any
// view of it, and the backward takes the views again from its own gather;
// the backward's own views of them (the rule's transpose) keep that buffer
// until they are read.
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[F:.+]] = fsdp.wait
// CHECK-NEXT:    %[[W:.+]] = fsdp.view %[[F]][0] : tensor<12xf32> to tensor<4x3xf32>
// CHECK-NEXT:    %[[WT:.+]] = aten.call "aten::t"(%[[W]])
// CHECK:         %[[WTT:.+]] = aten.call "aten::t"(%[[WT]])
// CHECK-NEXT:    aten.call "aten::mm"(%{{.+}}, %[[WTT]])
// CHECK-NEXT:    fsdp.free %[[F]]
// CHECK:         {fsdp.backward_start}
// CHECK:         %[[B:.+]] = fsdp.wait
// CHECK-NEXT:    %[[BW:.+]] = fsdp.view %[[B]][0] : tensor<12xf32> to tensor<4x3xf32>
// CHECK-NEXT:    %[[BWT:.+]] = aten.call "aten::t"(%[[BW]])
// CHECK-NEXT:    %[[BWTT:.+]] = aten.call "aten::t"(%[[BWT]])
// CHECK-NEXT:    %[[RULE:.+]] = aten.call "aten::transpose.int"(%[[BWTT]], 0, 1)
// CHECK-NEXT:    aten.call "aten::mm"(%{{.+}}, %[[RULE]])
// CHECK-NEXT:    fsdp.free %[[B]]

// SHARD_GRAD_OP keeps the forward's buffer, and its views, until the
// backward has read them.
// ZERO2-LABEL: func.func @train_step
// ZERO2:         %[[F:.+]] = fsdp.wait
// ZERO2-NOT:     fsdp.free
// ZERO2:         {fsdp.backward_start}
// ZERO2-NOT:     fsdp.wait
// ZERO2:         %[[RULE:.+]] = aten.call "aten::transpose.int"
// ZERO2-NEXT:    aten.call "aten::mm"(%{{.+}}, %[[RULE]])
// ZERO2-NEXT:    fsdp.free %[[F]]
module attributes {fsdp.modules = [["", "models.Net"]]} {
  fsdp.param @w : tensor<4x3xf32> in "" : "models.Net"
  func.func @forward(%x: tensor<5x3xf32> {fsdp.name = "x"}) -> tensor<f32> {
    %w = fsdp.get @w : tensor<4x3xf32>
    %wt = aten.call "aten::t"(%w) : (tensor<4x3xf32>) -> tensor<3x4xf32>
    %h = aten.call "aten::mm"(%x, %wt) : (tensor<5x3xf32>, tensor<3x4xf32>) -> tensor<5x4xf32>
    %t = aten.call "aten::tanh"(%h) : (tensor<5x4xf32>) -> tensor<5x4xf32>
    %wtt = aten.call "aten::t"(%wt) : (tensor<3x4xf32>) -> tensor<4x3xf32>
    %y = aten.call "aten::mm"(%t, %wtt) : (tensor<5x4xf32>, tensor<4x3xf32>) -> tensor<5x3xf32>
    %l = aten.call "aten::sum"(%y, none) : (tensor<5x3xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
