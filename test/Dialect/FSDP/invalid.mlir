// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// fsdp.param / fsdp.buffer
//===----------------------------------------------------------------------===//

// expected-error@+1 {{'fsdp.param' op expects a non-empty fully-qualified name}}
fsdp.param @"" : tensor<4xf32> in "" : "M"

// -----

// expected-error@+1 {{'fsdp.buffer' op expects a non-empty fully-qualified name}}
fsdp.buffer @"" : tensor<4xf32> in "" : "M"

// -----

// expected-error@+1 {{'fsdp.param' op alias "" must be another, non-empty name}}
fsdp.param @w : tensor<4xf32> in "" : "M" aliases [""]

// -----

// expected-error@+1 {{'fsdp.param' op alias "wte.weight" must be another, non-empty name}}
fsdp.param @wte.weight : tensor<4xf32> in "wte" : "M" aliases ["lm_head.weight", "wte.weight"]

// -----

// expected-error@+1 {{'fsdp.buffer' op alias "bn.mean" must be another, non-empty name}}
fsdp.buffer @"bn.mean" : tensor<4xf32> in "bn" : "M" aliases ["bn.mean"]

// -----

// expected-error@+1 {{'fsdp.param' op lists alias "lm_head.weight" twice}}
fsdp.param @wte.weight : tensor<4xf32> in "wte" : "M" aliases ["lm_head.weight", "head.weight", "lm_head.weight"]

// -----

// expected-error@+1 {{'fsdp.buffer' op lists alias "b2" twice}}
fsdp.buffer @b : tensor<4xf32> in "" : "M" aliases ["b2", "b2"]

// -----

// expected-error@+1 {{'fsdp.param' op expects a floating-point parameter, found 'tensor<4xi64>'}}
fsdp.param @step : tensor<4xi64> in "" : "M"

// -----

// Buffers may have any element type.
fsdp.buffer @step : tensor<i64> in "" : "M"
// expected-error@+1 {{'fsdp.param' op attribute 'type' failed to satisfy constraint: type attribute of statically shaped tensor of any type values}}
fsdp.param @w : tensor<?x4xf32> in "" : "M"

// -----

// expected-error@+1 {{'fsdp.buffer' op attribute 'type' failed to satisfy constraint: type attribute of statically shaped tensor of any type values}}
fsdp.buffer @b : memref<4xf32> in "" : "M"

// -----

// expected-note@+1 {{see existing symbol definition here}}
fsdp.param @w : tensor<4xf32> in "" : "M"
// expected-error@+1 {{redefinition of symbol named 'w'}}
fsdp.buffer @w : tensor<4xf32> in "" : "M"

// -----

//===----------------------------------------------------------------------===//
// fsdp.get / fsdp.update
//===----------------------------------------------------------------------===//

func.func @get_undefined() {
  // expected-error@+1 {{'fsdp.get' op refers to @missing, which is not a parameter, flat parameter, buffer or optimizer state}}
  %0 = fsdp.get @missing : tensor<4xf32>
  return
}

// -----

// Aliases are not symbols: a tied weight is read by its first name.
fsdp.param @wte.weight : tensor<4xf32> in "wte" : "M" aliases ["lm_head.weight"]
func.func @get_alias() {
  // expected-error@+1 {{'fsdp.get' op refers to @lm_head.weight, which is not a parameter, flat parameter, buffer or optimizer state}}
  %0 = fsdp.get @lm_head.weight : tensor<4xf32>
  return
}

// -----

fsdp.param @w : tensor<4xf32> in "" : "M"
fsdp.flat_param @unit0 for "" params [@w] offsets [0] numel 4 padded 4 shards 2 : f32
func.func @get_flat_param() {
  // A rank reads its shard of a flat parameter.
  // expected-error@+1 {{'fsdp.get' op result type 'tensor<4xf32>' does not match @unit0 of type 'tensor<2xf32>'}}
  %0 = fsdp.get @unit0 : tensor<4xf32>
  return
}

// -----

fsdp.param @fc1.weight : tensor<16x32xf32> in "fc1" : "M"
func.func @get_type() {
  // expected-error@+1 {{'fsdp.get' op result type 'tensor<32x16xf32>' does not match @fc1.weight of type 'tensor<16x32xf32>'}}
  %0 = fsdp.get @fc1.weight : tensor<32x16xf32>
  return
}

// -----

fsdp.buffer @"bn.running_mean" : tensor<16xf32> in "bn" : "M"
func.func @get_buffer_type() {
  // expected-error@+1 {{'fsdp.get' op result type 'tensor<16xf64>' does not match @bn.running_mean of type 'tensor<16xf32>'}}
  %0 = fsdp.get @bn.running_mean : tensor<16xf64>
  return
}

// -----

func.func @get_dynamic() {
  // expected-error@+1 {{'fsdp.get' op result #0 must be statically shaped tensor of any type values, but got 'tensor<?xf32>'}}
  %0 = fsdp.get @w : tensor<?xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// fsdp.optim_state / fsdp.grad
//===----------------------------------------------------------------------===//

// expected-error@+1 {{'fsdp.optim_state' op is for @fc1.weight, which is not a parameter or flat parameter}}
fsdp.optim_state @"fc1.weight:exp_avg" : tensor<16x32xf32> for @fc1.weight

// -----

fsdp.buffer @bn.running_mean : tensor<16xf32> in "bn" : "M"
// expected-error@+1 {{'fsdp.optim_state' op is for @bn.running_mean, which is not a parameter or flat parameter}}
fsdp.optim_state @"bn.running_mean:exp_avg" : tensor<16xf32> for @bn.running_mean

// -----

fsdp.param @fc1.weight : tensor<16x32xf32> in "fc1" : "M"
// expected-error@+1 {{'fsdp.optim_state' op has type 'tensor<32x16xf32>' but its parameter @fc1.weight has type 'tensor<16x32xf32>'}}
fsdp.optim_state @"fc1.weight:exp_avg" : tensor<32x16xf32> for @fc1.weight

// -----

// expected-error@+1 {{'fsdp.optim_state' op attribute 'type' failed to satisfy constraint: type attribute of statically shaped tensor of any type values}}
fsdp.optim_state @"optim:step" : tensor<?xf64>

// -----

fsdp.buffer @bn.running_mean : tensor<16xf32> in "bn" : "M"
func.func @grad_of_buffer(%g: tensor<16xf32>) {
  // expected-error@+1 {{'fsdp.grad' op refers to @bn.running_mean, which is not a parameter or flat parameter}}
  fsdp.grad @bn.running_mean, %g : tensor<16xf32>
  return
}

// -----

fsdp.param @fc1.weight : tensor<16x32xf32> in "fc1" : "M"
func.func @grad_type(%g: tensor<16x32xf64>) {
  // expected-error@+1 {{'fsdp.grad' op gradient type 'tensor<16x32xf64>' does not match @fc1.weight of type 'tensor<16x32xf32>'}}
  fsdp.grad @fc1.weight, %g : tensor<16x32xf64>
  return
}

// -----

fsdp.param @fc1.weight : tensor<16x32xf32> in "fc1" : "M"
fsdp.optim_state @"fc1.weight:momentum_buffer" : tensor<16x32xf32> for @fc1.weight
func.func @update_optim_type(%v: tensor<16x32xf16>) {
  // expected-error@+1 {{'fsdp.update' op value type 'tensor<16x32xf16>' does not match @"fc1.weight:momentum_buffer" of type 'tensor<16x32xf32>'}}
  fsdp.update @"fc1.weight:momentum_buffer", %v : tensor<16x32xf16>
  return
}

// -----

// Mixed precision reads model state in a 16-bit type, never optimizer state.
fsdp.param @fc1.weight : tensor<16x32xf32> in "fc1" : "M"
fsdp.optim_state @"fc1.weight:exp_avg" : tensor<16x32xf32> for @fc1.weight
func.func @get_optim_half() {
  // expected-error@+1 {{'fsdp.get' op result type 'tensor<16x32xbf16>' does not match @"fc1.weight:exp_avg" of type 'tensor<16x32xf32>'}}
  %0 = fsdp.get @"fc1.weight:exp_avg" : tensor<16x32xbf16>
  return
}

// -----

// ... nor integer state.
fsdp.buffer @steps : tensor<i64> in "" : "M"
func.func @get_int_half() {
  // expected-error@+1 {{'fsdp.get' op result type 'tensor<bf16>' does not match @steps of type 'tensor<i64>'}}
  %0 = fsdp.get @steps : tensor<bf16>
  return
}

// -----

func.func @update_undefined(%v: tensor<4xf32>) {
  // expected-error@+1 {{'fsdp.update' op refers to @missing, which is not a parameter, flat parameter, buffer or optimizer state}}
  fsdp.update @missing, %v : tensor<4xf32>
  return
}

// -----

fsdp.buffer @bn.num_batches_tracked : tensor<i64> in "bn" : "M"
func.func @update_type(%v: tensor<1xi64>) {
  // expected-error@+1 {{'fsdp.update' op value type 'tensor<1xi64>' does not match @bn.num_batches_tracked of type 'tensor<i64>'}}
  fsdp.update @bn.num_batches_tracked, %v : tensor<1xi64>
  return
}

// -----

//===----------------------------------------------------------------------===//
// fsdp.flat_param: layout
//===----------------------------------------------------------------------===//

fsdp.param @w : tensor<4xf32> in "" : "M"
fsdp.param @b : tensor<4xf32> in "" : "M"
// expected-error@+1 {{'fsdp.flat_param' op has 2 params but 1 offsets}}
fsdp.flat_param @unit0 for "" params [@w, @b] offsets [0] numel 8 padded 8 shards 1 : f32

// -----

// expected-error@+1 {{'fsdp.flat_param' op expects a shard group size of at least 1, found 0}}
fsdp.flat_param @unit0 for "" params [] offsets [] numel 0 padded 0 shards 0 : f32

// -----

// expected-error@+1 {{'fsdp.flat_param' op expects a shard group size of at least 1, found -2}}
fsdp.flat_param @unit0 for "" params [] offsets [] numel 0 padded 0 shards -2 : f32

// -----

// expected-error@+1 {{'fsdp.flat_param' op padded size 527 is smaller than its numel 528}}
fsdp.flat_param @unit0 for "" params [] offsets [] numel 528 padded 527 shards 1 : f32

// -----

// A negative numel is reported with the same message.
// expected-error@+1 {{'fsdp.flat_param' op padded size 0 is smaller than its numel -4}}
fsdp.flat_param @unit0 for "" params [] offsets [] numel -4 padded 0 shards 1 : f32

// -----

// expected-error@+1 {{'fsdp.flat_param' op padded size 530 is not a multiple of the shard group size 4}}
fsdp.flat_param @unit0 for "" params [] offsets [] numel 528 padded 530 shards 4 : f32

// -----

// expected-error@+1 {{'fsdp.flat_param' op expects a floating-point element type, found 'i32'}}
fsdp.flat_param @unit0 for "" params [] offsets [] numel 0 padded 0 shards 1 : i32

// -----

//===----------------------------------------------------------------------===//
// fsdp.flat_param: parameters
//===----------------------------------------------------------------------===//

fsdp.param @w : tensor<4xf32> in "" : "M"
// expected-error@+1 {{'fsdp.flat_param' op lists @missing, which is not a parameter}}
fsdp.flat_param @unit0 for "" params [@w, @missing] offsets [0, 4] numel 8 padded 8 shards 1 : f32

// -----

// Buffers are not sharded.
fsdp.buffer @bn.running_mean : tensor<4xf32> in "bn" : "M"
// expected-error@+1 {{'fsdp.flat_param' op lists @bn.running_mean, which is not a parameter}}
fsdp.flat_param @unit0 for "bn" params [@bn.running_mean] offsets [0] numel 4 padded 4 shards 1 : f32

// -----

fsdp.param @w : tensor<4xf32> in "" : "M"
fsdp.param @h : tensor<4xf16> in "" : "M"
// expected-error@+1 {{'fsdp.flat_param' op parameter @h has element type 'f16' but the flat parameter holds 'f32'}}
fsdp.flat_param @unit0 for "" params [@w, @h] offsets [0, 4] numel 8 padded 8 shards 1 : f32

// -----

fsdp.param @fc1.weight : tensor<16x32xf32> in "fc1" : "M"
fsdp.param @fc1.bias : tensor<16xf32> in "fc1" : "M"
// expected-error@+1 {{'fsdp.flat_param' op parameter @fc1.bias at offset 500 overlaps the previous one, which ends at 512}}
fsdp.flat_param @unit0 for "fc1" params [@fc1.weight, @fc1.bias] offsets [0, 500] numel 516 padded 516 shards 1 : f32

// -----

// A parameter listed twice overlaps itself.
fsdp.param @w : tensor<4xf32> in "" : "M"
// expected-error@+1 {{'fsdp.flat_param' op parameter @w at offset 0 overlaps the previous one, which ends at 4}}
fsdp.flat_param @unit0 for "" params [@w, @w] offsets [0, 0] numel 4 padded 4 shards 1 : f32

// -----

fsdp.param @w : tensor<4xf32> in "" : "M"
// expected-error@+1 {{'fsdp.flat_param' op parameter @w at offset -1 overlaps the previous one, which ends at 0}}
fsdp.flat_param @unit0 for "" params [@w] offsets [-1] numel 3 padded 3 shards 1 : f32

// -----

fsdp.param @fc1.weight : tensor<16x32xf32> in "fc1" : "M"
fsdp.param @fc1.bias : tensor<16xf32> in "fc1" : "M"
// expected-error@+1 {{'fsdp.flat_param' op parameters end at 528 but numel is 532}}
fsdp.flat_param @unit0 for "fc1" params [@fc1.weight, @fc1.bias] offsets [0, 512] numel 532 padded 532 shards 4 : f32

// -----

// Gaps between parameters are allowed; the last one must end at numel.
fsdp.param @w : tensor<4xf32> in "" : "M"
fsdp.param @b : tensor<4xf32> in "" : "M"
// expected-error@+1 {{'fsdp.flat_param' op parameters end at 12 but numel is 8}}
fsdp.flat_param @unit0 for "" params [@w, @b] offsets [0, 8] numel 8 padded 8 shards 1 : f32

// -----

// expected-error@+1 {{'fsdp.flat_param' op parameters end at 0 but numel is 4}}
fsdp.flat_param @unit0 for "" params [] offsets [] numel 4 padded 4 shards 1 : f32

// -----

//===----------------------------------------------------------------------===//
// fsdp.all_gather.start / fsdp.reduce_scatter.start
//===----------------------------------------------------------------------===//

func.func @all_gather_undefined_unit(%s: tensor<133xf32>) {
  // expected-error@+1 {{'fsdp.all_gather.start' op refers to @unit0, which is not a flat parameter}}
  %0 = fsdp.all_gather.start %s for @unit0 group shard : tensor<133xf32> -> !fsdp.future<tensor<532xf32>>
  return
}

// -----

fsdp.param @w : tensor<532xf32> in "" : "M"
func.func @all_gather_param(%s: tensor<133xf32>) {
  // expected-error@+1 {{'fsdp.all_gather.start' op refers to @w, which is not a flat parameter}}
  %0 = fsdp.all_gather.start %s for @w group shard : tensor<133xf32> -> !fsdp.future<tensor<532xf32>>
  return
}

// -----

func.func @reduce_scatter_undefined_unit(%g: tensor<532xf32>) {
  // expected-error@+1 {{'fsdp.reduce_scatter.start' op refers to @unit0, which is not a flat parameter}}
  %0 = fsdp.reduce_scatter.start %g for @unit0 group shard reduce sum : tensor<532xf32> -> !fsdp.future<tensor<133xf32>>
  return
}

// -----

fsdp.param @w : tensor<532xf32> in "" : "M"
fsdp.flat_param @unit0 for "" params [@w] offsets [0] numel 532 padded 532 shards 4 : f32
func.func @all_gather_element_types(%s: tensor<133xf32>) {
  // expected-error@+1 {{'fsdp.all_gather.start' op element types differ: 'f32' and 'f16'}}
  %0 = fsdp.all_gather.start %s for @unit0 group shard : tensor<133xf32> -> !fsdp.future<tensor<532xf16>>
  return
}

// -----

fsdp.param @w : tensor<532xf32> in "" : "M"
fsdp.flat_param @unit0 for "" params [@w] offsets [0] numel 532 padded 532 shards 4 : f32
func.func @reduce_scatter_element_types(%g: tensor<532xf32>) {
  // expected-error@+1 {{'fsdp.reduce_scatter.start' op element types differ: 'bf16' and 'f32'}}
  %0 = fsdp.reduce_scatter.start %g for @unit0 group shard reduce mean : tensor<532xf32> -> !fsdp.future<tensor<133xbf16>>
  return
}

// -----

fsdp.param @w : tensor<528xf32> in "" : "M"
fsdp.flat_param @unit0 for "" params [@w] offsets [0] numel 528 padded 532 shards 4 : f32
func.func @all_gather_unpadded(%s: tensor<132xf32>) {
  // expected-error@+1 {{'fsdp.all_gather.start' op full buffer must be 'tensor<532xf32>', the padded size of @unit0, and the shard 1-D; found 'tensor<528xf32>' and 'tensor<132xf32>'}}
  %0 = fsdp.all_gather.start %s for @unit0 group shard : tensor<132xf32> -> !fsdp.future<tensor<528xf32>>
  return
}

// -----

fsdp.param @w : tensor<532xf32> in "" : "M"
fsdp.flat_param @unit0 for "" params [@w] offsets [0] numel 532 padded 532 shards 4 : f32
func.func @all_gather_full_rank(%s: tensor<133xf32>) {
  // expected-error@+1 {{'fsdp.all_gather.start' op full buffer must be 'tensor<532xf32>', the padded size of @unit0, and the shard 1-D; found 'tensor<4x133xf32>' and 'tensor<133xf32>'}}
  %0 = fsdp.all_gather.start %s for @unit0 group shard : tensor<133xf32> -> !fsdp.future<tensor<4x133xf32>>
  return
}

// -----

fsdp.param @w : tensor<532xf32> in "" : "M"
fsdp.flat_param @unit0 for "" params [@w] offsets [0] numel 532 padded 532 shards 4 : f32
func.func @reduce_scatter_unpadded(%g: tensor<528xf32>) {
  // expected-error@+1 {{'fsdp.reduce_scatter.start' op full buffer must be 'tensor<532xf32>', the padded size of @unit0, and the result shard 1-D; found 'tensor<528xf32>' and 'tensor<132xf32>'}}
  %0 = fsdp.reduce_scatter.start %g for @unit0 group shard reduce sum : tensor<528xf32> -> !fsdp.future<tensor<132xf32>>
  return
}

// -----

fsdp.param @w : tensor<532xf32> in "" : "M"
fsdp.flat_param @unit0 for "" params [@w] offsets [0] numel 532 padded 532 shards 4 : f32
func.func @all_gather_shard_size(%s: tensor<266xf32>) {
  // expected-error@+1 {{'fsdp.all_gather.start' op shard of 266 elements times the shard group size 4 is not the padded size 532}}
  %0 = fsdp.all_gather.start %s for @unit0 group shard : tensor<266xf32> -> !fsdp.future<tensor<532xf32>>
  return
}

// -----

fsdp.param @w : tensor<532xf32> in "" : "M"
fsdp.flat_param @unit0 for "" params [@w] offsets [0] numel 532 padded 532 shards 4 : f32
func.func @reduce_scatter_shard_size(%g: tensor<532xf32>) {
  // expected-error@+1 {{'fsdp.reduce_scatter.start' op result shard of 532 elements times the shard group size 4 is not the padded size 532}}
  %0 = fsdp.reduce_scatter.start %g for @unit0 group shard reduce sum : tensor<532xf32> -> !fsdp.future<tensor<532xf32>>
  return
}

// -----

fsdp.param @w : tensor<532xf32> in "" : "M"
fsdp.flat_param @unit0 for "" params [@w] offsets [0] numel 532 padded 532 shards 4 : f32
func.func @all_gather_replicate(%s: tensor<133xf32>) {
  // expected-error@+1 {{'fsdp.all_gather.start' op shards over the shard group or the world, not the replica group}}
  %0 = fsdp.all_gather.start %s for @unit0 group replicate : tensor<133xf32> -> !fsdp.future<tensor<532xf32>>
  return
}

// -----

fsdp.param @w : tensor<532xf32> in "" : "M"
fsdp.flat_param @unit0 for "" params [@w] offsets [0] numel 532 padded 532 shards 4 : f32
func.func @reduce_scatter_replicate(%g: tensor<532xf32>) {
  // expected-error@+1 {{'fsdp.reduce_scatter.start' op shards over the shard group or the world, not the replica group}}
  %0 = fsdp.reduce_scatter.start %g for @unit0 group replicate reduce mean : tensor<532xf32> -> !fsdp.future<tensor<133xf32>>
  return
}

// -----

fsdp.param @w : tensor<532xf32> in "" : "M"
fsdp.flat_param @unit0 for "" params [@w] offsets [0] numel 532 padded 532 shards 4 : f32
func.func @reduce_scatter_across_replicas(%g: tensor<532xf32>) {
  // expected-error@+1 {{'fsdp.reduce_scatter.start' op sums across replicate and scatters over shard: only a sum across the world scattered over the shard group is defined}}
  %0 = fsdp.reduce_scatter.start %g for @unit0 group shard across replicate reduce mean : tensor<532xf32> -> !fsdp.future<tensor<133xf32>>
  return
}

// -----

fsdp.param @w : tensor<532xf32> in "" : "M"
fsdp.flat_param @unit0 for "" params [@w] offsets [0] numel 532 padded 532 shards 4 : f32
func.func @reduce_scatter_across_own_group(%g: tensor<532xf32>) {
  // expected-error@+1 {{'fsdp.reduce_scatter.start' op sums across world and scatters over world: only a sum across the world scattered over the shard group is defined}}
  %0 = fsdp.reduce_scatter.start %g for @unit0 group world across world reduce mean : tensor<532xf32> -> !fsdp.future<tensor<133xf32>>
  return
}

// -----

func.func @all_gather_shard_rank(%s: tensor<4x133xf32>) {
  // expected-error@+1 {{'fsdp.all_gather.start' op operand #0 must be statically shaped 1-D tensor, but got 'tensor<4x133xf32>'}}
  %0 = fsdp.all_gather.start %s for @unit0 group shard : tensor<4x133xf32> -> !fsdp.future<tensor<532xf32>>
  return
}

// -----

func.func @all_gather_bad_group(%s: tensor<133xf32>) {
  // expected-error@+2 {{expected ::fsdp::CommGroup to be one of: world, shard, replicate}}
  // expected-error@+1 {{failed to parse FSDP_CommGroupAttr parameter 'value' which is to be a `::fsdp::CommGroup`}}
  %0 = fsdp.all_gather.start %s for @unit0 group rows : tensor<133xf32> -> !fsdp.future<tensor<532xf32>>
  return
}

// -----

//===----------------------------------------------------------------------===//
// fsdp.all_reduce.start
//===----------------------------------------------------------------------===//

func.func @all_reduce_type(%g: tensor<133xf32>) {
  // expected-error@+1 {{'fsdp.all_reduce.start' op result '!fsdp.future<tensor<133xf16>>' must hold the input's type 'tensor<133xf32>'}}
  %0 = fsdp.all_reduce.start %g group replicate reduce mean : tensor<133xf32> -> !fsdp.future<tensor<133xf16>>
  return
}

// -----

func.func @all_reduce_shape(%g: tensor<2x3xf32>) {
  // expected-error@+1 {{'fsdp.all_reduce.start' op result '!fsdp.future<tensor<6xf32>>' must hold the input's type 'tensor<2x3xf32>'}}
  %0 = fsdp.all_reduce.start %g group world reduce sum : tensor<2x3xf32> -> !fsdp.future<tensor<6xf32>>
  return
}

// -----

func.func @all_reduce_bad_reduction(%g: tensor<133xf32>) {
  // expected-error@+2 {{expected ::fsdp::ReduceOp to be one of: sum, mean}}
  // expected-error@+1 {{failed to parse FSDP_ReduceOpAttr parameter 'value' which is to be a `::fsdp::ReduceOp`}}
  %0 = fsdp.all_reduce.start %g group replicate reduce max : tensor<133xf32> -> !fsdp.future<tensor<133xf32>>
  return
}

// -----

// expected-error@+2 {{invalid kind of type specified: expected builtin.tensor, but found 'tensor<*xf32>'}}
// expected-error@+1 {{failed to parse FSDP_FutureType parameter 'tensorType' which is to be a `::mlir::RankedTensorType`}}
func.func @future_unranked(%f: !fsdp.future<tensor<*xf32>>) {
  return
}

// -----

//===----------------------------------------------------------------------===//
// fsdp.wait
//===----------------------------------------------------------------------===//

func.func @wait_block_argument(%f: !fsdp.future<tensor<4xf32>>) -> tensor<4xf32> {
  // expected-error@+1 {{'fsdp.wait' op must wait on the future of a collective start}}
  %0 = fsdp.wait %f : !fsdp.future<tensor<4xf32>>
  return %0 : tensor<4xf32>
}

// -----

func.func @wait_twice(%g: tensor<4xf32>) {
  %f = fsdp.all_reduce.start %g group world reduce sum : tensor<4xf32> -> !fsdp.future<tensor<4xf32>>
  // expected-error@+1 {{'fsdp.wait' op future is waited more than once}}
  %0 = fsdp.wait %f : !fsdp.future<tensor<4xf32>>
  %1 = fsdp.wait %f : !fsdp.future<tensor<4xf32>>
  return
}

// -----

func.func @wait_result_type(%g: tensor<4xf32>) {
  %f = fsdp.all_reduce.start %g group world reduce sum : tensor<4xf32> -> !fsdp.future<tensor<4xf32>>
  // expected-error@+1 {{'fsdp.wait' op failed to verify that result type is the future's tensor type}}
  %0 = "fsdp.wait"(%f) : (!fsdp.future<tensor<4xf32>>) -> tensor<4xf16>
  return
}

// -----

func.func @wait_tensor(%g: tensor<4xf32>) {
  // expected-error@+1 {{'fsdp.wait' op operand #0 must be the pending result of an asynchronous collective, but got 'tensor<4xf32>'}}
  %0 = "fsdp.wait"(%g) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// fsdp.free
//===----------------------------------------------------------------------===//

func.func @free_argument(%b: tensor<532xf32>) {
  // expected-error@+1 {{'fsdp.free' op can only free a buffer gathered by an all-gather}}
  fsdp.free %b : tensor<532xf32>
  return
}

// -----

func.func @free_all_reduce(%g: tensor<4xf32>) {
  %f = fsdp.all_reduce.start %g group world reduce sum : tensor<4xf32> -> !fsdp.future<tensor<4xf32>>
  %r = fsdp.wait %f : !fsdp.future<tensor<4xf32>>
  // expected-error@+1 {{'fsdp.free' op can only free a buffer gathered by an all-gather}}
  fsdp.free %r : tensor<4xf32>
  return
}

// -----

fsdp.param @w : tensor<532xf32> in "" : "M"
fsdp.flat_param @unit0 for "" params [@w] offsets [0] numel 532 padded 532 shards 4 : f32
func.func @free_reduce_scatter(%g: tensor<532xf32>) {
  %f = fsdp.reduce_scatter.start %g for @unit0 group shard reduce sum : tensor<532xf32> -> !fsdp.future<tensor<133xf32>>
  %r = fsdp.wait %f : !fsdp.future<tensor<133xf32>>
  // expected-error@+1 {{'fsdp.free' op can only free a buffer gathered by an all-gather}}
  fsdp.free %r : tensor<133xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// fsdp.view
//===----------------------------------------------------------------------===//

func.func @view_element_type(%b: tensor<532xf32>) {
  // expected-error@+1 {{'fsdp.view' op result element type 'f16' differs from the buffer's 'f32'}}
  %0 = fsdp.view %b[0] : tensor<532xf32> to tensor<16xf16>
  return
}

// -----

func.func @view_past_the_end(%b: tensor<532xf32>) {
  // expected-error@+1 {{'fsdp.view' op view of 32 elements at offset 512 does not fit in a buffer of 532}}
  %0 = fsdp.view %b[512] : tensor<532xf32> to tensor<2x16xf32>
  return
}

// -----

func.func @view_negative_offset(%b: tensor<532xf32>) {
  // expected-error@+1 {{'fsdp.view' op view of 16 elements at offset -1 does not fit in a buffer of 532}}
  %0 = fsdp.view %b[-1] : tensor<532xf32> to tensor<16xf32>
  return
}

// -----

func.func @view_offset_at_end(%b: tensor<532xf32>) {
  // expected-error@+1 {{'fsdp.view' op view of 1 elements at offset 532 does not fit in a buffer of 532}}
  %0 = fsdp.view %b[532] : tensor<532xf32> to tensor<f32>
  return
}

// -----

func.func @view_buffer_rank(%b: tensor<4x133xf32>) {
  // expected-error@+1 {{'fsdp.view' op operand #0 must be statically shaped 1-D tensor, but got 'tensor<4x133xf32>'}}
  %0 = fsdp.view %b[0] : tensor<4x133xf32> to tensor<16xf32>
  return
}

// -----

func.func @view_dynamic_result(%b: tensor<532xf32>) {
  // expected-error@+1 {{'fsdp.view' op result #0 must be statically shaped tensor of any type values, but got 'tensor<?xf32>'}}
  %0 = fsdp.view %b[0] : tensor<532xf32> to tensor<?xf32>
  return
}

// -----

fsdp.param @w : tensor<16xf32> in "" : "M"
fsdp.flat_param @unit0 for "" params [@w] offsets [0] numel 16 padded 16 shards 4 : f32
func.func @gather_wrong_dtype(%s: tensor<4xf64>) {
  // expected-error@+1 {{'fsdp.all_gather.start' op element type 'f64' differs from @unit0's 'f32'}}
  %f = fsdp.all_gather.start %s for @unit0 group shard : tensor<4xf64> -> !fsdp.future<tensor<16xf64>>
  return
}

// -----

func.func @dynamic_future(%f: !fsdp.future<tensor<?xf32>>) {
  // expected-error@-1 {{future must hold a statically shaped tensor, found 'tensor<?xf32>'}}
  return
}

// -----

func.func @view_offset_overflow(%b: tensor<532xf32>) {
  // expected-error@+1 {{'fsdp.view' op view of 16 elements at offset 9223372036854775807 does not fit in a buffer of 532}}
  %v = fsdp.view %b[9223372036854775807] : tensor<532xf32> to tensor<16xf32>
  return
}

// -----

fsdp.param @w : tensor<16xf32> in "" : "M"
fsdp.flat_param @unit0 for "" params [@w] offsets [0] numel 16 padded 16 shards 4 replicated : f32
func.func @local_shard_wrong_size(%b: tensor<16xf32>) {
  // expected-error@+1 {{'fsdp.local_shard' op result shard of 8 elements times the shard group size 4 is not the padded size 16}}
  %s = fsdp.local_shard %b for @unit0 group shard : tensor<16xf32> -> tensor<8xf32>
  return
}

// -----

fsdp.param @w : tensor<16xf32> in "" : "M"
fsdp.flat_param @unit0 for "" params [@w] offsets [0] numel 16 padded 16 shards 4 replicated : f32
func.func @local_shard_not_whole(%b: tensor<12xf32>) {
  // expected-error@+1 {{'fsdp.local_shard' op full buffer must be 'tensor<16xf32>', the padded size of @unit0, and the result shard 1-D; found 'tensor<12xf32>' and 'tensor<4xf32>'}}
  %s = fsdp.local_shard %b for @unit0 group shard : tensor<12xf32> -> tensor<4xf32>
  return
}

// -----

func.func @local_shard_replica_group(%b: tensor<16xf32>) {
  // expected-error@+1 {{'fsdp.local_shard' op shards over the shard group or the world, not the replica group}}
  %s = fsdp.local_shard %b for @unit0 group replicate : tensor<16xf32> -> tensor<4xf32>
  return
}

// -----

fsdp.param @w : tensor<16xf32> in "" : "M"
fsdp.flat_param @unit0 for "" params [@w] offsets [0] numel 16 padded 16 shards 4 replicated : f32
func.func @replicated_read_as_shard() {
  // expected-error@+1 {{'fsdp.get' op result type 'tensor<4xf32>' does not match @unit0 of type 'tensor<16xf32>'}}
  %s = fsdp.get @unit0 : tensor<4xf32>
  return
}

// -----

// The sharding strategy a module carries is one of the known ones.
// expected-error@+2 {{expected ::fsdp::ShardingStrategy to be one of: FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, OSS, SHARDED_DDP}}
// expected-error@+1 {{failed to parse FSDP_ShardingStrategyAttr parameter 'value' which is to be a `::fsdp::ShardingStrategy`}}
module attributes {fsdp.sharding = #fsdp<sharding ZERO3>} {
}
