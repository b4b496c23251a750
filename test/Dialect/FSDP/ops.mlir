// RUN: fsdp-opt %s | FileCheck %s
// RUN: fsdp-opt %s | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s -mlir-print-op-generic | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s -mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

//===----------------------------------------------------------------------===//
// Model state
//===----------------------------------------------------------------------===//

// Dotted names print bare; quoting them is optional on input.
// CHECK-LABEL: module {
// CHECK-NEXT:  fsdp.param @fc1.weight : tensor<16x32xf32> in "fc1" : "torch.nn.modules.linear.Linear"{{$}}
// CHECK-NEXT:  fsdp.param @fc1.bias : tensor<16xf32> in "fc1" : "torch.nn.modules.linear.Linear"{{$}}
// CHECK-NEXT:  fsdp.param @wte.weight : tensor<50x32xf32> in "wte" : "torch.nn.modules.sparse.Embedding" aliases ["lm_head.weight", "head.weight"]{{$}}
// CHECK-NEXT:  fsdp.param @scale : tensor<f16> in "" : "model.Net"{{$}}
// CHECK-NEXT:  fsdp.buffer @bn.running_mean : tensor<16xf32> in "bn" : "torch.nn.modules.batchnorm.BatchNorm2d"{{$}}
// CHECK-NEXT:  fsdp.buffer @bn.num_batches_tracked : tensor<i64> in "bn" : "torch.nn.modules.batchnorm.BatchNorm2d" aliases ["bn2.num_batches_tracked"] {fsdp.tag = 1 : i64}{{$}}
// GENERIC:     "fsdp.param"() <{module_class = "torch.nn.modules.linear.Linear", module_path = "fc1", sym_name = "fc1.weight", type = tensor<16x32xf32>}> : () -> ()
// GENERIC:     "fsdp.param"() <{aliases = ["lm_head.weight", "head.weight"], module_class = "torch.nn.modules.sparse.Embedding", module_path = "wte", sym_name = "wte.weight", type = tensor<50x32xf32>}> : () -> ()
// GENERIC:     "fsdp.buffer"() <{aliases = ["bn2.num_batches_tracked"], module_class = "torch.nn.modules.batchnorm.BatchNorm2d", module_path = "bn", sym_name = "bn.num_batches_tracked", type = tensor<i64>}> {fsdp.tag = 1 : i64} : () -> ()
fsdp.param @fc1.weight : tensor<16x32xf32> in "fc1" : "torch.nn.modules.linear.Linear"
fsdp.param @"fc1.bias" : tensor<16xf32> in "fc1" : "torch.nn.modules.linear.Linear"
fsdp.param @"wte.weight" : tensor<50x32xf32> in "wte" : "torch.nn.modules.sparse.Embedding" aliases ["lm_head.weight", "head.weight"]
fsdp.param @scale : tensor<f16> in "" : "model.Net"
fsdp.buffer @"bn.running_mean" : tensor<16xf32> in "bn" : "torch.nn.modules.batchnorm.BatchNorm2d"
fsdp.buffer @bn.num_batches_tracked : tensor<i64> in "bn" : "torch.nn.modules.batchnorm.BatchNorm2d" aliases ["bn2.num_batches_tracked"] {fsdp.tag = 1 : i64}

//===----------------------------------------------------------------------===//
// Flat parameters
//===----------------------------------------------------------------------===//

// 16x32 + 16 = 528 elements, padded to 532 = 4 x 133.
// CHECK-NEXT:  fsdp.flat_param @unit0 for "fc1" params [@fc1.weight, @fc1.bias] offsets [0, 512] numel 528 padded 532 shards 4 : f32{{$}}
// CHECK-NEXT:  fsdp.flat_param @unit1 for "" params [@wte.weight] offsets [0] numel 1600 padded 1600 shards 1 : f32 {fsdp.tag = "root"}{{$}}
// CHECK-NEXT:  fsdp.flat_param @empty for "head" params [] offsets [] numel 0 padded 0 shards 2 : bf16{{$}}
// GENERIC:     "fsdp.flat_param"() <{element_type = f32, module_path = "fc1", numel = 528 : i64, offsets = array<i64: 0, 512>, padded_numel = 532 : i64, params = [@fc1.weight, @fc1.bias], shard_group_size = 4 : i64, sym_name = "unit0"}> : () -> ()
fsdp.flat_param @unit0 for "fc1" params [@fc1.weight, @"fc1.bias"] offsets [0, 512] numel 528 padded 532 shards 4 : f32
fsdp.flat_param @unit1 for "" params [@"wte.weight"] offsets [0] numel 1600 padded 1600 shards 1 : f32 {fsdp.tag = "root"}
fsdp.flat_param @empty for "head" params [] offsets [] numel 0 padded 0 shards 2 : bf16

//===----------------------------------------------------------------------===//
// Reading and updating state
//===----------------------------------------------------------------------===//

// CHECK-LABEL: func.func @state(
// CHECK-SAME:    %[[M:[a-z0-9]+]]: tensor<16xf32>, %[[N:[a-z0-9]+]]: tensor<i64>)
// CHECK-NEXT:    %[[W:.+]] = fsdp.get @fc1.weight : tensor<16x32xf32>
// CHECK-NEXT:    %{{.+}} = fsdp.get @bn.num_batches_tracked : tensor<i64>
// CHECK-NEXT:    %{{.+}} = fsdp.get @bn.running_mean : tensor<16xf32>
// CHECK-NEXT:    fsdp.update @bn.running_mean, %[[M]] : tensor<16xf32>
// CHECK-NEXT:    fsdp.update @bn.num_batches_tracked, %[[N]] {fsdp.tag} : tensor<i64>
// CHECK-NEXT:    return %[[W]] : tensor<16x32xf32>
// GENERIC-LABEL: sym_name = "state"
// GENERIC:       "fsdp.get"() <{name = @fc1.weight}> : () -> tensor<16x32xf32>
// GENERIC:       "fsdp.update"(%{{.+}}) <{name = @bn.running_mean}> : (tensor<16xf32>) -> ()
func.func @state(%m: tensor<16xf32>, %n: tensor<i64>) -> tensor<16x32xf32> {
  %w = fsdp.get @fc1.weight : tensor<16x32xf32>
  %c = fsdp.get @bn.num_batches_tracked : tensor<i64>
  %r = fsdp.get @"bn.running_mean" : tensor<16xf32>
  fsdp.update @"bn.running_mean", %m : tensor<16xf32>
  fsdp.update @bn.num_batches_tracked, %n {fsdp.tag} : tensor<i64>
  return %w : tensor<16x32xf32>
}

//===----------------------------------------------------------------------===//
// Optimizer state and gradients
//===----------------------------------------------------------------------===//

// Names with `:` print quoted.
// CHECK:       fsdp.optim_state @"fc1.weight:momentum_buffer" : tensor<16x32xf32> for @fc1.weight{{$}}
// CHECK-NEXT:  fsdp.optim_state @"optim:step" : tensor<f64>{{$}}
// GENERIC:     "fsdp.optim_state"() <{param = @fc1.weight, sym_name = "fc1.weight:momentum_buffer", type = tensor<16x32xf32>}> : () -> ()
fsdp.optim_state @"fc1.weight:momentum_buffer" : tensor<16x32xf32> for @fc1.weight
fsdp.optim_state @"optim:step" : tensor<f64>

// CHECK-LABEL: func.func @sgd_step(
// CHECK-SAME:    %[[G:[a-z0-9]+]]: tensor<16x32xf32>, %[[P:[a-z0-9]+]]: tensor<16x32xf32>)
// CHECK-NEXT:    fsdp.grad @fc1.weight, %[[G]] : tensor<16x32xf32>
// CHECK-NEXT:    %{{.+}} = fsdp.get @"fc1.weight:momentum_buffer" : tensor<16x32xf32>
// CHECK-NEXT:    fsdp.update @fc1.weight, %[[P]] : tensor<16x32xf32>
// CHECK-NEXT:    fsdp.update @"fc1.weight:momentum_buffer", %[[G]] : tensor<16x32xf32>
// GENERIC:       "fsdp.grad"(%{{.+}}) <{param = @fc1.weight}> : (tensor<16x32xf32>) -> ()
func.func @sgd_step(%g: tensor<16x32xf32>, %p: tensor<16x32xf32>) {
  fsdp.grad @fc1.weight, %g : tensor<16x32xf32>
  %m = fsdp.get @"fc1.weight:momentum_buffer" : tensor<16x32xf32>
  fsdp.update @fc1.weight, %p : tensor<16x32xf32>
  fsdp.update @"fc1.weight:momentum_buffer", %g : tensor<16x32xf32>
  return
}

//===----------------------------------------------------------------------===//
// A sharded step: gather, view, free, reduce-scatter, all-reduce
//===----------------------------------------------------------------------===//

// The future type prints without its dialect prefix where the op fixes it.
// CHECK-LABEL: func.func @sharded(
// CHECK-SAME:    %[[SHARD:[a-z0-9]+]]: tensor<133xf32>, %[[GRAD:[a-z0-9]+]]: tensor<532xf32>) -> tensor<133xf32>
// CHECK-NEXT:    %[[F:.+]] = fsdp.all_gather.start %[[SHARD]] for @unit0 group shard : tensor<133xf32> -> <tensor<532xf32>>
// CHECK-NEXT:    %[[FULL:.+]] = fsdp.wait %[[F]] : <tensor<532xf32>>
// CHECK-NEXT:    %{{.+}} = fsdp.view %[[FULL]][0] : tensor<532xf32> to tensor<16x32xf32>
// CHECK-NEXT:    %{{.+}} = fsdp.view %[[FULL]][512] : tensor<532xf32> to tensor<16xf32>
// CHECK-NEXT:    fsdp.free %[[FULL]] : tensor<532xf32>
// CHECK-NEXT:    %[[G:.+]] = fsdp.reduce_scatter.start %[[GRAD]] for @unit0 group shard reduce mean : tensor<532xf32> -> <tensor<133xf32>>
// CHECK-NEXT:    %[[GS:.+]] = fsdp.wait %[[G]] : <tensor<133xf32>>
// CHECK-NEXT:    %[[R:.+]] = fsdp.all_reduce.start %[[GS]] group replicate reduce mean : tensor<133xf32> -> <tensor<133xf32>>
// CHECK-NEXT:    %[[RS:.+]] = fsdp.wait %[[R]] : <tensor<133xf32>>
// CHECK-NEXT:    %[[H:.+]] = fsdp.reduce_scatter.start %[[GRAD]] for @unit0 group shard across world reduce mean : tensor<532xf32> -> <tensor<133xf32>>
// CHECK-NEXT:    %{{.+}} = fsdp.wait %[[H]] : <tensor<133xf32>>
// CHECK-NEXT:    return %[[RS]] : tensor<133xf32>
// GENERIC-LABEL: sym_name = "sharded"
// GENERIC:       "fsdp.all_gather.start"(%{{.+}}) <{group = #fsdp<group shard>, unit = @unit0}> : (tensor<133xf32>) -> !fsdp.future<tensor<532xf32>>
// GENERIC:       "fsdp.wait"(%{{.+}}) : (!fsdp.future<tensor<532xf32>>) -> tensor<532xf32>
// GENERIC:       "fsdp.view"(%{{.+}}) <{offset = 512 : i64}> : (tensor<532xf32>) -> tensor<16xf32>
// GENERIC:       "fsdp.free"(%{{.+}}) : (tensor<532xf32>) -> ()
// GENERIC:       "fsdp.reduce_scatter.start"(%{{.+}}) <{group = #fsdp<group shard>, reduce = #fsdp<reduce mean>, unit = @unit0}> : (tensor<532xf32>) -> !fsdp.future<tensor<133xf32>>
// GENERIC:       "fsdp.all_reduce.start"(%{{.+}}) <{group = #fsdp<group replicate>, reduce = #fsdp<reduce mean>}> : (tensor<133xf32>) -> !fsdp.future<tensor<133xf32>>
// GENERIC:       "fsdp.reduce_scatter.start"(%{{.+}}) <{across = #fsdp<group world>, group = #fsdp<group shard>, reduce = #fsdp<reduce mean>, unit = @unit0}> : (tensor<532xf32>) -> !fsdp.future<tensor<133xf32>>
func.func @sharded(%shard: tensor<133xf32>, %grad: tensor<532xf32>) -> tensor<133xf32> {
  %f = fsdp.all_gather.start %shard for @unit0 group shard : tensor<133xf32> -> !fsdp.future<tensor<532xf32>>
  %full = fsdp.wait %f : !fsdp.future<tensor<532xf32>>
  %w = fsdp.view %full[0] : tensor<532xf32> to tensor<16x32xf32>
  %b = fsdp.view %full[512] : tensor<532xf32> to tensor<16xf32>
  fsdp.free %full : tensor<532xf32>
  %g = fsdp.reduce_scatter.start %grad for @unit0 group shard reduce mean : tensor<532xf32> -> !fsdp.future<tensor<133xf32>>
  %gs = fsdp.wait %g : !fsdp.future<tensor<133xf32>>
  %r = fsdp.all_reduce.start %gs group replicate reduce mean : tensor<133xf32> -> !fsdp.future<tensor<133xf32>>
  %rs = fsdp.wait %r : !fsdp.future<tensor<133xf32>>
  %h = fsdp.reduce_scatter.start %grad for @unit0 group shard across world reduce mean : tensor<532xf32> -> !fsdp.future<tensor<133xf32>>
  %hs = fsdp.wait %h : !fsdp.future<tensor<133xf32>>
  return %rs : tensor<133xf32>
}

// The other groups and reductions; the stripped future type `<...>` parses too.
// CHECK-LABEL: func.func @groups(
// CHECK-SAME:    %[[S:[a-z0-9]+]]: tensor<1600xf32>, %[[X:[a-z0-9]+]]: tensor<2x3xf16>)
// CHECK-NEXT:    %[[A:.+]] = fsdp.all_gather.start %[[S]] for @unit1 group world : tensor<1600xf32> -> <tensor<1600xf32>>
// CHECK-NEXT:    %{{.+}} = fsdp.wait %[[A]] : <tensor<1600xf32>>
// CHECK-NEXT:    %[[B:.+]] = fsdp.reduce_scatter.start %[[S]] for @unit1 group world reduce sum : tensor<1600xf32> -> <tensor<1600xf32>>
// CHECK-NEXT:    %{{.+}} = fsdp.wait %[[B]] : <tensor<1600xf32>>
// CHECK-NEXT:    %[[C:.+]] = fsdp.all_reduce.start %[[X]] group world reduce sum : tensor<2x3xf16> -> <tensor<2x3xf16>>
// CHECK-NEXT:    %{{.+}} = fsdp.wait %[[C]] : <tensor<2x3xf16>>
// CHECK-NEXT:    %[[D:.+]] = fsdp.all_reduce.start %[[X]] group shard reduce mean : tensor<2x3xf16> -> <tensor<2x3xf16>>
// CHECK-NEXT:    %{{.+}} = fsdp.wait %[[D]] {fsdp.tag} : <tensor<2x3xf16>>
// CHECK-NEXT:    return
// GENERIC-LABEL: sym_name = "groups"
// GENERIC:       <{group = #fsdp<group world>, unit = @unit1}>
// GENERIC:       <{group = #fsdp<group world>, reduce = #fsdp<reduce sum>, unit = @unit1}>
// GENERIC:       <{group = #fsdp<group world>, reduce = #fsdp<reduce sum>}>
// GENERIC:       <{group = #fsdp<group shard>, reduce = #fsdp<reduce mean>}>
func.func @groups(%s: tensor<1600xf32>, %x: tensor<2x3xf16>) {
  %a = fsdp.all_gather.start %s for @unit1 group world : tensor<1600xf32> -> <tensor<1600xf32>>
  %fa = fsdp.wait %a : <tensor<1600xf32>>
  %b = fsdp.reduce_scatter.start %s for @unit1 group world reduce sum : tensor<1600xf32> -> !fsdp.future<tensor<1600xf32>>
  %fb = fsdp.wait %b : !fsdp.future<tensor<1600xf32>>
  %c = fsdp.all_reduce.start %x group world reduce sum : tensor<2x3xf16> -> !fsdp.future<tensor<2x3xf16>>
  %fc = fsdp.wait %c : !fsdp.future<tensor<2x3xf16>>
  %d = fsdp.all_reduce.start %x group shard reduce mean : tensor<2x3xf16> -> !fsdp.future<tensor<2x3xf16>>
  %fd = fsdp.wait %d {fsdp.tag} : !fsdp.future<tensor<2x3xf16>>
  return
}

// A view may cover the whole buffer, end exactly at its end, or be a scalar.
// CHECK-LABEL: func.func @views(
// CHECK-SAME:    %[[BUF:[a-z0-9]+]]: tensor<532xf32>)
// CHECK-NEXT:    fsdp.view %[[BUF]][0] : tensor<532xf32> to tensor<4x133xf32>
// CHECK-NEXT:    fsdp.view %[[BUF]][531] : tensor<532xf32> to tensor<f32>
// CHECK-NEXT:    fsdp.view %[[BUF]][500] : tensor<532xf32> to tensor<2x16xf32>
// CHECK-NEXT:    fsdp.view %[[BUF]][7] {fsdp.tag} : tensor<532xf32> to tensor<0xf32>
// CHECK-NEXT:    return
func.func @views(%buf: tensor<532xf32>) {
  %0 = fsdp.view %buf[0] : tensor<532xf32> to tensor<4x133xf32>
  %1 = fsdp.view %buf[531] : tensor<532xf32> to tensor<f32>
  %2 = fsdp.view %buf[500] : tensor<532xf32> to tensor<2x16xf32>
  %3 = fsdp.view %buf[7] {fsdp.tag} : tensor<532xf32> to tensor<0xf32>
  return
}

// Mixed precision: floating-point parameters, buffers and flat parameters
// are read as bf16 or f16 (a rounded copy) and written from them (widened);
// a gradient may have the compute type; a unit's shard is gathered, and
// its gradient reduced, in a 16-bit type.
// CHECK-LABEL: func.func @mixed_precision(
// CHECK-NEXT:    %[[W:.+]] = fsdp.get @mp.w : tensor<4xbf16>
// CHECK-NEXT:    %[[B:.+]] = fsdp.get @mp.b : tensor<4xf16>
// CHECK-NEXT:    fsdp.update @mp.b, %[[B]] : tensor<4xf16>
// CHECK-NEXT:    fsdp.grad @mp.w, %[[W]] : tensor<4xbf16>
// CHECK-NEXT:    %[[S:.+]] = fsdp.get @mp.unit : tensor<2xbf16>
// CHECK-NEXT:    fsdp.all_gather.start %[[S]] for @mp.unit group shard : tensor<2xbf16> -> <tensor<4xbf16>>
// CHECK-NEXT:    fsdp.reduce_scatter.start %{{.+}} for @mp.unit group shard reduce mean : tensor<4xbf16> -> <tensor<2xbf16>>
module {
  fsdp.param @mp.w : tensor<4xf32> in "mp" : "M"
  fsdp.buffer @mp.b : tensor<4xf32> in "mp" : "M"
  fsdp.param @mp.v : tensor<4xf32> in "mp" : "M"
  fsdp.flat_param @mp.unit for "mp" params [@mp.v] offsets [0] numel 4 padded 4 shards 2 : f32
  func.func @mixed_precision(%g: tensor<4xbf16>) {
    %w = fsdp.get @mp.w : tensor<4xbf16>
    %b = fsdp.get @mp.b : tensor<4xf16>
    fsdp.update @mp.b, %b : tensor<4xf16>
    fsdp.grad @mp.w, %w : tensor<4xbf16>
    %s = fsdp.get @mp.unit : tensor<2xbf16>
    %f = fsdp.all_gather.start %s for @mp.unit group shard : tensor<2xbf16> -> !fsdp.future<tensor<4xbf16>>
    %r = fsdp.reduce_scatter.start %g for @mp.unit group shard reduce mean : tensor<4xbf16> -> !fsdp.future<tensor<2xbf16>>
    return
  }
}

// CPU offload: copies between host and device memory, and state marked as
// living on the host.
// CHECK-LABEL: func.func @offload(
// CHECK-NEXT:    %[[S:.+]] = fsdp.get @off.unit : tensor<2xf32>
// CHECK-NEXT:    %[[D:.+]] = fsdp.to_device %[[S]] : tensor<2xf32>
// CHECK-NEXT:    fsdp.to_host %[[D]] : tensor<2xf32>
module {
  fsdp.param @off.v : tensor<4xf32> in "off" : "M"
  fsdp.flat_param @off.unit for "off" params [@off.v] offsets [0] numel 4 padded 4 shards 2 : f32 {fsdp.host}
  func.func @offload() {
    %s = fsdp.get @off.unit : tensor<2xf32>
    %d = fsdp.to_device %s : tensor<2xf32>
    %h = fsdp.to_host %d : tensor<2xf32>
    return
  }
}

// The sharding strategy is a dialect attribute.
// CHECK: module attributes {fsdp.sharding = #fsdp<sharding HYBRID_SHARD>}
module attributes {fsdp.sharding = #fsdp<sharding HYBRID_SHARD>} {
}
