// Dynamic loss scaling (grad-scaler), ShardedGradScaler's arithmetic: the
// backward's seed times the scale (the state's zero start stands for
// init-scale); each gradient checked for inf/NaN before it is multiplied by
// the scale's reciprocal (in f64, cast to f32); the step skips (every
// update keeps the state's old value, the step count included) when any
// was found; the scale backs off after a skip and grows after
// growth-interval good steps. The step returns the scale and the skip.
// RUN: fsdp-opt %s --fsdp-optimizer="optimizer=sgd lr=0.1 grad-scaler=true init-scale=1024 growth-interval=3" | FileCheck %s
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-shard{world-size=2},fsdp-optimizer{optimizer=adam lr=0.1 grad-scaler=true},fsdp-verify-plan)' | FileCheck %s --check-prefix=SHARDED

// CHECK:       module attributes {fsdp.grad_scaler = {backoff_factor = 5.000000e-01 : f64, growth_factor = 2.000000e+00 : f64, growth_interval = 3 : i64, init_scale = 1.024000e+03 : f64}
// CHECK:       fsdp.optim_state @"scaler:scale" : tensor<f32>
// CHECK:       fsdp.optim_state @"scaler:growth_tracker" : tensor<i32>
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:      %[[GA:[a-z0-9]+]]: tensor<3xf32>, %[[GB:[a-z0-9]+]]: tensor<2xf32>) -> (tensor<f32>, tensor<f32> {fsdp.metric = "scale"}, tensor<f32> {fsdp.metric = "skipped"})
// CHECK:         %[[SEED:.+]] = aten.constant dense<1.000000e+00> : tensor<f32> {fsdp.backward_start}
// CHECK-NEXT:    %[[STORED:.+]] = fsdp.get @"scaler:scale" {fsdp.optimizer_op} : tensor<f32>
// CHECK-NEXT:    %[[UNSET:.+]] = aten.call "aten::eq.Scalar"(%[[STORED]], 0.000000e+00)
// CHECK-NEXT:    %[[INIT:.+]] = aten.constant dense<1.024000e+03> : tensor<f32>
// CHECK-NEXT:    %[[SCALE:.+]] = aten.call "aten::where.self"(%[[UNSET]], %[[INIT]], %[[STORED]])
// CHECK-NEXT:    %[[S64:.+]] = aten.call "aten::to.dtype"(%[[SCALE]], f64, false, false, none)
// CHECK-NEXT:    %[[R64:.+]] = aten.call "aten::reciprocal"(%[[S64]])
// CHECK-NEXT:    %[[INV:.+]] = aten.call "aten::to.dtype"(%[[R64]], f32, false, false, none)
// The scaled seed starts the backward: it is not the optimizer's.
// CHECK-NEXT:    %[[SCALED:.+]] = aten.call "aten::mul.Tensor"(%[[SEED]], %[[SCALE]]) : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT:    aten.call "aten::mul.Tensor"(%{{.+}}, %[[SCALED]])
// CHECK-NEXT:    %[[FA:.+]] = aten.call "aten::isfinite"(%[[GA]]) {fsdp.optimizer_op} : (tensor<3xf32>) -> tensor<3xi1>
// CHECK-NEXT:    %[[AA:.+]] = aten.call "aten::all"(%[[FA]])
// CHECK-NEXT:    %[[NA:.+]] = aten.call "aten::logical_not"(%[[AA]])
// CHECK-NEXT:    %[[CA:.+]] = aten.call "aten::to.dtype"(%[[NA]], f32, false, false, none)
// CHECK-NEXT:    %[[UA:.+]] = aten.call "aten::mul.Tensor"(%[[GA]], %[[INV]])
// CHECK:         %[[CB:.+]] = aten.call "aten::to.dtype"(%{{.+}}, f32, false, false, none) {fsdp.optimizer_op} : (tensor<i1>) -> tensor<f32>
// CHECK-NEXT:    %[[FOUND:.+]] = aten.call "aten::add.Tensor"(%[[CA]], %[[CB]], 1)
// CHECK-NEXT:    %[[UB:.+]] = aten.call "aten::mul.Tensor"(%[[GB]], %[[INV]])
// CHECK-NEXT:    %[[SKIP:.+]] = aten.call "aten::ge.Scalar"(%[[FOUND]], 1.000000e+00) {fsdp.optimizer_op} : (tensor<f32>) -> tensor<i1>
// CHECK-NEXT:    %[[PA:.+]] = aten.call "aten::add.Tensor"(%{{.+}}, %[[UA]], -1.000000e-01)
// CHECK-NEXT:    %[[OLDA:.+]] = fsdp.get @a {fsdp.optimizer_op} : tensor<3xf32>
// CHECK-NEXT:    %[[KEEPA:.+]] = aten.call "aten::where.self"(%[[SKIP]], %[[OLDA]], %[[PA]])
// CHECK-NEXT:    fsdp.update @a, %[[KEEPA]]
// CHECK:         fsdp.update @b
// CHECK-NEXT:    %[[TRACKER:.+]] = fsdp.get @"scaler:growth_tracker" {fsdp.optimizer_op} : tensor<i32>
// CHECK-NEXT:    %[[BACKED:.+]] = aten.call "aten::mul.Scalar"(%[[SCALE]], 5.000000e-01)
// CHECK-NEXT:    %[[GOOD:.+]] = aten.call "aten::add.Scalar"(%[[TRACKER]], 1, 1) {fsdp.optimizer_op} : (tensor<i32>) -> tensor<i32>
// CHECK-NEXT:    %[[GROWS:.+]] = aten.call "aten::eq.Scalar"(%[[GOOD]], 3)
// CHECK-NEXT:    %[[GROWN:.+]] = aten.call "aten::mul.Scalar"(%[[SCALE]], 2.000000e+00)
// CHECK-NEXT:    %[[FINITE:.+]] = aten.call "aten::isfinite"(%[[GROWN]])
// CHECK-NEXT:    %[[GROWN2:.+]] = aten.call "aten::where.self"(%[[FINITE]], %[[GROWN]], %[[SCALE]])
// CHECK-NEXT:    %[[KEPT:.+]] = aten.call "aten::where.self"(%[[GROWS]], %[[GROWN2]], %[[SCALE]])
// CHECK-NEXT:    %[[ZERO:.+]] = aten.constant dense<0> : tensor<i32>
// CHECK-NEXT:    %[[COUNTED:.+]] = aten.call "aten::where.self"(%[[GROWS]], %[[ZERO]], %[[GOOD]])
// CHECK-NEXT:    %[[NEXT:.+]] = aten.call "aten::where.self"(%[[SKIP]], %[[BACKED]], %[[KEPT]])
// CHECK-NEXT:    fsdp.update @"scaler:scale", %[[NEXT]]
// CHECK-NEXT:    %[[T:.+]] = aten.call "aten::where.self"(%[[SKIP]], %[[ZERO]], %[[COUNTED]])
// CHECK-NEXT:    fsdp.update @"scaler:growth_tracker", %[[T]]
// CHECK-NEXT:    %[[SKIPPED:.+]] = aten.call "aten::to.dtype"(%[[SKIP]], f32, false, false, none)
// CHECK-NEXT:    return %{{.+}}, %[[SCALE]], %[[SKIPPED]]

// Sharded: each rank checks its shards; the count is summed over the world
// before any update; Adam's step count moves after the decision and keeps
// its old value on a skip, as its moments do.
// SHARDED:      %[[COUNT:.+]] = aten.call "aten::to.dtype"(%{{.+}}, f32, false, false, none) {fsdp.optimizer_op} : (tensor<i1>) -> tensor<f32>
// SHARDED:      %[[F:.+]] = fsdp.all_reduce.start %[[COUNT]] group world reduce sum {fsdp.optimizer_op} : tensor<f32> -> <tensor<f32>>
// SHARDED-NEXT: %[[FOUND:.+]] = fsdp.wait %[[F]] {fsdp.optimizer_op} : <tensor<f32>>
// SHARDED-NEXT: %[[SKIP:.+]] = aten.call "aten::ge.Scalar"(%[[FOUND]], 1.000000e+00)
// SHARDED:      fsdp.update @_flat_param,
// SHARDED-NEXT: %[[OLDM:.+]] = fsdp.get @"_flat_param:exp_avg" {fsdp.optimizer_op} : tensor<3xf32>
// SHARDED-NEXT: %[[KEEPM:.+]] = aten.call "aten::where.self"(%[[SKIP]], %[[OLDM]],
// SHARDED-NEXT: fsdp.update @"_flat_param:exp_avg", %[[KEEPM]]
// SHARDED:      fsdp.update @"scaler:growth_tracker"
// SHARDED-NEXT: %[[OLDS:.+]] = fsdp.get @"optim:step" {fsdp.optimizer_op} : tensor<f64>
// SHARDED-NEXT: %[[KEEPS:.+]] = aten.call "aten::where.self"(%[[SKIP]], %[[OLDS]], %{{.+}})
// SHARDED-NEXT: fsdp.update @"optim:step", %[[KEEPS]]
module {
  fsdp.param @a : tensor<3xf32> in "" : "M"
  fsdp.param @b : tensor<2xf32> in "" : "M"
  func.func @train_step(%ga: tensor<3xf32>, %gb: tensor<2xf32>) -> tensor<f32> {
    %a = fsdp.get @a : tensor<3xf32>
    %b = fsdp.get @b : tensor<2xf32>
    %l = aten.call "aten::sum"(%a, none) : (tensor<3xf32>) -> tensor<f32>
    %s = aten.constant dense<1.0> : tensor<f32> {fsdp.backward_start}
    %u = aten.call "aten::mul.Tensor"(%l, %s) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    fsdp.grad @a, %ga : tensor<3xf32>
    fsdp.grad @b, %gb : tensor<2xf32>
    return %l : tensor<f32>
  }
}
