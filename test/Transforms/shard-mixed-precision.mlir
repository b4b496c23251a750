// Mixed precision (PyTorch FSDP's MixedPrecision): the importer reads
// parameters and buffers in bf16 (`fsdp.get` of an f32 symbol as bf16) and
// casts the input; fsdp-shard gathers each unit in bf16 (the shard read
// rounded, half the bytes moved), reduces its bf16 gradient in the reduce
// dtype and casts the reduced shard to f32 once waited; fsdp-optimizer
// updates the f32 shard. A buffer read and updated in bf16 is widened back.
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-auto-wrap{policy=modules wrap-module=a},fsdp-shard{world-size=2},fsdp-optimizer{optimizer=sgd lr=0.1},fsdp-verify-plan)' | FileCheck %s --check-prefix=FULL
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-auto-wrap{policy=modules wrap-module=a},fsdp-shard{world-size=2 reduce-dtype=f32},fsdp-optimizer{optimizer=sgd lr=0.1},fsdp-verify-plan)' | FileCheck %s --check-prefix=F32
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-shard{sharding-strategy=NO_SHARD world-size=2},fsdp-optimizer{optimizer=sgd lr=0.1},fsdp-verify-plan)' | FileCheck %s --check-prefix=NOSHARD
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-shard{sharding-strategy=OSS world-size=2},fsdp-optimizer{optimizer=sgd lr=0.1},fsdp-verify-plan)' | FileCheck %s --check-prefix=OSS
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-optimizer{optimizer=sgd lr=0.1})' | FileCheck %s --check-prefix=UNSHARDED
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-auto-wrap{policy=modules wrap-module=a},fsdp-shard{world-size=4 reduce-dtype=f16},fsdp-optimizer{optimizer=sgd lr=0.1},fsdp-verify-plan)' | FileCheck %s --check-prefix=FOUR

// An fp16 gradient's mean is FSDP2's: divided by the pre-divide factor
// (2 at 2 and 4 ranks) before the sum, by the post-divide factor (1 and 2)
// after it, so that the sum does not overflow (bf16 and f32 reduce to the
// mean, ReduceOp.AVG).
// FOUR:      %[[H:.+]] = aten.call "aten::to.dtype"(%{{.+}}, f16, false, false, none) : (tensor<12xbf16>) -> tensor<12xf16>
// FOUR-NEXT: %[[PRE:.+]] = aten.call "aten::div.Scalar"(%[[H]], 2.000000e+00) : (tensor<12xf16>) -> tensor<12xf16>
// FOUR-NEXT: %[[RS:.+]] = fsdp.reduce_scatter.start %[[PRE]] for @_flat_param group shard reduce sum : tensor<12xf16> -> <tensor<3xf16>>
// FOUR:      %[[W:.+]] = fsdp.wait %[[RS]] {fsdp.reduced_grad} : <tensor<3xf16>>
// FOUR-NEXT: %[[POST:.+]] = aten.call "aten::div.Scalar"(%[[W]], 2.000000e+00) : (tensor<3xf16>) -> tensor<3xf16>
// FOUR-NEXT: aten.call "aten::to.dtype"(%[[POST]], f32, false, false, none) : (tensor<3xf16>) -> tensor<3xf32>

module attributes {fsdp.modules = [["", "models.Net"], ["a", "torch.nn.modules.linear.Linear"], ["head", "torch.nn.modules.linear.Linear"], ["bn", "torch.nn.modules.batchnorm.BatchNorm1d"]]} {
  fsdp.param @a.weight : tensor<4x3xf32> in "a" : "torch.nn.modules.linear.Linear"
  fsdp.param @head.weight : tensor<2x4xf32> in "head" : "torch.nn.modules.linear.Linear"
  fsdp.param @head.bias : tensor<2xf32> in "head" : "torch.nn.modules.linear.Linear"
  fsdp.buffer @bn.running_mean : tensor<4xf32> in "bn" : "torch.nn.modules.batchnorm.BatchNorm1d"
  func.func @forward(%x: tensor<5x3xf32> {fsdp.name = "x"}) -> tensor<bf16> {
    %xb = aten.call "aten::to.dtype"(%x, bf16, false, false, none) : (tensor<5x3xf32>) -> tensor<5x3xbf16>
    %wa = fsdp.get @a.weight : tensor<4x3xbf16>
    %wh = fsdp.get @head.weight : tensor<2x4xbf16>
    %bh = fsdp.get @head.bias : tensor<2xbf16>
    %m = fsdp.get @bn.running_mean : tensor<4xbf16>
    %h = aten.call "aten::linear"(%xb, %wa, none) : (tensor<5x3xbf16>, tensor<4x3xbf16>) -> tensor<5x4xbf16>
    %m2 = aten.call "aten::mul.Scalar"(%m, 0.5) : (tensor<4xbf16>) -> tensor<4xbf16>
    %y = aten.call "aten::linear"(%h, %wh, %bh) : (tensor<5x4xbf16>, tensor<2x4xbf16>, tensor<2xbf16>) -> tensor<5x2xbf16>
    %l = aten.call "aten::sum"(%y, none) : (tensor<5x2xbf16>) -> tensor<bf16>
    fsdp.update @bn.running_mean, %m2 : tensor<4xbf16>
    return %l : tensor<bf16>
  }
}

// The flat parameters stay f32 (the master copy); their shards are read as
// bf16 for the gathers, and the views the forward reads are bf16.
// FULL:       fsdp.flat_param @a._flat_param for "a" params [@a.weight] offsets [0] numel 12 padded 12 shards 2 : f32
// FULL-NEXT:  fsdp.flat_param @_flat_param for "" params [@head.weight, @head.bias] offsets [0, 8] numel 10 padded 10 shards 2 : f32
// FULL-LABEL: func.func @train_step
// FULL:         %[[AS:.+]] = fsdp.get @a._flat_param : tensor<6xbf16>
// FULL-NEXT:    %[[AF:.+]] = fsdp.all_gather.start %[[AS]] for @a._flat_param group shard : tensor<6xbf16> -> <tensor<12xbf16>>
// FULL-NEXT:    %[[A:.+]] = fsdp.wait %[[AF]] : <tensor<12xbf16>>
// FULL-NEXT:    fsdp.view %[[A]][0] : tensor<12xbf16> to tensor<4x3xbf16>
// FULL:         fsdp.update @bn.running_mean, %{{.+}} : tensor<4xbf16>
// The gradient is reduced in bf16 (the reduce dtype defaults to the param
// dtype), and the reduced shard cast to f32 before the update.
// FULL:         %[[G:.+]] = aten.call "aten::cat"
// FULL-SAME:      -> tensor<10xbf16>
// FULL-NEXT:    %[[RS:.+]] = fsdp.reduce_scatter.start %[[G]] for @_flat_param group shard reduce mean : tensor<10xbf16> -> <tensor<5xbf16>>
// FULL:         %[[W:.+]] = fsdp.wait %[[RS]] {fsdp.reduced_grad} : <tensor<5xbf16>>
// FULL-NEXT:    %[[W32:.+]] = aten.call "aten::to.dtype"(%[[W]], f32, false, false, none) : (tensor<5xbf16>) -> tensor<5xf32>
// FULL-NEXT:    %[[P:.+]] = fsdp.get @_flat_param {fsdp.optimizer_op} : tensor<5xf32>
// FULL-NEXT:    aten.call "aten::add.Tensor"(%[[P]], %[[W32]], -1.000000e-01) {fsdp.optimizer_op} : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>

// reduce-dtype=f32: the bf16 gradient is cast before the reduction.
// F32:         %[[G:.+]] = aten.call "aten::cat"
// F32-NEXT:    %[[G32:.+]] = aten.call "aten::to.dtype"(%[[G]], f32, false, false, none) : (tensor<10xbf16>) -> tensor<10xf32>
// F32-NEXT:    fsdp.reduce_scatter.start %[[G32]] for @_flat_param group shard reduce mean : tensor<10xf32> -> <tensor<5xf32>>
// F32:         %[[W:.+]] = fsdp.wait %{{.+}} {fsdp.reduced_grad} : <tensor<5xf32>>
// F32-NEXT:    %[[P:.+]] = fsdp.get @_flat_param {fsdp.optimizer_op} : tensor<5xf32>
// F32-NEXT:    aten.call "aten::add.Tensor"(%[[P]], %[[W]], -1.000000e-01)

// NO_SHARD reads the whole flat parameter rounded and all-reduces bf16.
// NOSHARD:      fsdp.get @_flat_param : tensor<22xbf16>
// NOSHARD:      fsdp.all_reduce.start %{{.+}} group world reduce mean : tensor<22xbf16> -> <tensor<22xbf16>>
// NOSHARD:      %[[W:.+]] = fsdp.wait %{{.+}} {fsdp.reduced_grad} : <tensor<22xbf16>>
// NOSHARD-NEXT: aten.call "aten::to.dtype"(%[[W]], f32, false, false, none) : (tensor<22xbf16>) -> tensor<22xf32>

// OSS keeps its bf16 shard of the all-reduced gradient, then casts it.
// OSS:          %[[W:.+]] = fsdp.wait %{{.+}} {fsdp.reduced_grad} : <tensor<22xbf16>>
// OSS-NEXT:     %[[S:.+]] = fsdp.local_shard %[[W]] for @_flat_param group shard : tensor<22xbf16> -> tensor<11xbf16>
// OSS-NEXT:     aten.call "aten::to.dtype"(%[[S]], f32, false, false, none) : (tensor<11xbf16>) -> tensor<11xf32>

// Unsharded, the optimizer casts each bf16 gradient to its f32 parameter's
// type and reads the parameter in f32.
// UNSHARDED:      %[[G:.+]] = aten.call "aten::to.dtype"(%{{.+}}, f32, false, false, none) {fsdp.optimizer_op} : (tensor<2xbf16>) -> tensor<2xf32>
// UNSHARDED-NEXT: %[[P:.+]] = fsdp.get @head.bias {fsdp.optimizer_op} : tensor<2xf32>
// UNSHARDED-NEXT: aten.call "aten::add.Tensor"(%[[P]], %[[G]], -1.000000e-01) {fsdp.optimizer_op} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
