// RUN: fsdp-opt %s --fsdp-grad-accum="micro-batches=3" | FileCheck %s
// RUN: fsdp-opt %s --fsdp-grad-accum="micro-batches=1" | FileCheck %s --check-prefix=ONE

// Three micro-batches: the arguments three times (fsdp.micro_batch 0, 1,
// 2), each micro-batch's forward and backward in turn, its seed 1/3; the
// gradient summed in micro-batch order with one fsdp.grad after the last;
// the buffer each micro-batch writes is what the next reads, and the last
// write is the update; the loss is the mean of the three, summed as each
// micro-batch ends.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:      %[[X0:[a-z0-9]+]]: tensor<2xf32> {fsdp.micro_batch = 0 : i64, fsdp.name = "x"},
// CHECK-SAME:      %[[X1:[a-z0-9]+]]: tensor<2xf32> {fsdp.micro_batch = 1 : i64, fsdp.name = "x"},
// CHECK-SAME:      %[[X2:[a-z0-9]+]]: tensor<2xf32> {fsdp.micro_batch = 2 : i64, fsdp.name = "x"}) -> tensor<f32> {
// CHECK-NEXT:    %[[W0:.+]] = fsdp.get @w : tensor<2xf32>
// CHECK-NEXT:    %[[B0:.+]] = fsdp.get @count : tensor<2xf32>
// CHECK-NEXT:    %[[Y0:.+]] = aten.call "aten::mul.Tensor"(%[[X0]], %[[W0]])
// CHECK-NEXT:    %[[L0:.+]] = aten.call "aten::sum"(%[[Y0]], none)
// CHECK-NEXT:    %[[C0:.+]] = aten.call "aten::add.Tensor"(%[[B0]], %[[X0]], 1)
// CHECK-NEXT:    %[[S0:.+]] = aten.constant dense<0.333333343> : tensor<f32> {fsdp.backward_start}
// CHECK-NEXT:    %[[E0:.+]] = aten.call "aten::expand"(%[[S0]], [2], false)
// CHECK-NEXT:    %[[G0:.+]] = aten.call "aten::mul.Tensor"(%[[E0]], %[[X0]])
// CHECK-NEXT:    %[[W1:.+]] = fsdp.get @w {fsdp.micro_batch_start} : tensor<2xf32>
// CHECK-NEXT:    %[[Y1:.+]] = aten.call "aten::mul.Tensor"(%[[X1]], %[[W1]])
// CHECK-NEXT:    %[[L1:.+]] = aten.call "aten::sum"(%[[Y1]], none)
// CHECK-NEXT:    %[[C1:.+]] = aten.call "aten::add.Tensor"(%[[C0]], %[[X1]], 1)
// CHECK-NEXT:    %[[S1:.+]] = aten.constant dense<0.333333343> : tensor<f32> {fsdp.backward_start}
// CHECK-NEXT:    %[[E1:.+]] = aten.call "aten::expand"(%[[S1]], [2], false)
// CHECK-NEXT:    %[[G1:.+]] = aten.call "aten::mul.Tensor"(%[[E1]], %[[X1]])
// CHECK-NEXT:    %[[A1:.+]] = aten.call "aten::add.Tensor"(%[[G0]], %[[G1]], 1)
// CHECK-NEXT:    %[[T1:.+]] = aten.call "aten::add.Tensor"(%[[L0]], %[[L1]], 1)
// CHECK-NEXT:    %[[W2:.+]] = fsdp.get @w {fsdp.micro_batch_start} : tensor<2xf32>
// CHECK-NEXT:    %[[Y2:.+]] = aten.call "aten::mul.Tensor"(%[[X2]], %[[W2]])
// CHECK-NEXT:    %[[L2:.+]] = aten.call "aten::sum"(%[[Y2]], none)
// CHECK-NEXT:    %[[C2:.+]] = aten.call "aten::add.Tensor"(%[[C1]], %[[X2]], 1)
// CHECK-NEXT:    %[[S2:.+]] = aten.constant dense<0.333333343> : tensor<f32> {fsdp.backward_start}
// CHECK-NEXT:    %[[E2:.+]] = aten.call "aten::expand"(%[[S2]], [2], false)
// CHECK-NEXT:    %[[G2:.+]] = aten.call "aten::mul.Tensor"(%[[E2]], %[[X2]])
// CHECK-NEXT:    %[[A2:.+]] = aten.call "aten::add.Tensor"(%[[A1]], %[[G2]], 1)
// CHECK-NEXT:    fsdp.grad @w, %[[A2]] : tensor<2xf32>
// CHECK-NEXT:    fsdp.update @count, %[[C2]] : tensor<2xf32>
// CHECK-NEXT:    %[[T2:.+]] = aten.call "aten::add.Tensor"(%[[T1]], %[[L2]], 1)
// CHECK-NEXT:    %[[MEAN:.+]] = aten.call "aten::div.Scalar"(%[[T2]], 3.000000e+00)
// CHECK-NEXT:    return %[[MEAN]] : tensor<f32>
// CHECK-NOT:     fsdp.grad

// ONE-LABEL: func.func @train_step(%arg0: tensor<2xf32> {fsdp.name = "x"}) -> tensor<f32> {
// ONE:         aten.constant dense<1.000000e+00> : tensor<f32> {fsdp.backward_start}
// ONE-NOT:     fsdp.micro_batch
module {
  fsdp.param @w : tensor<2xf32> in "" : "M"
  fsdp.buffer @count : tensor<2xf32> in "" : "M"
  func.func @train_step(%x: tensor<2xf32> {fsdp.name = "x"}) -> tensor<f32> {
    %w = fsdp.get @w : tensor<2xf32>
    %b = fsdp.get @count : tensor<2xf32>
    %y = aten.call "aten::mul.Tensor"(%x, %w) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %l = aten.call "aten::sum"(%y, none) : (tensor<2xf32>) -> tensor<f32>
    %c = aten.call "aten::add.Tensor"(%b, %x, 1) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %s = aten.constant dense<1.0> : tensor<f32> {fsdp.backward_start}
    %e = aten.call "aten::expand"(%s, [2], false) : (tensor<f32>) -> tensor<2xf32>
    %g = aten.call "aten::mul.Tensor"(%e, %x) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    fsdp.grad @w, %g : tensor<2xf32>
    fsdp.update @count, %c : tensor<2xf32>
    return %l : tensor<f32>
  }
}

