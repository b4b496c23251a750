// Every option error of fsdp-append-loss.
// RUN: fsdp-opt %s -verify-diagnostics --fsdp-append-loss="loss=hinge targets=y:4xi64" -split-input-file
// RUN: not fsdp-opt %s --fsdp-append-loss=loss=cross_entropy 2>&1 | FileCheck %s --check-prefix=NOTARGET
// RUN: not fsdp-opt %s --fsdp-append-loss="loss=none targets=y:4xi64" 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not fsdp-opt %s --fsdp-append-loss="loss=mse targets=y:4x10" 2>&1 | FileCheck %s --check-prefix=SPEC
// RUN: not fsdp-opt %s --fsdp-append-loss="loss=mse targets=y:4x10xf16" 2>&1 | FileCheck %s --check-prefix=MSETYPE
// RUN: not fsdp-opt %s --fsdp-append-loss="loss=cross_entropy targets=y:4xi32" 2>&1 | FileCheck %s --check-prefix=CLASSES
// RUN: not fsdp-opt %s --fsdp-append-loss=loss=none 2>&1 | FileCheck %s --check-prefix=NOTSCALAR
// NOTARGET: error: loss cross_entropy needs exactly one target NAME:DIMSxDTYPE (e.g. y:8xi64), found 0
// NONE: error: loss none takes no target: a model that returns its own loss receives its targets as inputs (target 'y')
// SPEC: error: target: bad input spec 'y:4x10': unknown dtype '10'
// MSETYPE: error: 'func.return' op returns 'tensor<4x10xf32>' first, but mse needs a target of the same type, found 'y:4x10xf16'
// CLASSES: error: 'func.return' op needs class indices of dtype i64 as the cross_entropy target, found 'y:4xi32'
// NOTSCALAR: error: 'func.return' op must return a scalar floating-point loss first for loss none, but its first output is 'tensor<4x10xf32>'

// expected-error@+1 {{unknown loss 'hinge': expected cross_entropy, mse or none}}
module {
  func.func @forward(%x: tensor<4x10xf32> {fsdp.name = "x"}) -> tensor<4x10xf32> {
    return %x : tensor<4x10xf32>
  }
}
