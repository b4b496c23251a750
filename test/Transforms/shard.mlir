// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-auto-wrap{policy=modules wrap-module=a,b},fsdp-shard{world-size=2})' | FileCheck %s --check-prefix=FULL
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-auto-wrap{policy=modules wrap-module=a,b},fsdp-shard{sharding-strategy=SHARD_GRAD_OP world-size=2})' | FileCheck %s --check-prefix=ZERO2
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-auto-wrap{ignore-module=b},fsdp-shard{sharding-strategy=NO_SHARD world-size=2})' | FileCheck %s --check-prefix=NOSHARD
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-shard{sharding-strategy=HYBRID_SHARD world-size=8 shard-group-size=4})' | FileCheck %s --check-prefix=HYBRID
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-shard{sharding-strategy=HYBRID_SHARD world-size=8 shard-group-size=4 hybrid-reduction=two-stage})' | FileCheck %s --check-prefix=TWOSTAGE
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-auto-wrap{policy=modules wrap-module=a,b},fsdp-shard{sharding-strategy=OSS world-size=2},fsdp-optimizer{optimizer=sgd lr=0.1},fsdp-verify-plan)' | FileCheck %s --check-prefix=OSS
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-auto-wrap{policy=modules wrap-module=a,b},fsdp-shard{sharding-strategy=SHARDED_DDP world-size=2})' | FileCheck %s --check-prefix=SDDP

// Three linear layers; `a` and `b` are units of their own, the root takes
// the head. @unused gets no gradient: it is never updated, so it is not
// sharded either.
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

// FULL_SHARD: one flat parameter per unit, in the order the step first uses
// them; each gathered before its first use in the forward and freed after
// its last, gathered again in the backward where a gradient needs it (the
// first layer's input gradient is not needed, so `a` is not), and its flat
// gradient reduce-scattered (mean) right after the last contribution. The
// waits come at the end of the step, in the order the reductions started;
// each wait that yields a reduced gradient says so (fsdp.reduced_grad, the
// plan's "gradient"), a gather's wait does not.
// FULL:       module attributes {{{.*}}fsdp.shard_group_size = 2 : i64, fsdp.sharding = #fsdp<sharding FULL_SHARD>, fsdp.world_size = 2 : i64}
// FULL:       fsdp.param @unused : tensor<3xf32>
// FULL-NEXT:  fsdp.flat_param @a._flat_param for "a" params [@a.weight] offsets [0] numel 12 padded 12 shards 2 : f32
// FULL-NEXT:  fsdp.flat_param @b._flat_param for "b" params [@b.weight] offsets [0] numel 16 padded 16 shards 2 : f32
// FULL-NEXT:  fsdp.flat_param @_flat_param for "" params [@head.weight, @head.bias] offsets [0, 8] numel 10 padded 10 shards 2 : f32
// FULL-LABEL: func.func @train_step
// FULL-NEXT:    %[[AS:.+]] = fsdp.get @a._flat_param : tensor<6xf32>
// FULL-NEXT:    %[[AF:.+]] = fsdp.all_gather.start %[[AS]] for @a._flat_param group shard : tensor<6xf32> -> <tensor<12xf32>>
// FULL-NEXT:    %[[A:.+]] = fsdp.wait %[[AF]] :
// FULL-NEXT:    %[[WA:.+]] = fsdp.view %[[A]][0] : tensor<12xf32> to tensor<4x3xf32>
// FULL-NEXT:    aten.call "aten::linear"(%arg0, %[[WA]], none)
// FULL-NEXT:    fsdp.free %[[A]] : tensor<12xf32>
// FULL:         %[[B:.+]] = fsdp.wait
// FULL-NEXT:    %[[WB:.+]] = fsdp.view %[[B]][0] : tensor<16xf32> to tensor<4x4xf32>
// FULL-NEXT:    %[[H2:.+]] = aten.call "aten::linear"(%{{.+}}, %[[WB]], none)
// FULL-NEXT:    fsdp.free %[[B]]
// FULL-NEXT:    %[[RS:.+]] = fsdp.get @_flat_param : tensor<5xf32>
// FULL-NEXT:    fsdp.all_gather.start %[[RS]] for @_flat_param
// FULL-NEXT:    %[[R:.+]] = fsdp.wait
// FULL-NEXT:    %[[WH:.+]] = fsdp.view %[[R]][0] : tensor<10xf32> to tensor<2x4xf32>
// FULL-NEXT:    %[[BH:.+]] = fsdp.view %[[R]][8] : tensor<10xf32> to tensor<2xf32>
// FULL-NEXT:    aten.call "aten::linear"(%[[H2]], %[[WH]], %[[BH]])
// FULL-NEXT:    fsdp.free %[[R]]
// FULL:         aten.constant dense<1.000000e+00> : tensor<f32> {fsdp.backward_start}
// FULL:         fsdp.get @_flat_param : tensor<5xf32>
// FULL-NEXT:    fsdp.all_gather.start
// FULL-NEXT:    %[[R2:.+]] = fsdp.wait
// FULL-NEXT:    %[[WH2:.+]] = fsdp.view %[[R2]][0] : tensor<10xf32> to tensor<2x4xf32>
// FULL-NEXT:    aten.call "aten::mm"(%{{.+}}, %[[WH2]])
// FULL-NEXT:    fsdp.free %[[R2]]
// FULL:         %[[FLATR:.+]] = aten.call "aten::cat"([%{{.+}}, %{{.+}}], 0) : (tensor<8xf32>, tensor<2xf32>) -> tensor<10xf32>
// FULL-NEXT:    %[[RSR:.+]] = fsdp.reduce_scatter.start %[[FLATR]] for @_flat_param group shard reduce mean : tensor<10xf32> -> <tensor<5xf32>>
// FULL-NEXT:    fsdp.get @b._flat_param
// FULL-NEXT:    fsdp.all_gather.start
// FULL:         %[[RSB:.+]] = fsdp.reduce_scatter.start %{{.+}} for @b._flat_param
// FULL-NOT:     fsdp.all_gather.start
// FULL:         %[[RSA:.+]] = fsdp.reduce_scatter.start %{{.+}} for @a._flat_param
// FULL-NEXT:    %[[GR:.+]] = fsdp.wait %[[RSR]] {fsdp.reduced_grad}
// FULL-NEXT:    fsdp.grad @_flat_param, %[[GR]] : tensor<5xf32>
// FULL-NEXT:    %[[GB:.+]] = fsdp.wait %[[RSB]] {fsdp.reduced_grad}
// FULL-NEXT:    fsdp.grad @b._flat_param, %[[GB]] : tensor<8xf32>
// FULL-NEXT:    %[[GA:.+]] = fsdp.wait %[[RSA]] {fsdp.reduced_grad}
// FULL-NEXT:    fsdp.grad @a._flat_param, %[[GA]] : tensor<6xf32>
// FULL-NEXT:    return

// SHARD_GRAD_OP: gathered once, kept from the forward to the last backward
// use (`a`, which the backward does not read, is freed after the forward).
// ZERO2-LABEL: func.func @train_step
// ZERO2:         fsdp.all_gather.start %{{.+}} for @a._flat_param
// ZERO2:         fsdp.free %{{.+}} : tensor<12xf32>
// ZERO2:         fsdp.all_gather.start %{{.+}} for @b._flat_param
// ZERO2:         fsdp.all_gather.start %{{.+}} for @_flat_param
// ZERO2-NOT:     fsdp.all_gather.start
// ZERO2:         {fsdp.backward_start}
// ZERO2:         fsdp.free %{{.+}} : tensor<10xf32>
// ZERO2:         fsdp.free %{{.+}} : tensor<16xf32>

// NO_SHARD (one unit here, the root): every rank holds the whole flat
// parameter and reads its views directly; its gradient is all-reduced.
// An ignored module's parameter stays whole, and its gradient is
// all-reduced too, so that the replicas stay equal.
// NOSHARD:       fsdp.param @b.weight : tensor<4x4xf32> in "b" : "torch.nn.modules.linear.Linear" {fsdp.ignored}
// NOSHARD:       fsdp.flat_param @_flat_param for "" params [@a.weight, @head.weight, @head.bias] offsets [0, 12, 20] numel 22 padded 22 shards 1 : f32
// NOSHARD-LABEL: func.func @train_step
// NOSHARD-NOT:   fsdp.all_gather.start
// NOSHARD-NOT:   fsdp.free
// NOSHARD:       %[[F:.+]] = fsdp.get @_flat_param : tensor<22xf32>
// NOSHARD-NEXT:  fsdp.view %[[F]][0] : tensor<22xf32> to tensor<4x3xf32>
// NOSHARD:       %[[BG:.+]] = fsdp.all_reduce.start %{{.+}} group world reduce mean : tensor<4x4xf32> -> <tensor<4x4xf32>>
// NOSHARD:       %[[FG:.+]] = fsdp.all_reduce.start %{{.+}} group world reduce mean : tensor<22xf32> -> <tensor<22xf32>>
// NOSHARD-NEXT:  %[[B:.+]] = fsdp.wait %[[BG]] {fsdp.reduced_grad}
// NOSHARD-NEXT:  fsdp.grad @b.weight, %[[B]] : tensor<4x4xf32>
// NOSHARD-NEXT:  %[[G:.+]] = fsdp.wait %[[FG]] {fsdp.reduced_grad}
// NOSHARD-NEXT:  fsdp.grad @_flat_param, %[[G]] : tensor<22xf32>

// HYBRID_SHARD, 8 ranks in shard groups of 4: 38 elements padded to 40
// (the flat gradient padded with zeros), reduced in one reduce-scatter whose
// sum runs across the world (in rank order) and whose shards are the shard
// group's.
// HYBRID:       fsdp.flat_param @_flat_param for "" params [@a.weight, @b.weight, @head.weight, @head.bias] offsets [0, 12, 28, 36] numel 38 padded 40 shards 4 : f32
// HYBRID-LABEL: func.func @train_step
// HYBRID:       %[[PAD:.+]] = aten.call "aten::new_zeros"(%{{.+}}, [2], f32, none, none, none) : (tensor<12xf32>) -> tensor<2xf32>
// HYBRID-NEXT:  %[[FLAT:.+]] = aten.call "aten::cat"([%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[PAD]]], 0) : ({{.*}}) -> tensor<40xf32>
// HYBRID-NEXT:  %[[RS:.+]] = fsdp.reduce_scatter.start %[[FLAT]] for @_flat_param group shard across world reduce mean : tensor<40xf32> -> <tensor<10xf32>>
// HYBRID-NEXT:  %[[G:.+]] = fsdp.wait %[[RS]] {fsdp.reduced_grad}
// HYBRID-NEXT:  fsdp.grad @_flat_param, %[[G]] : tensor<10xf32>
// HYBRID-NOT:   fsdp.all_reduce.start

// Two-stage, as PyTorch's HYBRID_SHARD: reduce-scattered in the shard
// group, then all-reduced across the two replica groups.
// TWOSTAGE-LABEL: func.func @train_step
// TWOSTAGE:       %[[RS:.+]] = fsdp.reduce_scatter.start %{{.+}} for @_flat_param group shard reduce mean : tensor<40xf32> -> <tensor<10xf32>>
// TWOSTAGE-NEXT:  %[[S:.+]] = fsdp.wait %[[RS]] :
// TWOSTAGE-NEXT:  %[[AR:.+]] = fsdp.all_reduce.start %[[S]] group replicate reduce mean : tensor<10xf32> -> <tensor<10xf32>>
// TWOSTAGE-NEXT:  %[[G:.+]] = fsdp.wait %[[AR]] {fsdp.reduced_grad}
// TWOSTAGE-NEXT:  fsdp.grad @_flat_param, %[[G]] : tensor<10xf32>
// ZERO2-NOT:     fsdp.all_gather.start

// The evaluation step (fsdp-append-loss copied the forward: it has no
// dropout and updates no buffer) reads each unit as the forward does,
// gathered before its first read and freed after its last, with
// SHARD_GRAD_OP too: no backward keeps it. Its matmuls see the parameters
// they read as requiring grad, as eager evaluation under torch.no_grad()
// does; @unused is not read.
// ZERO2-LABEL: func.func @eval_step(%arg0: tensor<5x3xf32> {fsdp.name = "x"}) -> tensor<f32>
// ZERO2-NEXT:    %[[SA:.+]] = fsdp.get @a._flat_param : tensor<6xf32>
// ZERO2-NEXT:    %[[GA:.+]] = fsdp.all_gather.start %[[SA]] for @a._flat_param group shard : tensor<6xf32> -> <tensor<12xf32>>
// ZERO2-NEXT:    %[[A:.+]] = fsdp.wait %[[GA]] : <tensor<12xf32>>
// ZERO2-NEXT:    %[[WA:.+]] = fsdp.view %[[A]][0] : tensor<12xf32> to tensor<4x3xf32>
// ZERO2-NEXT:    %[[H:.+]] = aten.call "aten::linear"(%arg0, %[[WA]], none) {aten.requires_grad = array<i64: 1>}
// ZERO2-NEXT:    fsdp.free %[[A]] : tensor<12xf32>
// ZERO2:         %[[B:.+]] = fsdp.wait %{{.+}} : <tensor<16xf32>>
// ZERO2:         fsdp.free %[[B]] : tensor<16xf32>
// ZERO2:         %[[R:.+]] = fsdp.wait %{{.+}} : <tensor<10xf32>>
// ZERO2-NEXT:    %[[WH:.+]] = fsdp.view %[[R]][0] : tensor<10xf32> to tensor<2x4xf32>
// ZERO2-NEXT:    %[[BH:.+]] = fsdp.view %[[R]][8] : tensor<10xf32> to tensor<2xf32>
// ZERO2-NEXT:    aten.call "aten::linear"(%{{.+}}, %[[WH]], %[[BH]]) {aten.requires_grad = array<i64: 1, 2>}
// ZERO2-NEXT:    fsdp.free %[[R]] : tensor<10xf32>
// ZERO2-NEXT:    %[[L:.+]] = aten.call "aten::sum"
// ZERO2-NEXT:    return %[[L]] : tensor<f32>
// ZERO2-NOT:     fsdp.update

// OSS (fairscale's optimizer-state sharding): every flat parameter is
// replicated, read whole without a gather and never freed; its flat
// gradient is all-reduced (mean) over the world and each rank keeps its
// local shard; the optimizer updates the rank's shard of the parameter and
// all-gathers the updated shards into the whole.
// OSS:       fsdp.sharding = #fsdp<sharding OSS>
// OSS:       fsdp.flat_param @a._flat_param for "a" params [@a.weight] offsets [0] numel 12 padded 12 shards 2 replicated : f32
// OSS-LABEL: func.func @train_step
// OSS-NOT:   fsdp.all_gather.start
// OSS-NOT:   fsdp.free
// OSS:       %[[A:.*]] = fsdp.get @a._flat_param : tensor<12xf32>
// OSS-NEXT:  fsdp.view %[[A]][0] : tensor<12xf32> to tensor<4x3xf32>
// OSS:       %[[R:.*]] = fsdp.all_reduce.start %{{.*}} group world reduce mean : tensor<12xf32> -> <tensor<12xf32>>
// OSS:       %[[W:.*]] = fsdp.wait %[[R]] {fsdp.reduced_grad} : <tensor<12xf32>>
// OSS-NEXT:  %[[G:.*]] = fsdp.local_shard %[[W]] for @a._flat_param group shard : tensor<12xf32> -> tensor<6xf32>
// OSS-NEXT:  %[[P:.*]] = fsdp.local_shard %[[A]] for @a._flat_param group shard {fsdp.optimizer_op} : tensor<12xf32> -> tensor<6xf32>
// OSS-NEXT:  %[[U:.*]] = aten.call "aten::add.Tensor"(%[[P]], %[[G]], {{.*}}) {fsdp.optimizer_op} : {{.*}} -> tensor<6xf32>
// OSS-NEXT:  %[[S:.*]] = fsdp.all_gather.start %[[U]] for @a._flat_param group shard {fsdp.optimizer_op} : tensor<6xf32> -> <tensor<12xf32>>
// OSS-NEXT:  %[[N:.*]] = fsdp.wait %[[S]] {fsdp.optimizer_op} : <tensor<12xf32>>
// OSS-NEXT:  fsdp.update @a._flat_param, %[[N]] {fsdp.optimizer_op} : tensor<12xf32>
// OSS-NEXT:  return

// SHARDED_DDP (ShardedDDP with OSS): parameters replicated as under OSS, the
// flat gradient reduce-scattered (mean) to the rank that owns each shard.
// SDDP:       fsdp.sharding = #fsdp<sharding SHARDED_DDP>
// SDDP:       fsdp.flat_param @a._flat_param for "a" params [@a.weight] offsets [0] numel 12 padded 12 shards 2 replicated : f32
// SDDP-LABEL: func.func @train_step
// SDDP-NOT:   fsdp.all_gather.start
// SDDP-NOT:   fsdp.free
// SDDP:       fsdp.get @a._flat_param : tensor<12xf32>
// SDDP:       %[[R:.*]] = fsdp.reduce_scatter.start %{{.*}} for @a._flat_param group shard reduce mean : tensor<12xf32> -> <tensor<6xf32>>
// SDDP:       %[[W:.*]] = fsdp.wait %[[R]] {fsdp.reduced_grad} : <tensor<6xf32>>
// SDDP-NEXT:  fsdp.grad @a._flat_param, %[[W]] : tensor<6xf32>
