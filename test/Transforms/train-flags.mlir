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
// A value that is not a finite number, or out of torch.optim's range: a
// plan with "lr": inf is not even JSON.
// RUN: not fsdp-opt %s --loss mse --target t:2x3xf32 --optimizer sgd --lr inf -o %t.out 2>&1 | FileCheck %s --check-prefix=LRINF
// RUN: not fsdp-opt %s --loss mse --target t:2x3xf32 --optimizer sgd --weight-decay inf 2>&1 | FileCheck %s --check-prefix=WDINF
// RUN: not fsdp-opt %s --loss mse --target t:2x3xf32 --optimizer adam --eps inf 2>&1 | FileCheck %s --check-prefix=EPSINF
// RUN: not fsdp-opt %s --loss mse --target t:2x3xf32 --optimizer sgd --momentum inf 2>&1 | FileCheck %s --check-prefix=MOMINF
// RUN: not fsdp-opt %s --loss mse --target t:2x3xf32 --optimizer sgd --dampening nan 2>&1 | FileCheck %s --check-prefix=DAMPNAN
// RUN: not fsdp-opt %s --loss mse --target t:2x3xf32 --optimizer sgd --max-grad-norm nan 2>&1 | FileCheck %s --check-prefix=NORMNAN
// RUN: not fsdp-opt %s --loss mse --target t:2x3xf32 --optimizer sgd --lr -0.1 2>&1 | FileCheck %s --check-prefix=LRNEG
// RUN: not fsdp-opt %s --loss mse --target t:2x3xf32 --optimizer adam --beta2 1 2>&1 | FileCheck %s --check-prefix=BETA2
// RUN: not fsdp-opt %s --loss mse --target t:2x3xf32 --optimizer adamw --weight-decay -1 2>&1 | FileCheck %s --check-prefix=WDNEG
// RUN: not test -e %t.out
// LRINF: error: --lr must be a finite number, not inf
// WDINF: error: --weight-decay must be a finite number, not inf
// EPSINF: error: --eps must be a finite number, not inf
// MOMINF: error: --momentum must be a finite number, not inf
// DAMPNAN: error: --dampening must be a finite number, not nan
// NORMNAN: error: --max-grad-norm must be a finite number, not nan
// LRNEG: error: --lr must be at least 0, not -0.1
// BETA2: error: --beta2 must be at least 0 and below 1, not 1
// WDNEG: error: --weight-decay must be at least 0, not -1
module {
  fsdp.param @fc.weight : tensor<3x4xf32> in "fc" : "torch.nn.modules.linear.Linear"
  func.func @forward(%x: tensor<2x4xf32> {fsdp.name = "x"}) -> tensor<2x3xf32> {
    %w = fsdp.get @fc.weight : tensor<3x4xf32>
    %y = aten.call "aten::linear"(%x, %w, none) : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
    return %y : tensor<2x3xf32>
  }
}
