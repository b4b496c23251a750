// RUN: fsdp-opt %s -split-input-file -verify-diagnostics

//===----------------------------------------------------------------------===//
// aten.call: overload name
//===----------------------------------------------------------------------===//

func.func @no_namespace(%x: tensor<4xf32>) {
  // expected-error@+1 {{'aten.call' op expects an overload name `namespace::name[.overload]`, found "relu"}}
  %0 = aten.call "relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @empty_namespace(%x: tensor<4xf32>) {
  // expected-error@+1 {{expects an overload name `namespace::name[.overload]`, found "::relu"}}
  %0 = aten.call "::relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @empty_name(%x: tensor<4xf32>) {
  // expected-error@+1 {{expects an overload name `namespace::name[.overload]`, found "aten::"}}
  %0 = aten.call "aten::"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @nested_namespace(%x: tensor<4xf32>) {
  // expected-error@+1 {{expects an overload name `namespace::name[.overload]`, found "aten::nn::relu"}}
  %0 = aten.call "aten::nn::relu"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @overload_without_name(%x: tensor<4xf32>) {
  // expected-error@+1 {{expects an overload name `namespace::name[.overload]`, found "aten::.Tensor"}}
  %0 = aten.call "aten::.Tensor"(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @empty_overload(%x: tensor<4xf32>) {
  // expected-error@+1 {{expects an overload name `namespace::name[.overload]`, found "aten::add."}}
  %0 = aten.call "aten::add."(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// aten.call: arguments against operands
//===----------------------------------------------------------------------===//

// Only the generic form can spell a negative list size.
func.func @negative_tensor_list(%x: tensor<4xf32>) {
  // expected-error@+1 {{'aten.call' op has a tensor list of negative size}}
  %0 = "aten.call"(%x) <{args = [#aten.tensor_list<-1>, #aten.tensor, #aten.tensor], overload = "aten::cat"}> : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @more_operands_than_arguments(%x: tensor<4xf32>) {
  // expected-error@+1 {{'aten.call' op arguments name 1 tensor operands but the op has 2}}
  %0 = "aten.call"(%x, %x) <{args = [#aten.tensor, 1], overload = "aten::add.Tensor"}> : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @fewer_operands_than_arguments(%x: tensor<4xf32>) {
  // expected-error@+1 {{'aten.call' op arguments name 3 tensor operands but the op has 1}}
  %0 = "aten.call"(%x) <{args = [#aten.tensor_list<2>, #aten.tensor], overload = "aten::index_put"}> : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// A placeholder written as an attribute in the custom form has no operand.
func.func @placeholder_without_operand() {
  // expected-error@+1 {{'aten.call' op arguments name 1 tensor operands but the op has 0}}
  %0 = aten.call "aten::relu"(#aten.tensor) : () -> tensor<4xf32>
  return
}

// -----

func.func @operands_and_types_differ(%x: tensor<4xf32>) {
  // expected-error@+1 {{custom op 'aten.call' number of operands and types do not match: got 2 operands and 1 types}}
  %0 = aten.call "aten::add.Tensor"(%x, %x, 1) : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// aten.call: mutated arguments
//===----------------------------------------------------------------------===//

func.func @mutates_more_than_results(%x: tensor<4xf32>) {
  // expected-error@+1 {{'aten.call' op mutates 3 arguments but has only 2 results}}
  %0:2 = aten.call "aten::add_.Tensor"(%x, %x, 1) {mutates = array<i64: 0, 1, 0>} : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

func.func @mutates_scalar_argument(%x: tensor<4xf32>) {
  // expected-error@+1 {{'aten.call' op mutates argument 2, which is not a tensor argument}}
  %0 = aten.call "aten::add_.Tensor"(%x, %x, 1) {mutates = array<i64: 2>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @mutates_none_argument(%x: tensor<4xf32>) {
  // expected-error@+1 {{'aten.call' op mutates argument 0, which is not a tensor argument}}
  %0 = aten.call "aten::fill_"(none, %x) {mutates = array<i64: 0>} : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @mutates_tensor_list(%x: tensor<4xf32>) {
  // expected-error@+1 {{'aten.call' op mutates argument 0, which is not a tensor argument}}
  %0 = aten.call "aten::_foreach_zero_"([%x, %x]) {mutates = array<i64: 0>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @mutates_past_the_arguments(%x: tensor<4xf32>) {
  // expected-error@+1 {{'aten.call' op mutates argument 3, which is not a tensor argument}}
  %0 = aten.call "aten::add_.Tensor"(%x, %x, 1) {mutates = array<i64: 3>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @mutates_negative_argument(%x: tensor<4xf32>) {
  // expected-error@+1 {{'aten.call' op mutates argument -1, which is not a tensor argument}}
  %0 = aten.call "aten::add_.Tensor"(%x, %x, 1) {mutates = array<i64: -1>} : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @mutated_value_type(%x: tensor<4xf32>, %y: tensor<4xf32>) {
  // expected-error@+1 {{'aten.call' op new value of mutated argument 0 has type 'tensor<4xf16>', expected its operand's type 'tensor<4xf32>'}}
  %0:2 = aten.call "aten::add_.Tensor"(%x, %y, 1) {mutates = array<i64: 0>} : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf16>)
  return
}

// -----

// The new value is matched against the mutated operand, not the first one.
func.func @mutated_value_type_second_operand(%x: tensor<4xf32>, %rm: tensor<2xf32>) {
  // expected-error@+1 {{'aten.call' op new value of mutated argument 1 has type 'tensor<4xf32>', expected its operand's type 'tensor<2xf32>'}}
  %0:2 = aten.call "aten::foo_"(%x, %rm) {mutates = array<i64: 1>} : (tensor<4xf32>, tensor<2xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// aten.call: generated constraints
//===----------------------------------------------------------------------===//

func.func @dynamic_operand(%x: tensor<?xf32>) {
  // expected-error@+1 {{'aten.call' op operand #0 must be variadic of statically shaped tensor of any type values, but got 'tensor<?xf32>'}}
  %0 = aten.call "aten::relu"(%x) : (tensor<?xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @unranked_result(%x: tensor<4xf32>) {
  // expected-error@+1 {{'aten.call' op result #0 must be variadic of statically shaped tensor of any type values, but got 'tensor<*xf32>'}}
  %0 = aten.call "aten::relu"(%x) : (tensor<4xf32>) -> tensor<*xf32>
  return
}

// -----

func.func @memref_operand(%x: memref<4xf32>) {
  // expected-error@+1 {{'aten.call' op operand #0 must be variadic of statically shaped tensor of any type values, but got 'memref<4xf32>'}}
  %0 = aten.call "aten::relu"(%x) : (memref<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @missing_args(%x: tensor<4xf32>) {
  // expected-error@+1 {{'aten.call' op requires attribute 'args'}}
  %0 = "aten.call"(%x) <{overload = "aten::relu"}> : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @overload_not_a_string(%x: tensor<4xf32>) {
  // expected-error@+1 {{Invalid attribute `overload` in property conversion: 1 : i64}}
  %0 = "aten.call"(%x) <{args = [#aten.tensor], overload = 1}> : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// aten.constant
//===----------------------------------------------------------------------===//

// ConstantOp::verify ("expects a statically shaped tensor value") cannot fire
// from textual IR: the result must be a static tensor and equal the value's
// type, which the generated checks below enforce first.

func.func @constant_vector() {
  // expected-error@+1 {{'aten.constant' op result #0 must be statically shaped tensor of any type values, but got 'vector<4xf32>'}}
  %0 = aten.constant dense<1.0> : vector<4xf32>
  return
}

// -----

func.func @constant_dynamic_result() {
  // expected-error@+1 {{'aten.constant' op result #0 must be statically shaped tensor of any type values, but got 'tensor<?xf32>'}}
  %0 = "aten.constant"() <{value = dense<1.0> : tensor<4xf32>}> : () -> tensor<?xf32>
  return
}

// -----

func.func @constant_type_mismatch() {
  // expected-error@+1 {{'aten.constant' op failed to verify that result type matches the value}}
  %0 = "aten.constant"() <{value = dense<1.0> : tensor<4xf32>}> : () -> tensor<4xf16>
  return
}

// -----

func.func @constant_not_elements() {
  // expected-error@+1 {{custom op 'aten.constant' invalid kind of attribute specified}}
  %0 = aten.constant 1.0 : f32
  return
}

// -----

//===----------------------------------------------------------------------===//
// aten.rng_state, aten.autograd_backward
//===----------------------------------------------------------------------===//

func.func @rng_state_type() {
  // expected-error@+1 {{'aten.rng_state' op expects a 1-D tensor of ui8 (the generator's state bytes), found 'tensor<4x4xf32>'}}
  %s = aten.rng_state : tensor<4x4xf32>
  return
}

// -----

func.func @autograd_backward_name(%x: tensor<4xf32>) {
  // expected-error@+1 {{'aten.autograd_backward' op expects an overload name `namespace::name[.overload]`, found "cumsum"}}
  %g = aten.autograd_backward "cumsum"(%x : tensor<4xf32>) grads(%x : tensor<4xf32>) {args = [#aten.tensor, 0, #aten.none], grad_results = array<i64: 0>, num_forward_results = 1, wrt = array<i64: 0>} -> tensor<4xf32>
  return
}

// -----

func.func @autograd_backward_inputs(%x: tensor<4xf32>) {
  // expected-error@+1 {{'aten.autograd_backward' op arguments name 2 tensor operands but the op has 1 inputs}}
  %g = aten.autograd_backward "aten::mul.Tensor"(%x : tensor<4xf32>) grads(%x : tensor<4xf32>) {args = [#aten.tensor, #aten.tensor], grad_results = array<i64: 0>, num_forward_results = 1, wrt = array<i64: 0>} -> tensor<4xf32>
  return
}

// -----

func.func @autograd_backward_grad_count(%x: tensor<4xf32>) {
  // expected-error@+1 {{'aten.autograd_backward' op has 1 result gradients but grad_results names 2}}
  %g = aten.autograd_backward "aten::cumsum"(%x : tensor<4xf32>) grads(%x : tensor<4xf32>) {args = [#aten.tensor, 0, #aten.none], grad_results = array<i64: 0, 1>, num_forward_results = 2, wrt = array<i64: 0>} -> tensor<4xf32>
  return
}

// -----

func.func @autograd_backward_grad_results(%x: tensor<4xf32>) {
  // expected-error@+1 {{'aten.autograd_backward' op grad_results must name forward results in increasing order, below 1, found 1}}
  %g = aten.autograd_backward "aten::cumsum"(%x : tensor<4xf32>) grads(%x : tensor<4xf32>) {args = [#aten.tensor, 0, #aten.none], grad_results = array<i64: 1>, num_forward_results = 1, wrt = array<i64: 0>} -> tensor<4xf32>
  return
}

// -----

func.func @autograd_backward_wrt_count(%x: tensor<4xf32>) {
  // expected-error@+1 {{'aten.autograd_backward' op returns 2 gradients but wrt names 1 inputs}}
  %g:2 = aten.autograd_backward "aten::cumsum"(%x : tensor<4xf32>) grads(%x : tensor<4xf32>) {args = [#aten.tensor, 0, #aten.none], grad_results = array<i64: 0>, num_forward_results = 1, wrt = array<i64: 0>} -> tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @autograd_backward_wrt_order(%x: tensor<4xf32>, %y: tensor<4xf32>) {
  // expected-error@+1 {{'aten.autograd_backward' op wrt must name inputs in increasing order, found 0}}
  %g:2 = aten.autograd_backward "aten::mul.Tensor"(%x, %y : tensor<4xf32>, tensor<4xf32>) grads(%x : tensor<4xf32>) {args = [#aten.tensor, #aten.tensor], grad_results = array<i64: 0>, num_forward_results = 1, wrt = array<i64: 1, 0>} -> tensor<4xf32>, tensor<4xf32>
  return
}

// -----

func.func @autograd_backward_grad_type(%x: tensor<4xf32>) {
  // expected-error@+1 {{'aten.autograd_backward' op gradient #0 has type 'tensor<4xf64>', expected input #0's type 'tensor<4xf32>'}}
  %g = aten.autograd_backward "aten::cumsum"(%x : tensor<4xf32>) grads(%x : tensor<4xf32>) {args = [#aten.tensor, 0, #aten.none], grad_results = array<i64: 0>, num_forward_results = 1, wrt = array<i64: 0>} -> tensor<4xf64>
  return
}

// -----

func.func @autograd_backward_rng(%x: tensor<4xf32>) {
  // expected-error@+1 {{'aten.autograd_backward' op expects a 1-D tensor of ui8 (the generator's state bytes), found 'tensor<4xf32>'}}
  %g = aten.autograd_backward "aten::cumsum"(%x : tensor<4xf32>) grads(%x : tensor<4xf32>) rng(%x : tensor<4xf32>) {args = [#aten.tensor, 0, #aten.none], grad_results = array<i64: 0>, num_forward_results = 1, wrt = array<i64: 0>} -> tensor<4xf32>
  return
}

// -----

func.func @set_rng_state_type(%x: tensor<4xf32>) {
  // expected-error@+1 {{'aten.set_rng_state' op expects a 1-D tensor of ui8 (the generator's state bytes), found 'tensor<4xf32>'}}
  aten.set_rng_state %x : tensor<4xf32>
  return
}
