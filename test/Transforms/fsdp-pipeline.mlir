// The named pipeline and fsdp-opt's FSDP flags build the same sharded step.
// RUN: fsdp-opt %s --fsdp-fully-shard="loss=none optimizer=adamw lr=0.01 world-size=4 auto-wrap-policy=modules wrap-module=a,b" > %t.pipeline.mlir
// RUN: fsdp-opt %s --loss none --optimizer adamw --lr 0.01 --world-size 4 --auto-wrap modules --wrap-module a --wrap-module b > %t.flags.mlir
// RUN: diff %t.pipeline.mlir %t.flags.mlir
// RUN: FileCheck %s < %t.flags.mlir
// RUN: fsdp-opt %s --loss none --optimizer adamw --lr 0.01 --world-size 4 --auto-wrap modules --wrap-module a --wrap-module b --fsdp-report --emit plan -o %t.plan | FileCheck %s --check-prefix=REPORT
// RUN: FileCheck %s --check-prefix=PLAN < %t.plan

// The optimizer updates each rank's shard: its state is shaped like the
// shard (the root's 10 elements padded to 12, 3 per rank).
// CHECK:       fsdp.optim_state @"optim:step" : tensor<f64>
// CHECK-NEXT:  fsdp.optim_state @"_flat_param:exp_avg" : tensor<3xf32> for @_flat_param
// CHECK-NEXT:  fsdp.optim_state @"_flat_param:exp_avg_sq" : tensor<3xf32> for @_flat_param
// CHECK-LABEL: func.func @train_step
// CHECK:         %[[S:.+]] = fsdp.get @_flat_param : tensor<3xf32>
// CHECK:         %[[G:.+]] = fsdp.wait %{{.+}} : <tensor<3xf32>>
// CHECK:         aten.call "aten::mul.Scalar"(%[[S]], 9.999000e-01) {fsdp.optimizer_op} : (tensor<3xf32>) -> tensor<3xf32>
// CHECK-NEXT:    %[[M:.+]] = fsdp.get @"_flat_param:exp_avg" {fsdp.optimizer_op} : tensor<3xf32>
// CHECK-NEXT:    aten.call "aten::lerp_.Scalar"(%[[M]], %[[G]], 0.099999999999999978)
// CHECK:         fsdp.update @_flat_param, %{{.+}} : tensor<3xf32>
// CHECK-NOT:     fsdp.grad

// The units, their sizes and what a rank holds against the whole model.
// REPORT:      FSDP plan: FULL_SHARD, 4 ranks, shard groups of 4
// REPORT-NEXT: unit module   params   numel   padded   shard
// REPORT-NEXT: 0    a        1        12      12       3
// REPORT-NEXT: 1    b        1        16      16       4
// REPORT-NEXT: 2    (root)   2        10      12       3
// REPORT-NEXT: not sharded (ignored or never updated): 12 B of parameters on every rank
// REPORT-NEXT: per rank        sharded    unsharded
// REPORT-NEXT: parameters      52 B       164 B
// REPORT-NEXT: gradients       40 B       152 B
// REPORT-NEXT: optimizer state 88 B       312 B
// REPORT-NEXT: total           180 B      628 B

// The plan: world and shard group, flat parameters with their members, and
// the collectives as instructions.
// PLAN:      "world_size": 4,
// PLAN-NEXT: "shard_group_size": 4,
// PLAN-NEXT: "sharding": "FULL_SHARD",
// PLAN:      {"aliases":[],"dtype":"f32","kind":"flat_param","module":"","name":"_flat_param","numel":10,"padded":12,"params":[{"aliases":[],"class":"torch.nn.modules.linear.Linear","dtype":"f32","module":"head","name":"head.weight","offset":0,"shape":[2,4]},{"aliases":[],"class":"torch.nn.modules.linear.Linear","dtype":"f32","module":"head","name":"head.bias","offset":8,"shape":[2]}],"replicated":false,"shape":[3],"shards":4},
// PLAN:      {"free":[],"kind":"get","result":[[S:[0-9]+]],"state":"a._flat_param"},
// PLAN-NEXT: {"free":[],"group":"shard","input":[[S]],"kind":"all_gather","result":[[F:[0-9]+]],"unit":"a._flat_param"},
// PLAN-NEXT: {"dtype":"f32","free":[[[F]]],"future":[[F]],"kind":"wait","result":[[B:[0-9]+]],"shape":[12]},
// PLAN-NEXT: {"buffer":[[B]],"dtype":"f32","free":[],"kind":"view","offset":0,"result":[[W:[0-9]+]],"shape":[4,3]},
// PLAN:      {"buffer":[[B]],"free":[[[B]]],"kind":"free"},
// PLAN:      {"free":[{{[0-9]+}}],"group":"shard","input":{{[0-9]+}},"kind":"reduce_scatter","reduce":"mean","result":{{[0-9]+}},"unit":"_flat_param"},

module attributes {fsdp.modules = [["", "models.Net"], ["a", "torch.nn.modules.linear.Linear"], ["b", "torch.nn.modules.linear.Linear"], ["head", "torch.nn.modules.linear.Linear"]]} {
  fsdp.param @a.weight : tensor<4x3xf32> in "a" : "torch.nn.modules.linear.Linear"
  fsdp.param @b.weight : tensor<4x4xf32> in "b" : "torch.nn.modules.linear.Linear"
  fsdp.param @head.weight : tensor<2x4xf32> in "head" : "torch.nn.modules.linear.Linear"
  fsdp.param @head.bias : tensor<2xf32> in "head" : "torch.nn.modules.linear.Linear"
  fsdp.param @unused : tensor<3xf32> in "" : "models.Net"
  func.func @forward(%x: tensor<5x3xf32> {fsdp.name = "x"}) -> tensor<f32> {
    %wa = fsdp.get @a.weight : tensor<4x3xf32>
    %wb = fsdp.get @b.weight : tensor<4x4xf32>
    %wh = fsdp.get @head.weight : tensor<2x4xf32>
    %bh = fsdp.get @head.bias : tensor<2xf32>
    %h = aten.call "aten::linear"(%x, %wa, none) : (tensor<5x3xf32>, tensor<4x3xf32>) -> tensor<5x4xf32>
    %r = aten.call "aten::relu"(%h) : (tensor<5x4xf32>) -> tensor<5x4xf32>
    %h2 = aten.call "aten::linear"(%r, %wb, none) : (tensor<5x4xf32>, tensor<4x4xf32>) -> tensor<5x4xf32>
    %y = aten.call "aten::linear"(%h2, %wh, %bh) : (tensor<5x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<5x2xf32>
    %l = aten.call "aten::sum"(%y, none) : (tensor<5x2xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
