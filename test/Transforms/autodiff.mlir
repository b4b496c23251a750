// RUN: fsdp-opt %s -split-input-file --fsdp-autodiff | FileCheck %s

// The backward follows the forward in reverse: a broadcast bias's gradient is
// summed back to its shape, the two names of an in-place op's result (its
// return value and the new value of its argument) add up, ReLU's gradient is
// ATen's threshold_backward. Each gradient ends in an fsdp.grad right after
// its last contribution. The input needs no gradient (no mm for it), and a
// parameter the loss does not depend on gets no fsdp.grad.
// CHECK-LABEL: func.func @train_step(
// CHECK:         %[[X:.+]]: tensor<2x4xf32>
// CHECK:         %[[R:.+]]:2 = aten.call "aten::relu_"
// CHECK:         %[[L:.+]] = aten.call "aten::sum"
// CHECK:         %[[ONE:.+]] = aten.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    %[[G:.+]] = aten.call "aten::expand"(%[[ONE]], [2, 3], false)
// CHECK-NEXT:    %[[GA:.+]] = aten.call "aten::mul.Tensor"(%[[G]], %[[R]]#0)
// CHECK-NEXT:    %[[GB:.+]] = aten.call "aten::mul.Tensor"(%[[G]], %[[R]]#1)
// CHECK-NEXT:    %[[GR:.+]] = aten.call "aten::add.Tensor"(%[[GB]], %[[GA]], 1)
// CHECK-NEXT:    %[[GZ:.+]] = aten.call "aten::threshold_backward"(%[[GR]], %[[R]]#0, 0)
// CHECK-NEXT:    %[[S:.+]] = aten.call "aten::sum.dim_IntList"(%[[GZ]], [0], true, none) : (tensor<2x3xf32>) -> tensor<1x3xf32>
// CHECK-NEXT:    %[[GBIAS:.+]] = aten.call "aten::reshape"(%[[S]], [3]) : (tensor<1x3xf32>) -> tensor<3xf32>
// CHECK-NEXT:    fsdp.grad @b, %[[GBIAS]] : tensor<3xf32>
// CHECK-NEXT:    %[[T:.+]] = aten.call "aten::transpose.int"(%[[GZ]], 0, 1)
// CHECK-NEXT:    %[[GW:.+]] = aten.call "aten::mm"(%[[T]], %[[X]]) : (tensor<3x2xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    fsdp.grad @w, %[[GW]] : tensor<3x4xf32>
// CHECK-NEXT:    return %[[L]] : tensor<f32>
// CHECK-NOT:     fsdp.grad @unused
module {
  fsdp.param @w : tensor<3x4xf32> in "fc" : "M"
  fsdp.param @b : tensor<3xf32> in "fc" : "M"
  fsdp.param @unused : tensor<2xf32> in "" : "M"
  func.func @train_step(%x: tensor<2x4xf32> {fsdp.name = "x"}) -> tensor<f32> {
    %w = fsdp.get @w : tensor<3x4xf32>
    %b = fsdp.get @b : tensor<3xf32>
    %u = fsdp.get @unused : tensor<2xf32>
    %y = aten.call "aten::linear"(%x, %w, none) : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
    %z = aten.call "aten::add.Tensor"(%y, %b, 1) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %r:2 = aten.call "aten::relu_"(%z) {mutates = array<i64: 0>} : (tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>)
    %m = aten.call "aten::mul.Tensor"(%r#1, %r#0) : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %s = aten.call "aten::sum"(%m, none) : (tensor<2x3xf32>) -> tensor<f32>
    %c = aten.call "aten::gt.Scalar"(%u, 0) : (tensor<2xf32>) -> tensor<2xi1>
    return %s : tensor<f32>
  }
}

// -----

// A tied weight is one parameter read once and used twice (embedding and LM
// head): its gradient is the sum of both uses, with one fsdp.grad.
// CHECK-LABEL: func.func @train_step(
// CHECK:         aten.call "aten::transpose.int"
// CHECK-NEXT:    %[[HEAD:.+]] = aten.call "aten::mm"
// CHECK-NEXT:    %[[EMB:.+]] = aten.call "aten::embedding_dense_backward"(%{{.+}}, %arg0, 8, -1, false) : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<8x4xf32>
// CHECK-NEXT:    %[[SUM:.+]] = aten.call "aten::add.Tensor"(%[[HEAD]], %[[EMB]], 1)
// CHECK-NEXT:    fsdp.grad @wte.weight, %[[SUM]] : tensor<8x4xf32>
// CHECK-NOT:     fsdp.grad
module {
  fsdp.param @wte.weight : tensor<8x4xf32> in "wte" : "E" aliases ["head.weight"]
  func.func @train_step(%idx: tensor<2xi64> {fsdp.name = "idx"}) -> tensor<f32> {
    %w = fsdp.get @wte.weight : tensor<8x4xf32>
    %e = aten.call "aten::embedding"(%w, %idx, -1, false, false) : (tensor<8x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
    %l = aten.call "aten::linear"(%e, %w, none) : (tensor<2x4xf32>, tensor<8x4xf32>) -> tensor<2x8xf32>
    %s = aten.call "aten::mean"(%l, none) : (tensor<2x8xf32>) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// batch_norm becomes native_batch_norm, which returns the batch statistics
// its backward kernel reads; the running statistics it writes still reach
// their buffers. layer_norm and max_pool2d are rewritten likewise; dropout
// (p > 0, training) becomes what ATen's CPU dropout computes (noise of the
// input's dtype from bernoulli_, divided by 1 - p, multiplied in), whose
// gradient multiplies by the noise; dropout with p = 0 is the identity.
// CHECK-LABEL: func.func @train_step(
// CHECK:         %[[BN:.+]]:5 = aten.call "aten::native_batch_norm"(%arg0, %{{.+}}, %{{.+}}, %[[MEAN:.+]], %[[VAR:.+]], true, 1.000000e-01, 1.000000e-05) {mutates = array<i64: 3, 4>} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
// CHECK:         %[[POOL:.+]]:2 = aten.call "aten::max_pool2d_with_indices"(%[[BN]]#0, [2, 2], [2, 2], [0, 0], [1, 1], false) : (tensor<2x3x4x4xf32>) -> (tensor<2x3x2x2xf32>, tensor<2x3x2x2xi64>)
// CHECK:         %[[E:.+]] = aten.call "aten::empty_like"(%[[POOL]]#0, none, none, none, none, none)
// CHECK-NEXT:    %[[B:.+]]:2 = aten.call "aten::bernoulli_.float"(%[[E]], 5.000000e-01, none) {mutates = array<i64: 0>}
// CHECK-NEXT:    %[[NOISE:.+]]:2 = aten.call "aten::div_.Scalar"(%[[B]]#1, 5.000000e-01) {mutates = array<i64: 0>}
// CHECK-NEXT:    %[[DROP:.+]] = aten.call "aten::mul.Tensor"(%[[POOL]]#0, %[[NOISE]]#1)
// CHECK-NEXT:    aten.call "aten::dropout"(%[[DROP]], 0.000000e+00, true)
// CHECK:         fsdp.update @bn.running_mean, %[[BN]]#3
// CHECK-NEXT:    fsdp.update @bn.running_var, %[[BN]]#4
// CHECK:         aten.call "aten::mul.Tensor"(%{{.+}}, %[[NOISE]]#1)
// CHECK:         aten.call "aten::max_pool2d_with_indices_backward"(%{{.+}}, %[[BN]]#0, [2, 2], [2, 2], [0, 0], [1, 1], false, %[[POOL]]#1)
// CHECK:         %[[BACK:.+]]:3 = aten.call "aten::native_batch_norm_backward"(%{{.+}}, %arg0, %{{.+}}, %[[MEAN]], %[[VAR]], %[[BN]]#1, %[[BN]]#2, true, 1.000000e-05, [false, true, true])
// CHECK-DAG:     fsdp.grad @bn.weight, %[[BACK]]#1
// CHECK-DAG:     fsdp.grad @bn.bias, %[[BACK]]#2
module {
  fsdp.param @bn.weight : tensor<3xf32> in "bn" : "BN"
  fsdp.param @bn.bias : tensor<3xf32> in "bn" : "BN"
  fsdp.buffer @bn.running_mean : tensor<3xf32> in "bn" : "BN"
  fsdp.buffer @bn.running_var : tensor<3xf32> in "bn" : "BN"
  func.func @train_step(%x: tensor<2x3x4x4xf32> {fsdp.name = "x"}) -> tensor<f32> {
    %w = fsdp.get @bn.weight : tensor<3xf32>
    %b = fsdp.get @bn.bias : tensor<3xf32>
    %m = fsdp.get @bn.running_mean : tensor<3xf32>
    %v = fsdp.get @bn.running_var : tensor<3xf32>
    %y:3 = aten.call "aten::batch_norm"(%x, %w, %b, %m, %v, true, 1.000000e-01, 1.000000e-05, true) {mutates = array<i64: 3, 4>} : (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4x4xf32>, tensor<3xf32>, tensor<3xf32>)
    %p = aten.call "aten::max_pool2d"(%y#0, [2, 2], [2, 2], [0, 0], [1, 1], false) : (tensor<2x3x4x4xf32>) -> tensor<2x3x2x2xf32>
    %d = aten.call "aten::dropout"(%p, 5.000000e-01, true) : (tensor<2x3x2x2xf32>) -> tensor<2x3x2x2xf32>
    %d0 = aten.call "aten::dropout"(%d, 0.000000e+00, true) : (tensor<2x3x2x2xf32>) -> tensor<2x3x2x2xf32>
    %s = aten.call "aten::sum"(%d0, none) : (tensor<2x3x2x2xf32>) -> tensor<f32>
    fsdp.update @bn.running_mean, %y#1 : tensor<3xf32>
    fsdp.update @bn.running_var, %y#2 : tensor<3xf32>
    return %s : tensor<f32>
  }
}

// -----

// A gradient of another element type than its operand (a float64 constant
// promoted the product) is cast back.
// CHECK-LABEL: func.func @train_step(
// CHECK:         %[[G:.+]] = aten.call "aten::mul.Tensor"(%{{.+}}, %{{.+}}) : (tensor<4xf64>, tensor<4xf64>) -> tensor<4xf64>
// CHECK-NEXT:    %[[C:.+]] = aten.call "aten::to.dtype"(%[[G]], f32, false, false, none) : (tensor<4xf64>) -> tensor<4xf32>
// CHECK-NEXT:    fsdp.grad @w, %[[C]] : tensor<4xf32>
module {
  fsdp.param @w : tensor<4xf32> in "" : "M"
  func.func @train_step() -> tensor<f64> {
    %w = fsdp.get @w : tensor<4xf32>
    %c = aten.constant dense<2.0> : tensor<4xf64>
    %y = aten.call "aten::mul.Tensor"(%w, %c) : (tensor<4xf32>, tensor<4xf64>) -> tensor<4xf64>
    %s = aten.call "aten::sum"(%y, none) : (tensor<4xf64>) -> tensor<f64>
    return %s : tensor<f64>
  }
}

// -----

// A model that returns its loss straight from cross_entropy: the rule's
// rewrite replaces the op that computed the loss, and the loss the return
// holds afterwards is the one differentiated.
// CHECK-LABEL: func.func @train_step(
// CHECK:         %[[LP:.+]] = aten.call "aten::log_softmax.int"
// CHECK:         %[[NLL:.+]]:2 = aten.call "aten::nll_loss_forward"(%[[LP]]
// CHECK:         aten.call "aten::nll_loss_backward"
// CHECK:         fsdp.grad @w
// CHECK:         return %[[NLL]]#0 : tensor<f32>
module {
  fsdp.param @w : tensor<3x4xf32> in "fc" : "M"
  func.func @train_step(%x: tensor<2x4xf32> {fsdp.name = "x"}, %t: tensor<2xi64> {fsdp.name = "t"}) -> tensor<f32> {
    %w = fsdp.get @w : tensor<3x4xf32>
    %y = aten.call "aten::linear"(%x, %w, none) : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
    %l = aten.call "aten::cross_entropy_loss"(%y, %t, none, 1, -100, 0.000000e+00) : (tensor<2x3xf32>, tensor<2xi64>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

// The operands of a matmul or linear that require grad in eager training
// (computed from a parameter) are marked for the runtime (ATen's matmul
// folds by that flag); an input that needs no gradient is not, and the
// backward's own products are not marked.
// CHECK-LABEL: func.func @train_step(
// CHECK:         aten.call "aten::linear"(%{{.+}}, %{{.+}}, none) {aten.requires_grad = array<i64: 1>}
// CHECK:         aten.call "aten::matmul"(%{{.+}}, %{{.+}}) {aten.requires_grad = array<i64: 0>}
// CHECK-NOT:     aten.requires_grad
// CHECK:         return
module {
  fsdp.param @w : tensor<3x4xf32> in "fc" : "M"
  func.func @train_step(%x: tensor<2x5x4xf32> {fsdp.name = "x"}, %v: tensor<3x2xf32> {fsdp.name = "v"}) -> tensor<f32> {
    %w = fsdp.get @w : tensor<3x4xf32>
    %y = aten.call "aten::linear"(%x, %w, none) : (tensor<2x5x4xf32>, tensor<3x4xf32>) -> tensor<2x5x3xf32>
    %z = aten.call "aten::matmul"(%y, %v) : (tensor<2x5x3xf32>, tensor<3x2xf32>) -> tensor<2x5x2xf32>
    %s = aten.call "aten::sum"(%z, none) : (tensor<2x5x2xf32>) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// mm's gradients as autograd's mm_mat1_backward / mm_mat2_backward take
// them: for an operand eager holds column-major (a transposed matrix, here
// through a conversion to its own type, which returns its input), the
// product of the transposed operands, transposed; otherwise the plain
// product. The BLAS then sums in eager's order.
// CHECK-LABEL: func.func @train_step(
// CHECK:         %[[Y:.+]] = aten.call "aten::mm"(%arg0, %{{.+}})
// CHECK:         %[[YT:.+]] = aten.call "aten::transpose.int"(%[[Y]], 0, 1)
// CHECK:         %[[G:.+]] = aten.call "aten::expand"
// CHECK-NEXT:    %[[GT:.+]] = aten.call "aten::transpose.int"(%[[G]], 0, 1)
// CHECK-NEXT:    %[[P:.+]] = aten.call "aten::mm"(%arg0, %[[GT]]) : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT:    %[[GYT:.+]] = aten.call "aten::transpose.int"(%[[P]], 0, 1) : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK-NEXT:    %[[GY:.+]] = aten.call "aten::transpose.int"(%[[GYT]], 0, 1)
// CHECK-NEXT:    %[[GYT2:.+]] = aten.call "aten::transpose.int"(%[[GY]], 0, 1)
// CHECK-NEXT:    %[[Q:.+]] = aten.call "aten::mm"(%[[GYT2]], %arg0) : (tensor<3x2xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    %[[GC:.+]] = aten.call "aten::transpose.int"(%[[Q]], 0, 1) : (tensor<3x4xf32>) -> tensor<4x3xf32>
// CHECK-NEXT:    %[[GW:.+]] = aten.call "aten::transpose.int"(%[[GC]], 0, 1) : (tensor<4x3xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    fsdp.grad @w, %[[GW]]
module {
  fsdp.param @w : tensor<3x4xf32> in "fc" : "M"
  func.func @train_step(%x: tensor<2x4xf32> {fsdp.name = "x"}) -> tensor<f32> {
    %w = fsdp.get @w : tensor<3x4xf32>
    %t = aten.call "aten::t"(%w) : (tensor<3x4xf32>) -> tensor<4x3xf32>
    %c = aten.call "aten::to.dtype"(%t, f32, false, false, none) : (tensor<4x3xf32>) -> tensor<4x3xf32>
    %y = aten.call "aten::mm"(%x, %c) : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %yt = aten.call "aten::transpose.int"(%y, 0, 1) : (tensor<2x3xf32>) -> tensor<3x2xf32>
    %z = aten.call "aten::mm"(%yt, %x) : (tensor<3x2xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
    %s = aten.call "aten::sum"(%z, none) : (tensor<3x4xf32>) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// scaled_dot_product_attention reads its operands' requires_grad (ATen's
// CPU flash kernel gives no mask gradient, so a mask that requires grad
// takes the math kernel): a mask computed from a parameter is marked, as
// are queries, keys and values computed from one; an input mask is not.
// CHECK-LABEL: func.func @train_step(
// CHECK:         %[[A:.+]] = aten.call "aten::scaled_dot_product_attention"(%arg0, %arg0, %arg0, %{{.+}}, 0.000000e+00, false, none, false) {aten.requires_grad = array<i64: 3>}
// CHECK:         aten.call "aten::scaled_dot_product_attention"(%[[A]], %[[A]], %[[A]], %arg1, 0.000000e+00, false, none, false) {aten.requires_grad = array<i64: 0, 1, 2>}
module {
  fsdp.param @w : tensor<2x4x4xf32> in "attn" : "M"
  func.func @train_step(%q: tensor<1x2x4x8xf32> {fsdp.name = "q"}, %m: tensor<1x2x4x4xf32> {fsdp.name = "m"}) -> tensor<f32> {
    %w = fsdp.get @w : tensor<2x4x4xf32>
    %b = aten.call "aten::add.Tensor"(%m, %w, 1) : (tensor<1x2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<1x2x4x4xf32>
    %a = aten.call "aten::scaled_dot_product_attention"(%q, %q, %q, %b, 0.000000e+00, false, none, false) : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x8xf32>
    %c = aten.call "aten::scaled_dot_product_attention"(%a, %a, %a, %m, 0.000000e+00, false, none, false) : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x8xf32>
    %s = aten.call "aten::sum"(%c, none) : (tensor<1x2x4x8xf32>) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// linear's bias gradient as ATen computes it: a contiguous input's leading
// dimensions fold into the rows of one addmm, whose bias gradient sums the
// gradient reshaped to those rows (a copy where the gradient, a permuted
// view, cannot be viewed so, and the sum's order is then the copy's); a
// transposed input goes through matmul and an add, whose bias gradient sums
// the gradient over its leading dimensions as it is laid out.
// CHECK-LABEL: func.func @train_step(
// CHECK:         %[[GZ:.+]] = aten.call "aten::expand"({{.+}}) : (tensor<f32>) -> tensor<5x2x3xf32>
// CHECK:         aten.call "aten::sum.dim_IntList"(%[[GZ]], [0, 1], true, none) : (tensor<5x2x3xf32>) -> tensor<1x1x3xf32>
// CHECK:         %[[GY:.+]] = aten.call "aten::reshape"(%{{.+}}, [10, 3]) : (tensor<2x5x3xf32>) -> tensor<10x3xf32>
// CHECK:         aten.call "aten::sum.dim_IntList"(%[[GY]], [0], true, none) : (tensor<10x3xf32>) -> tensor<1x3xf32>
module {
  fsdp.param @w : tensor<3x4xf32> in "fc" : "M"
  fsdp.param @b : tensor<3xf32> in "fc" : "M"
  func.func @train_step(%x: tensor<2x5x4xf32> {fsdp.name = "x"}) -> tensor<f32> {
    %w = fsdp.get @w : tensor<3x4xf32>
    %b = fsdp.get @b : tensor<3xf32>
    %y = aten.call "aten::linear"(%x, %w, %b) : (tensor<2x5x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<2x5x3xf32>
    %xt = aten.call "aten::transpose.int"(%x, 0, 1) : (tensor<2x5x4xf32>) -> tensor<5x2x4xf32>
    %z = aten.call "aten::linear"(%xt, %w, %b) : (tensor<5x2x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<5x2x3xf32>
    %s = aten.call "aten::sum"(%y, none) : (tensor<2x5x3xf32>) -> tensor<f32>
    %t = aten.call "aten::sum"(%z, none) : (tensor<5x2x3xf32>) -> tensor<f32>
    %u = aten.call "aten::add.Tensor"(%s, %t, 1) : (tensor<f32>, tensor<f32>) -> tensor<f32>
    return %u : tensor<f32>
  }
}
