// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-auto-wrap{policy=modules wrap-module=block.a,block.b},fsdp-activation-checkpointing{modules=block},fsdp-shard{world-size=2},fsdp-verify-plan)' | FileCheck %s
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-auto-wrap{policy=modules wrap-module=block},fsdp-activation-checkpointing{modules=block},fsdp-shard{world-size=2},fsdp-verify-plan)' | FileCheck %s --check-prefix=ONE
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-auto-wrap{policy=modules wrap-module=block.a,block.b},fsdp-activation-checkpointing{modules=block},fsdp-shard{sharding-strategy=SHARD_GRAD_OP world-size=2},fsdp-verify-plan)' | FileCheck %s --check-prefix=ZERO2

// A checkpointed region over two units (block.a, block.b): the
// recomputation gathers each unit for its own reads and frees it after
// them, as FSDP's hooks do when the checkpointed forward runs again, and the
// unit's backward gathers it again where it reads it (block.b's input
// gradient; block.a's weight gradient reads no weight); held to its
// backward, both units would be gathered at once.
// CHECK-LABEL: func.func @train_step
// CHECK:         {fsdp.backward_start}
// CHECK:         %[[RA:.+]] = fsdp.all_gather.start %{{.+}} for @block.a._flat_param
// CHECK-NEXT:    %[[A:.+]] = fsdp.wait %[[RA]]
// CHECK-NEXT:    %[[AV:.+]] = fsdp.view %[[A]][0]
// CHECK-NEXT:    aten.call "aten::mm"(%arg0, %[[AV]]) {fsdp.recompute = "block"}
// CHECK-NEXT:    fsdp.free %[[A]]
// CHECK:         %[[RB:.+]] = fsdp.all_gather.start %{{.+}} for @block.b._flat_param
// CHECK-NEXT:    %[[B:.+]] = fsdp.wait %[[RB]]
// CHECK-NEXT:    %[[BV:.+]] = fsdp.view %[[B]][0]
// CHECK-NEXT:    aten.call "aten::mm"(%{{.+}}, %[[BV]]) {fsdp.recompute = "block"}
// CHECK-NEXT:    fsdp.free %[[B]]
// CHECK:         aten.call "aten::tanh_backward"
// CHECK-NEXT:    fsdp.get @block.b._flat_param
// CHECK-NEXT:    fsdp.all_gather.start %{{.+}} for @block.b._flat_param
// CHECK-NOT:     fsdp.all_gather.start
// CHECK-LABEL: func.func @eval_step

// A region that is one unit keeps its one backward gather.
// ONE-LABEL: func.func @train_step
// ONE:         {fsdp.backward_start}
// ONE:         fsdp.all_gather.start %{{.+}} for @block._flat_param
// ONE:         fsdp.recompute = "block"
// ONE-NOT:     fsdp.all_gather.start
// ONE-LABEL: func.func @eval_step

// SHARD_GRAD_OP keeps each unit's forward gather through the backward.
// ZERO2-LABEL: func.func @train_step
// ZERO2:         {fsdp.backward_start}
// ZERO2-NOT:     fsdp.all_gather.start
// The evaluation step has no backward to keep a unit for: each is freed
// after its last read, and nothing is recomputed.
// ZERO2-LABEL: func.func @eval_step
// ZERO2:         fsdp.all_gather.start %{{.+}} for @block.a._flat_param
// ZERO2-NOT:     fsdp.recompute
// ZERO2:         fsdp.free
// ZERO2:         fsdp.all_gather.start %{{.+}} for @block.b._flat_param
module attributes {fsdp.modules = [["", "models.Net"], ["block", "models.Block"], ["block.a", "torch.nn.modules.linear.Linear"], ["block.b", "torch.nn.modules.linear.Linear"]]} {
  fsdp.param @block.a.weight : tensor<4x4xf32> in "block.a" : "torch.nn.modules.linear.Linear"
  fsdp.param @block.b.weight : tensor<4x4xf32> in "block.b" : "torch.nn.modules.linear.Linear"
  func.func @forward(%x: tensor<2x4xf32> {fsdp.name = "x"}) -> tensor<f32> {
    %a = fsdp.get @block.a.weight : tensor<4x4xf32>
    %b = fsdp.get @block.b.weight : tensor<4x4xf32>
    %y = aten.call "aten::mm"(%x, %a) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("block.a"("m.py":3:1))
    %t = aten.call "aten::tanh"(%y) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("block"("m.py":4:1))
    %z = aten.call "aten::mm"(%t, %b) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("block.b"("m.py":5:1))
    %u = aten.call "aten::tanh"(%z) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("block"("m.py":6:1))
    %v = aten.call "aten::mul.Tensor"(%u, %u) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("block"("m.py":7:1))
    %s = aten.call "aten::sum"(%v, none) : (tensor<2x4xf32>) -> tensor<f32> loc(""("m.py":8:1))
    return %s : tensor<f32>
  }
}
