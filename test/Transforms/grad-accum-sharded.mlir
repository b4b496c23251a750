// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-shard{world-size=2},fsdp-grad-accum{micro-batches=2})' | FileCheck %s
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-fully-shard{loss=none world-size=2 grad-accum=2 optimizer=sgd lr=0.1})' | FileCheck %s --check-prefix=PIPE
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-fully-shard{loss=none world-size=2 grad-accum=2 optimizer=sgd lr=0.1},fsdp-memory-report)' -o /dev/null | FileCheck %s --check-prefix=REPORT
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-fully-shard{loss=none world-size=2 grad-accum=2 optimizer=sgd lr=0.1},fsdp-memory-report{json=true})' -o /dev/null | FileCheck %s --check-prefix=JSON

// The sharded step: each micro-batch gathers, computes, reduce-scatters and
// waits on its own (FSDP without no_sync), so what adds up is the reduced
// shard; one fsdp.grad of the sum after the second micro-batch.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:      {fsdp.micro_batch = 0 : i64, fsdp.name = "x"}
// CHECK-SAME:      {fsdp.micro_batch = 1 : i64, fsdp.name = "x"}
// CHECK:         fsdp.all_gather.start
// CHECK:         fsdp.reduce_scatter.start
// CHECK:         %[[R0:.+]] = fsdp.wait %{{.+}} : <tensor<4xf32>>
// CHECK-NOT:     fsdp.grad
// CHECK:         fsdp.get @_flat_param {fsdp.micro_batch_start}
// CHECK:         fsdp.all_gather.start
// CHECK:         fsdp.reduce_scatter.start
// CHECK:         %[[R1:.+]] = fsdp.wait %{{.+}} : <tensor<4xf32>>
// CHECK-NEXT:    %[[SUM:.+]] = aten.call "aten::add.Tensor"(%[[R0]], %[[R1]], 1)
// CHECK-NEXT:    fsdp.grad @_flat_param, %[[SUM]] : tensor<4xf32>

// The whole pipeline: the schedule and fsdp-verify-plan accept the two
// micro-batches; one update of the flat parameter, after the second.
// PIPE-LABEL: func.func @train_step(
// PIPE:         fsdp.all_gather.start
// PIPE:         fsdp.get @_flat_param {fsdp.micro_batch_start}
// PIPE:         fsdp.all_gather.start
// PIPE:         aten.call "aten::add.Tensor"
// PIPE:         fsdp.update @_flat_param
// PIPE-NOT:     fsdp.update @_flat_param
// The memory report: each micro-batch gathers the unit for its forward
// (the backward needs no parameter here), a forward phase again in the
// second.
// REPORT: peak while a unit's parameters are gathered:
// REPORT-NEXT: (root) forward (micro-batch 1) {{.*}} (instructions #1-#5)
// REPORT-NEXT: (root) forward (micro-batch 2) {{.*}} (instructions #15-#19)
// JSON: "units":[{{{.*}}"micro_batch":0,{{.*}}"phase":"forward"{{.*}}},{{{.*}}"micro_batch":1,{{.*}}"phase":"forward"{{.*}}}]

module attributes {fsdp.modules = [["", "M"]]} {
  fsdp.param @w : tensor<2x4xf32> in "" : "M"
  func.func @forward(%x: tensor<3x4xf32> {fsdp.name = "x"}) -> tensor<f32> {
    %w = fsdp.get @w : tensor<2x4xf32>
    %y = aten.call "aten::linear"(%x, %w, none) : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<3x2xf32>
    %l = aten.call "aten::sum"(%y, none) : (tensor<3x2xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
