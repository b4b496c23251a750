// RUN: fsdp-opt %s --emit plan | FileCheck %s

// Complex values in a plan: c64 and c128 (pairs of f32 and f64, the real
// part first), as constants (raw little-endian bytes) and dtype arguments.
func.func @forward(%x: tensor<2xf32> {fsdp.name = "x"}) -> tensor<2x2xf32> {
  %c = aten.constant dense<[(1.0, 2.0), (-0.5, 0.0)]> : tensor<2xcomplex<f32>>
  %z = aten.call "aten::zeros"([2], complex<f64>, none, none, none) : () -> tensor<2xcomplex<f64>>
  %m = aten.call "aten::mul.Tensor"(%c, %x) : (tensor<2xcomplex<f32>>, tensor<2xf32>) -> tensor<2xcomplex<f32>>
  %r = aten.call "aten::view_as_real"(%m) : (tensor<2xcomplex<f32>>) -> tensor<2x2xf32>
  return %r : tensor<2x2xf32>
}

// CHECK:      "instructions": [
// CHECK-NEXT:   {"dtype":"c64","free":[],"hex":"0000803f00000040000000bf00000000","kind":"constant","result":1,"shape":[2]},
// CHECK-NEXT:   {"args":[{"l":[{"i":2}]},{"dtype":"c128"},{"none":true},{"none":true},{"none":true}],{{.*}}"op":"aten::zeros"
// CHECK-NEXT:   {"args":[{"t":1},{"t":0}],{{.*}}"op":"aten::mul.Tensor"
// CHECK-NEXT:   {"args":[{"t":3}],{{.*}}"op":"aten::view_as_real"
