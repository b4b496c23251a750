// fsdp-opt's training-step flags must make sense together.
// RUN: not fsdp-opt %s --optimizer sgd 2>&1 | FileCheck %s --check-prefix=NOLOSS
// RUN: not fsdp-opt %s --lr 0.1 2>&1 | FileCheck %s --check-prefix=LRNOLOSS
// RUN: not fsdp-opt %s --target t:2x3xf32 2>&1 | FileCheck %s --check-prefix=TARGETNOLOSS
// RUN: not fsdp-opt %s --loss mse --target t:2x3xf32 2>&1 | FileCheck %s --check-prefix=NOOPT
// RUN: not fsdp-opt %s --loss mse --target t:2x3xf32 --optimizer sgd --beta1 0.8 2>&1 | FileCheck %s --check-prefix=BETA
// RUN: not fsdp-opt %s --loss mse --target t:2x3xf32 --optimizer adamw --momentum 0.9 2>&1 | FileCheck %s --check-prefix=MOMENTUM
// RUN: not fsdp-opt %s --loss mse --target t:2x3xf32 --optimizer sgd --amsgrad 2>&1 | FileCheck %s --check-prefix=AMSGRAD
// RUN: not fsdp-opt %s --loss mse --target t:2x3xf32 --optimizer adam --dampening 0.1 2>&1 | FileCheck %s --check-prefix=DAMPENING
// RUN: not fsdp-opt %s --loss mse --target t:2x3xf32 --optimizer sgd --warmup-steps 10 2>&1 | FileCheck %s --check-prefix=WARMUP
// RUN: not fsdp-opt %s --loss mse --target t:2x3xf32 --optimizer rmsprop -o %t.out 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not test -e %t.out
// NOLOSS: error: --optimizer needs --loss: the training step is built from a loss
// LRNOLOSS: error: --lr needs --loss
// TARGETNOLOSS: error: --target needs --loss
// NOOPT: error: --loss needs --optimizer sgd|adam|adamw
// BETA: error: --beta1 applies to --optimizer adam or adamw, not sgd
// MOMENTUM: error: --momentum applies to --optimizer sgd, not adamw
// AMSGRAD: error: --amsgrad applies to --optimizer adam or adamw, not sgd
// DAMPENING: error: --dampening applies to --optimizer sgd, not adam
// WARMUP: error: --warmup-steps needs --lr-schedule constant|linear|cosine
// UNKNOWN: error: unknown optimizer 'rmsprop': expected sgd, adam or adamw
module {
  fsdp.param @fc.weight : tensor<3x4xf32> in "fc" : "torch.nn.modules.linear.Linear"
  func.func @forward(%x: tensor<2x4xf32> {fsdp.name = "x"}) -> tensor<2x3xf32> {
    %w = fsdp.get @fc.weight : tensor<3x4xf32>
    %y = aten.call "aten::linear"(%x, %w, none) : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
    return %y : tensor<2x3xf32>
  }
}
