// RUN: fsdp-opt %s --emit plan | FileCheck %s

fsdp.param @fc.weight : tensor<4x3xf32> in "fc" : "torch.nn.modules.linear.Linear" aliases ["head.weight"]
fsdp.buffer @bn.num_batches_tracked : tensor<i64> in "bn" : "torch.nn.modules.batchnorm.BatchNorm1d"

func.func @forward(%x: tensor<2x3xf32> {fsdp.name = "x"}, %i: tensor<2xi64> {fsdp.name = "idx"}) -> tensor<2x4xf32> {
  %w = fsdp.get @fc.weight : tensor<4x3xf32>
  %n = fsdp.get @bn.num_batches_tracked : tensor<i64>
  %n2:2 = aten.call "aten::add_.Scalar"(%n, 1, 1) {mutates = array<i64: 0>} : (tensor<i64>) -> (tensor<i64>, tensor<i64>)
  %y = aten.call "aten::linear"(%x, %w, none) : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<2x4xf32>
  %m = aten.constant dense<[true, false]> : tensor<2xi1>
  %c = aten.constant dense<0xFF800000> : tensor<2xf32>
  %s:2 = aten.call "aten::split.Tensor"(%y, 2, 1) {list_result} : (tensor<2x4xf32>) -> (tensor<2x2xf32>, tensor<2x2xf32>)
  %cat = aten.call "aten::cat"([%s#1, %s#0], -1) : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
  %f = aten.call "aten::masked_fill.Scalar"(%cat, %m, 0xFFF0000000000000 : f64) : (tensor<2x4xf32>, tensor<2xi1>) -> tensor<2x4xf32>
  %t = aten.call "aten::to.dtype"(%f, f32, false, false, none) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %g = aten.call "aten::index.Tensor"(%t, [none, %i]) : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<2x2xf32>
  %v = aten.call "aten::view"(%t, [2, 4]) : (tensor<2x4xf32>) -> tensor<2x4xf32>
  fsdp.update @bn.num_batches_tracked, %n2#1 : tensor<i64>
  return %v : tensor<2x4xf32>
}

// CHECK:      "format": "fsdp-plan",
// CHECK-NEXT: "version": 12,
// CHECK-NEXT: "function": "forward",
// CHECK-NEXT: "num_slots": {{[0-9]+}},
// CHECK-NEXT: "world_size": 1,
// CHECK-NEXT: "shard_group_size": 1,
// CHECK-NEXT: "sharding": "",
// CHECK:      "state": [
// CHECK-NEXT:   {"aliases":["head.weight"],"class":"torch.nn.modules.linear.Linear","dtype":"f32","kind":"param","module":"fc","name":"fc.weight","shape":[4,3]},
// CHECK-NEXT:   {"aliases":[],"class":"torch.nn.modules.batchnorm.BatchNorm1d","dtype":"i64","kind":"buffer","module":"bn","name":"bn.num_batches_tracked","shape":[]}
// CHECK:      "inputs": [
// CHECK-NEXT:   {"dtype":"f32","name":"x","shape":[2,3],"slot":0},
// CHECK-NEXT:   {"dtype":"i64","name":"idx","shape":[2],"slot":1}
// CHECK:      "outputs": [[[V:[0-9]+]]],
// CHECK:      "instructions": [
// CHECK-NEXT:   {"free":[],"kind":"get","result":2,"state":"fc.weight"},
// CHECK-NEXT:   {"free":[],"kind":"get","result":3,"state":"bn.num_batches_tracked"},
// CHECK-NEXT:   {"args":[{"t":3},{"i":1},{"i":1}],"free":[3,4],"kind":"call","list_result":false,"loc":"{{.*}}emit.mlir:9:11","mutates":[0],"num_schema_results":1,"op":"aten::add_.Scalar","results":[4,5]},
// CHECK-NEXT:   {"args":[{"t":0},{"t":2},{"none":true}],"free":[0,2],"kind":"call","list_result":false,{{.*}}"mutates":[],"num_schema_results":1,"op":"aten::linear","results":[6]},
// CHECK-NEXT:   {"dtype":"i1","free":[],"hex":"0100","kind":"constant","result":7,"shape":[2]},
// CHECK-NEXT:   {"dtype":"f32","free":[8],"hex":"000080ff000080ff","kind":"constant","result":8,"shape":[2]},
// CHECK-NEXT:   {"args":[{"t":6},{"i":2},{"i":1}],"free":[6],"kind":"call","list_result":true,{{.*}}"mutates":[],"num_schema_results":2,"op":"aten::split.Tensor","results":[9,10]},
// CHECK-NEXT:   {"args":[{"tl":[10,9]},{"i":-1}],"free":[10,9],"kind":"call",{{.*}}"op":"aten::cat","results":[11]},
// CHECK-NEXT:   {"args":[{"t":11},{"t":7},{"f":"-inf"}],"free":[11,7],{{.*}}"op":"aten::masked_fill.Scalar"
// CHECK-NEXT:   {"args":[{"t":12},{"dtype":"f32"},{"b":false},{"b":false},{"none":true}],"free":[12],{{.*}}"op":"aten::to.dtype"
// CHECK-NEXT:   {"args":[{"t":13},{"otl":[null,1]}],"free":[1,14],{{.*}}"op":"aten::index.Tensor","results":[14]},
// CHECK-NEXT:   {"args":[{"t":13},{"l":[{"i":2},{"i":4}]}],"free":[13],{{.*}}"op":"aten::view","results":[[[V]]]},
// CHECK-NEXT:   {"free":[5],"kind":"update","state":"bn.num_batches_tracked","value":5}
// CHECK-NEXT: ]
