// RUN: fsdp-opt %s | FileCheck %s
// RUN: fsdp-opt %s | fsdp-opt | FileCheck %s
// RUN: fsdp-opt %s -mlir-print-op-generic | fsdp-opt | FileCheck %s
// The generic form shows how the custom syntax is encoded in `args`.
// RUN: fsdp-opt %s -mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// CHECK-LABEL: func.func @tensor_operands(
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<8x32xf32>, %[[W:[a-z0-9]+]]: tensor<16x32xf32>, %[[B:[a-z0-9]+]]: tensor<16xf32>)
// CHECK-NEXT:    %[[Y:.+]] = aten.call "aten::linear"(%[[X]], %[[W]], %[[B]]) : (tensor<8x32xf32>, tensor<16x32xf32>, tensor<16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:    %[[R:.+]] = aten.call "aten::relu"(%[[Y]]) : (tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:    return %[[R]] : tensor<8x16xf32>
// GENERIC-LABEL: sym_name = "tensor_operands"
// GENERIC:       "aten.call"(%{{.+}}, %{{.+}}, %{{.+}}) <{args = [#aten.tensor, #aten.tensor, #aten.tensor], overload = "aten::linear"}>
func.func @tensor_operands(%x: tensor<8x32xf32>, %w: tensor<16x32xf32>, %b: tensor<16xf32>) -> tensor<8x16xf32> {
  %y = aten.call "aten::linear"(%x, %w, %b) : (tensor<8x32xf32>, tensor<16x32xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %r = aten.call "aten::relu"(%y) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %r : tensor<8x16xf32>
}

// An operator without arguments; `prim` and other namespaces are accepted.
// CHECK-LABEL: func.func @no_arguments()
// CHECK-NEXT:    %[[Z:.+]] = aten.call "aten::zeros"() : () -> tensor<4xf32>
// CHECK-NEXT:    %{{.+}} = aten.call "prim::device"() : () -> tensor<i64>
// CHECK-NEXT:    return %[[Z]]
// GENERIC-LABEL: sym_name = "no_arguments"
// GENERIC:       "aten.call"() <{args = [], overload = "aten::zeros"}> : () -> tensor<4xf32>
func.func @no_arguments() -> tensor<4xf32> {
  %0 = aten.call "aten::zeros"() : () -> tensor<4xf32>
  %1 = aten.call "prim::device"() : () -> tensor<i64>
  return %0 : tensor<4xf32>
}

// `[%a, %b]` is a Tensor[] argument: a run of operands.
// CHECK-LABEL: func.func @tensor_lists(
// CHECK-SAME:    %[[A:[a-z0-9]+]]: tensor<2x4xf32>, %[[B:[a-z0-9]+]]: tensor<3x4xf32>, %[[C:[a-z0-9]+]]: tensor<1x4xf32>)
// CHECK-NEXT:    aten.call "aten::cat"([%[[A]], %[[B]], %[[C]]], 0) : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<1x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT:    aten.call "aten::stack"([%[[A]]], -1) : (tensor<2x4xf32>) -> tensor<2x4x1xf32>
// CHECK-NEXT:    aten.call "aten::index_put"(%[[A]], [%[[B]], %[[C]]], %[[A]], [%[[C]]]) : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<1x4xf32>, tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT:    return
// GENERIC-LABEL: sym_name = "tensor_lists"
// GENERIC:       <{args = [#aten.tensor_list<3>, 0], overload = "aten::cat"}>
// GENERIC:       <{args = [#aten.tensor_list<1>, -1], overload = "aten::stack"}>
// GENERIC:       <{args = [#aten.tensor, #aten.tensor_list<2>, #aten.tensor, #aten.tensor_list<1>], overload = "aten::index_put"}>
func.func @tensor_lists(%a: tensor<2x4xf32>, %b: tensor<3x4xf32>, %c: tensor<1x4xf32>) {
  %0 = aten.call "aten::cat"([%a, %b, %c], 0) : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<1x4xf32>) -> tensor<6x4xf32>
  %1 = aten.call "aten::stack"([%a], -1) : (tensor<2x4xf32>) -> tensor<2x4x1xf32>
  %2 = aten.call "aten::index_put"(%a, [%b, %c], %a, [%c]) : (tensor<2x4xf32>, tensor<3x4xf32>, tensor<1x4xf32>, tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
  return
}

// Non-tensor arguments print in place; i64 integers and f64 floats without
// their type, other attributes with it.
// CHECK-LABEL: func.func @non_tensor_arguments(
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<8x16xf32>)
// CHECK-NEXT:    aten.call "aten::softmax.int"(%[[X]], -1, none) : (tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:    aten.call "aten::to.dtype"(%[[X]], f16, false, false, none) : (tensor<8x16xf32>) -> tensor<8x16xf16>
// CHECK-NEXT:    aten.call "aten::mean.dim"(%[[X]], [1], true, none) : (tensor<8x16xf32>) -> tensor<8x1xf32>
// CHECK-NEXT:    aten.call "aten::layer_norm"(%[[X]], [16], none, none, 1.000000e-05, true) : (tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:    aten.call "aten::gelu"(%[[X]], "tanh") : (tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:    aten.call "aten::view"(%[[X]], [2, -1, 16]) : (tensor<8x16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT:    aten.call "aten::sum.dim_IntList"(%[[X]], [], false, i64) : (tensor<8x16xf32>) -> tensor<i64>
// CHECK-NEXT:    aten.call "aten::misc"(%[[X]], 2 : i32, 3.000000e+00 : f32, 1 : index, -2.500000e+00, 7, [1.000000e+00, 2.000000e+00], {{\[}}[1], []], bf16, i1, unit) : (tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT:    return
// GENERIC-LABEL: sym_name = "non_tensor_arguments"
// GENERIC:       <{args = [#aten.tensor, -1, #aten.none], overload = "aten::softmax.int"}>
// GENERIC:       <{args = [#aten.tensor, f16, false, false, #aten.none], overload = "aten::to.dtype"}>
// GENERIC:       <{args = [#aten.tensor, [1], true, #aten.none], overload = "aten::mean.dim"}>
// GENERIC:       <{args = [#aten.tensor, [16], #aten.none, #aten.none, 1.000000e-05, true], overload = "aten::layer_norm"}>
// GENERIC:       <{args = [#aten.tensor, "tanh"], overload = "aten::gelu"}>
// GENERIC:       <{args = [#aten.tensor, [2, -1, 16]], overload = "aten::view"}>
// GENERIC:       <{args = [#aten.tensor, [], false, i64], overload = "aten::sum.dim_IntList"}>
// GENERIC:       <{args = [#aten.tensor, 2 : i32, 3.000000e+00 : f32, 1 : index, -2.500000e+00, 7, [1.000000e+00, 2.000000e+00], {{\[}}[1], []], bf16, i1, unit], overload = "aten::misc"}>
func.func @non_tensor_arguments(%x: tensor<8x16xf32>) {
  %0 = aten.call "aten::softmax.int"(%x, -1, none) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %1 = aten.call "aten::to.dtype"(%x, f16, false, false, none) : (tensor<8x16xf32>) -> tensor<8x16xf16>
  %2 = aten.call "aten::mean.dim"(%x, [1], true, none) : (tensor<8x16xf32>) -> tensor<8x1xf32>
  %3 = aten.call "aten::layer_norm"(%x, [16], none, none, 1.0e-05, true) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %4 = aten.call "aten::gelu"(%x, "tanh") : (tensor<8x16xf32>) -> tensor<8x16xf32>
  %5 = aten.call "aten::view"(%x, [2, -1, 16]) : (tensor<8x16xf32>) -> tensor<2x4x16xf32>
  %6 = aten.call "aten::sum.dim_IntList"(%x, [], false, i64) : (tensor<8x16xf32>) -> tensor<i64>
  %7 = aten.call "aten::misc"(%x, 2 : i32, 3.0 : f32, 1 : index, -2.5 : f64, 7 : i64, [1.0, 2.0], [[1], []], bf16, i1, unit) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return
}

// In-place operators: `mutates` names the written arguments, whose new values
// follow the schema results. `list_result` marks a flattened Tensor[] return.
// CHECK-LABEL: func.func @mutation_and_lists(
// CHECK-SAME:    %[[X:[a-z0-9]+]]: tensor<6x4xf32>, %[[Y:[a-z0-9]+]]: tensor<6x4xf32>, %[[RM:[a-z0-9]+]]: tensor<4xf32>, %[[RV:[a-z0-9]+]]: tensor<4xf32>)
// CHECK-NEXT:    %{{.+}}:2 = aten.call "aten::add_.Tensor"(%[[X]], %[[Y]], 1) {mutates = array<i64: 0>} : (tensor<6x4xf32>, tensor<6x4xf32>) -> (tensor<6x4xf32>, tensor<6x4xf32>)
// CHECK-NEXT:    %{{.+}}:5 = aten.call "aten::native_batch_norm"(%[[X]], none, none, %[[RM]], %[[RV]], true, 1.000000e-01, 1.000000e-05) {mutates = array<i64: 3, 4>} : (tensor<6x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<6x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT:    %{{.+}}:3 = aten.call "aten::split.Tensor"(%[[X]], 2, 0) {list_result} : (tensor<6x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
// CHECK-NEXT:    %{{.+}} = aten.call "aten::unbind.int"(%[[RM]], 0) {list_result} : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %{{.+}}:3 = aten.call "aten::split_"(%[[X]], [%[[Y]]], %[[RM]]) {list_result, mutates = array<i64: 2>} : (tensor<6x4xf32>, tensor<6x4xf32>, tensor<4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<4xf32>)
// CHECK-NEXT:    %{{.+}} = aten.call "aten::relu"(%[[X]]) {fsdp.tag = "x", mutates = array<i64>} : (tensor<6x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT:    return
// GENERIC-LABEL: sym_name = "mutation_and_lists"
// GENERIC:       <{args = [#aten.tensor, #aten.tensor, 1], mutates = array<i64: 0>, overload = "aten::add_.Tensor"}>
// GENERIC:       <{args = [#aten.tensor, #aten.none, #aten.none, #aten.tensor, #aten.tensor, true, 1.000000e-01, 1.000000e-05], mutates = array<i64: 3, 4>, overload = "aten::native_batch_norm"}>
// GENERIC:       <{args = [#aten.tensor, 2, 0], list_result, overload = "aten::split.Tensor"}>
// GENERIC:       <{args = [#aten.tensor, 0], list_result, overload = "aten::unbind.int"}>
// GENERIC:       <{args = [#aten.tensor, #aten.tensor_list<1>, #aten.tensor], list_result, mutates = array<i64: 2>, overload = "aten::split_"}>
// GENERIC:       <{args = [#aten.tensor], mutates = array<i64>, overload = "aten::relu"}> {fsdp.tag = "x"}
func.func @mutation_and_lists(%x: tensor<6x4xf32>, %y: tensor<6x4xf32>, %rm: tensor<4xf32>, %rv: tensor<4xf32>) {
  %0:2 = aten.call "aten::add_.Tensor"(%x, %y, 1) {mutates = array<i64: 0>} : (tensor<6x4xf32>, tensor<6x4xf32>) -> (tensor<6x4xf32>, tensor<6x4xf32>)
  %1:5 = aten.call "aten::native_batch_norm"(%x, none, none, %rm, %rv, true, 1.0e-01, 1.0e-05) {mutates = array<i64: 3, 4>} : (tensor<6x4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<6x4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %2:3 = aten.call "aten::split.Tensor"(%x, 2, 0) {list_result} : (tensor<6x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>)
  %3 = aten.call "aten::unbind.int"(%rm, 0) {list_result} : (tensor<4xf32>) -> tensor<4xf32>
  %4:3 = aten.call "aten::split_"(%x, [%y], %rm) {list_result, mutates = array<i64: 2>} : (tensor<6x4xf32>, tensor<6x4xf32>, tensor<4xf32>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<4xf32>)
  %5 = aten.call "aten::relu"(%x) {mutates = array<i64>, fsdp.tag = "x"} : (tensor<6x4xf32>) -> tensor<6x4xf32>
  return
}

// CHECK-LABEL: func.func @constants()
// CHECK-NEXT:    %[[C0:.+]] = aten.constant dense<1.000000e+00> : tensor<4x4xf32>
// CHECK-NEXT:    aten.constant dense<{{\[}}[1, 2], [3, 4]]> : tensor<2x2xi64>
// CHECK-NEXT:    aten.constant dense<true> : tensor<1x1x16x16xi1>
// CHECK-NEXT:    aten.constant dense<2.500000e+00> : tensor<f32>
// CHECK-NEXT:    aten.constant dense<0> : tensor<3xi32> {fsdp.tag = "c"}
// CHECK-NEXT:    return %[[C0]] : tensor<4x4xf32>
// GENERIC-LABEL: sym_name = "constants"
// GENERIC:       "aten.constant"() <{value = dense<1.000000e+00> : tensor<4x4xf32>}> : () -> tensor<4x4xf32>
func.func @constants() -> tensor<4x4xf32> {
  %0 = aten.constant dense<1.0> : tensor<4x4xf32>
  %1 = aten.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>
  %2 = aten.constant dense<true> : tensor<1x1x16x16xi1>
  %3 = aten.constant dense<2.5> : tensor<f32>
  %4 = aten.constant dense<0> : tensor<3xi32> {fsdp.tag = "c"}
  return %0 : tensor<4x4xf32>
}

// Non-finite floats keep their type through a round trip (they print in hex),
// and an empty Tensor[] stays a tensor list.
// CHECK-LABEL: func.func @special_arguments
// CHECK:      aten.call "aten::masked_fill.Scalar"(%{{.*}}, %{{.*}}, 0xFFF0000000000000 : f64)
// CHECK:      aten.call "aten::cat"(#aten.tensor_list<0>, 0)
// GENERIC-LABEL: sym_name = "special_arguments"
// GENERIC:    args = [#aten.tensor, #aten.tensor, 0xFFF0000000000000 : f64]
// GENERIC:    args = [#aten.tensor_list<0>, 0]
func.func @special_arguments(%x: tensor<2x2xf32>, %m: tensor<2x2xi1>) -> tensor<2x2xf32> {
  %0 = aten.call "aten::masked_fill.Scalar"(%x, %m, 0xFFF0000000000000 : f64) : (tensor<2x2xf32>, tensor<2x2xi1>) -> tensor<2x2xf32>
  %1 = aten.call "aten::cat"(#aten.tensor_list<0>, 0) : () -> tensor<0xf32>
  return %0 : tensor<2x2xf32>
}

// A Tensor?[] mixes operands and None (the indices of aten::index).
// CHECK-LABEL: func.func @optional_tensor_list
// CHECK:      aten.call "aten::index.Tensor"(%{{.*}}, [none, %{{.*}}]) : (tensor<4x8xf32>, tensor<3xi64>) -> tensor<4x3xf32>
// GENERIC-LABEL: sym_name = "optional_tensor_list"
// GENERIC:    args = [#aten.tensor, [#aten.none, #aten.tensor]]
func.func @optional_tensor_list(%x: tensor<4x8xf32>, %i: tensor<3xi64>) -> tensor<4x3xf32> {
  %0 = aten.call "aten::index.Tensor"(%x, [none, %i]) : (tensor<4x8xf32>, tensor<3xi64>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// The generator's state, and a backward by libtorch's autograd: the forward
// call's arguments (a Tensor[] among them), the gradients of some of its
// results, and one gradient per differentiated operand.
// CHECK-LABEL: func.func @autograd_backward(
// CHECK:         %[[S:.+]] = aten.rng_state : tensor<5056xui8>
// CHECK-NEXT:    %[[G:.+]]:2 = aten.autograd_backward "aten::rnn_tanh.input"(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : tensor<5x2x3xf32>, tensor<1x2x8xf32>, tensor<8x3xf32>, tensor<8x8xf32>) grads(%{{.+}} : tensor<5x2x8xf32>) rng(%[[S]] : tensor<5056xui8>) {args = [#aten.tensor, #aten.tensor, #aten.tensor_list<2>, false, 1, 0.000000e+00, true, false, false], grad_results = array<i64: 0>, num_forward_results = 2 : i64, wrt = array<i64: 2, 3>} -> tensor<8x3xf32>, tensor<8x8xf32>
// CHECK-NEXT:    %{{.+}} = aten.autograd_backward "aten::cumsum"(%{{.+}} : tensor<5x2x8xf32>) grads(%{{.+}} : tensor<5x2x8xf32>) {args = [#aten.tensor, 1, #aten.none], grad_results = array<i64: 0>, num_forward_results = 1 : i64, wrt = array<i64: 0>} -> tensor<5x2x8xf32>
// GENERIC-LABEL: sym_name = "autograd_backward"
// GENERIC:       "aten.autograd_backward"({{.+}}) <{{{.*}}operandSegmentSizes = array<i32: 4, 1, 1>{{.*}}}>
func.func @autograd_backward(%x: tensor<5x2x3xf32>, %h: tensor<1x2x8xf32>, %wi: tensor<8x3xf32>, %wh: tensor<8x8xf32>, %g: tensor<5x2x8xf32>) {
  %s = aten.rng_state : tensor<5056xui8>
  %gw:2 = aten.autograd_backward "aten::rnn_tanh.input"(%x, %h, %wi, %wh : tensor<5x2x3xf32>, tensor<1x2x8xf32>, tensor<8x3xf32>, tensor<8x8xf32>) grads(%g : tensor<5x2x8xf32>) rng(%s : tensor<5056xui8>) {args = [#aten.tensor, #aten.tensor, #aten.tensor_list<2>, false, 1, 0.0, true, false, false], grad_results = array<i64: 0>, num_forward_results = 2, wrt = array<i64: 2, 3>} -> tensor<8x3xf32>, tensor<8x8xf32>
  %gc = aten.autograd_backward "aten::cumsum"(%g : tensor<5x2x8xf32>) grads(%g : tensor<5x2x8xf32>) {args = [#aten.tensor, 1, #aten.none], grad_results = array<i64: 0>, num_forward_results = 1, wrt = array<i64: 0>} -> tensor<5x2x8xf32>
  return
}

// Complex tensors, and a complex scalar argument (#aten.complex: the real
// and imaginary parts), as a scripted `z * (0.5 - 2j)` has it.
// CHECK-LABEL: func.func @complex_values(
// CHECK-NEXT:    %[[Z:.+]] = aten.call "aten::view_as_complex"(%{{.+}}) : (tensor<4x2xf32>) -> tensor<4xcomplex<f32>>
// CHECK-NEXT:    aten.call "aten::mul.Scalar"(%[[Z]], #aten.complex<5.000000e-01 : f64, -2.000000e+00 : f64>) : (tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>>
// GENERIC-LABEL: sym_name = "complex_values"
// GENERIC:       <{args = [#aten.tensor, #aten.complex<5.000000e-01 : f64, -2.000000e+00 : f64>], overload = "aten::mul.Scalar"}>
func.func @complex_values(%x: tensor<4x2xf32>) -> tensor<4xcomplex<f32>> {
  %z = aten.call "aten::view_as_complex"(%x) : (tensor<4x2xf32>) -> tensor<4xcomplex<f32>>
  %m = aten.call "aten::mul.Scalar"(%z, #aten.complex<0.5 : f64, -2.0 : f64>) : (tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>>
  return %m : tensor<4xcomplex<f32>>
}
