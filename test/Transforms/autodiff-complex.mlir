// RUN: fsdp-opt %s -split-input-file --fsdp-autodiff | FileCheck %s

// Complex values between real parameters. Gradient rules are written for
// real values (a product's rule multiplies by the other factor, where
// autograd's conjugate Wirtinger convention multiplies by its conjugate), so
// every call a complex value passes through goes to libtorch's autograd,
// but those that only move values (here the transpose), whose rules hold
// for complex gradients too. A real operand's gradient is the real part of
// a complex one, as autograd's engine takes it. The loss is real.
fsdp.param @w : tensor<4x2xf32> in "" : "M"
fsdp.param @s : tensor<4xf32> in "" : "M"
// CHECK-LABEL: func.func @train_step
func.func @train_step(%x: tensor<4x2xf32>) -> tensor<f32> {
  %w = fsdp.get @w : tensor<4x2xf32>
  %s = fsdp.get @s : tensor<4xf32>
  %c = aten.call "aten::view_as_complex"(%w) : (tensor<4x2xf32>) -> tensor<4xcomplex<f32>>
  %z = aten.call "aten::view_as_complex"(%x) : (tensor<4x2xf32>) -> tensor<4xcomplex<f32>>
  %m = aten.call "aten::mul.Tensor"(%c, %z) : (tensor<4xcomplex<f32>>, tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>>
  %r = aten.call "aten::mul.Tensor"(%m, %s) : (tensor<4xcomplex<f32>>, tensor<4xf32>) -> tensor<4xcomplex<f32>>
  %u = aten.call "aten::unsqueeze"(%r, 0) : (tensor<4xcomplex<f32>>) -> tensor<1x4xcomplex<f32>>
  %t = aten.call "aten::transpose.int"(%u, 0, 1) : (tensor<1x4xcomplex<f32>>) -> tensor<4x1xcomplex<f32>>
  %a = aten.call "aten::abs"(%t) : (tensor<4x1xcomplex<f32>>) -> tensor<4x1xf32>
  %l = aten.call "aten::sum"(%a, none) : (tensor<4x1xf32>) -> tensor<f32>
  // CHECK:      %[[GA:.+]] = aten.autograd_backward "aten::abs"({{.*}} -> tensor<4x1xcomplex<f32>>
  // CHECK-NEXT: %[[GT:.+]] = aten.call "aten::transpose.int"(%[[GA]], 0, 1) : (tensor<4x1xcomplex<f32>>) -> tensor<1x4xcomplex<f32>>
  // CHECK:      %[[GU:.+]] = aten.call "aten::{{squeeze|reshape|view}}{{[^"]*}}"(%[[GT]]{{.*}} -> tensor<4xcomplex<f32>>
  // CHECK-NEXT: %[[GR:.+]]:2 = aten.autograd_backward "aten::mul.Tensor"({{.*}}) grads(%[[GU]] : tensor<4xcomplex<f32>>){{.*}} -> tensor<4xcomplex<f32>>, tensor<4xf32>
  // CHECK-NEXT: fsdp.grad @s, %[[GR]]#1 : tensor<4xf32>
  // CHECK:      %[[GM:.+]] = aten.autograd_backward "aten::mul.Tensor"({{.*}}) grads(%[[GR]]#0 : tensor<4xcomplex<f32>>){{.*}} -> tensor<4xcomplex<f32>>
  // CHECK:      %[[GW:.+]] = aten.autograd_backward "aten::view_as_complex"({{.*}}) grads(%[[GM]] : tensor<4xcomplex<f32>>){{.*}} -> tensor<4x2xf32>
  // CHECK-NEXT: fsdp.grad @w, %[[GW]] : tensor<4x2xf32>
  return %l : tensor<f32>
}

// -----

// cat promotes a real operand to complex; its rule slices the gradient,
// and the real operand's part is the real part of its slice.
fsdp.param @w : tensor<4x2xf32> in "" : "M"
fsdp.param @s : tensor<4xf32> in "" : "M"
// CHECK-LABEL: func.func @train_step
func.func @train_step() -> tensor<f32> {
  %w = fsdp.get @w : tensor<4x2xf32>
  %s = fsdp.get @s : tensor<4xf32>
  %c = aten.call "aten::view_as_complex"(%w) : (tensor<4x2xf32>) -> tensor<4xcomplex<f32>>
  %k = aten.call "aten::cat"([%c, %s], 0) : (tensor<4xcomplex<f32>>, tensor<4xf32>) -> tensor<8xcomplex<f32>>
  %r = aten.call "aten::view_as_real"(%k) : (tensor<8xcomplex<f32>>) -> tensor<8x2xf32>
  %l = aten.call "aten::sum"(%r, none) : (tensor<8x2xf32>) -> tensor<f32>
  // CHECK:      %[[GK:.+]] = aten.autograd_backward "aten::view_as_real"({{.*}} -> tensor<8xcomplex<f32>>
  // CHECK-NEXT: %[[GC:.+]] = aten.call "aten::slice.Tensor"(%[[GK]], 0, 0, 4, 1) : (tensor<8xcomplex<f32>>) -> tensor<4xcomplex<f32>>
  // CHECK-NEXT: %[[GS:.+]] = aten.call "aten::slice.Tensor"(%[[GK]], 0, 4, 8, 1) : (tensor<8xcomplex<f32>>) -> tensor<4xcomplex<f32>>
  // CHECK-NEXT: %[[RE:.+]] = aten.call "aten::real"(%[[GS]]) : (tensor<4xcomplex<f32>>) -> tensor<4xf32>
  // CHECK-NEXT: fsdp.grad @s, %[[RE]] : tensor<4xf32>
  return %l : tensor<f32>
}

// -----

// sgn of a complex value is z / |z|, which has a gradient (autograd's); of a
// real one, a step, which has none.
fsdp.param @w : tensor<4x2xf32> in "" : "M"
fsdp.param @s : tensor<4xf32> in "" : "M"
// CHECK-LABEL: func.func @train_step
func.func @train_step() -> tensor<f32> {
  %w = fsdp.get @w : tensor<4x2xf32>
  %s = fsdp.get @s : tensor<4xf32>
  %c = aten.call "aten::view_as_complex"(%w) : (tensor<4x2xf32>) -> tensor<4xcomplex<f32>>
  %g = aten.call "aten::sgn"(%c) : (tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>>
  %r = aten.call "aten::view_as_real"(%g) : (tensor<4xcomplex<f32>>) -> tensor<4x2xf32>
  %t = aten.call "aten::sgn"(%s) : (tensor<4xf32>) -> tensor<4xf32>
  %u = aten.call "aten::unsqueeze"(%t, 1) : (tensor<4xf32>) -> tensor<4x1xf32>
  %m = aten.call "aten::mul.Tensor"(%r, %u) : (tensor<4x2xf32>, tensor<4x1xf32>) -> tensor<4x2xf32>
  %l = aten.call "aten::sum"(%m, none) : (tensor<4x2xf32>) -> tensor<f32>
  // CHECK:      aten.autograd_backward "aten::sgn"({{.*}} : tensor<4xcomplex<f32>>)
  // CHECK:      fsdp.grad @w
  // CHECK-NOT:  fsdp.grad @s
  return %l : tensor<f32>
}
