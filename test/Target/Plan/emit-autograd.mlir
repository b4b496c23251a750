// RUN: fsdp-opt %s --emit plan | FileCheck %s --check-prefix=AUTOGRAD

// The generator's state and a backward by libtorch's autograd: the forward
// call's arguments, the given gradients by schema result, the state, and the
// differentiated operands with their gradients' slots. (The emitter does not
// read schemas: aminmax stands for any listed operator, whatever its
// arguments.)
// AUTOGRAD-LABEL: "function": "forward",
// AUTOGRAD:       "instructions": [
// AUTOGRAD-NEXT:    {"free":[],"kind":"rng_state","result":2},
// AUTOGRAD-NEXT:    {"args":[{"t":0},{"tl":[1,0]},{"i":1}],"free":[],"kind":"call",{{.*}}"op":"aten::aminmax","results":[3,4]},
// AUTOGRAD-NEXT:    {"free":[],"kind":"set_rng_state","state":2},
// AUTOGRAD-NEXT:    {"args":[{"t":0},{"tl":[1,0]},{"i":1}],"free":[0,1,4,2],"grads":[{"grad":4,"result":1}],"kind":"autograd_backward","list_result":false,"loc":"{{.*}}emit-autograd.mlir:18:10","mutates":[],"num_schema_results":2,"op":"aten::aminmax","results":[5,6],"rng":2,"wrt":[0,1]}
func.func @forward(%x: tensor<3xf32> {fsdp.name = "x"}, %w: tensor<3xf32> {fsdp.name = "w"}) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) {
  %s = aten.rng_state : tensor<5056xui8>
  %y:2 = aten.call "aten::aminmax"(%x, [%w, %x], 1) : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  aten.set_rng_state %s : tensor<5056xui8>
  %g:2 = aten.autograd_backward "aten::aminmax"(%x, %w, %x : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) grads(%y#1 : tensor<3xf32>) rng(%s : tensor<5056xui8>) {args = [#aten.tensor, #aten.tensor_list<2>, 1], grad_results = array<i64: 1>, num_forward_results = 2, wrt = array<i64: 0, 1>} -> tensor<3xf32>, tensor<3xf32>
  return %y#0, %g#0, %g#1 : tensor<3xf32>, tensor<3xf32>, tensor<3xf32>
}
