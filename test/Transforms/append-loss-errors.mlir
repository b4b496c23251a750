// RUN: fsdp-opt %s -split-input-file -verify-diagnostics --fsdp-append-loss="loss=cross_entropy targets=y:4xi64"

// expected-error@+1 {{no @forward to build a training step from}}
module {
  func.func @step(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
    return %x : tensor<4x10xf32>
  }
}

// -----

// expected-error@+1 {{the module already has a @train_step}}
module {
  func.func @forward(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
    return %x : tensor<4x10xf32>
  }
  func.func @train_step(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
    return %x : tensor<4x10xf32>
  }
}

// -----

// expected-error@+1 {{target 'y' has the name of an input of the model}}
module {
  func.func @forward(%x: tensor<4x10xf32> {fsdp.name = "y"}) -> tensor<4x10xf32> {
    return %x : tensor<4x10xf32>
  }
}

// -----

module {
  func.func @forward(%x: tensor<4x10xf32> {fsdp.name = "x"}) {
    // expected-error@+1 {{'func.return' op returns nothing to take a loss of}}
    return
  }
}

// -----

module {
  func.func @forward(%x: tensor<4x10xi64> {fsdp.name = "x"}) -> tensor<4x10xi64> {
    // expected-error@+1 {{'func.return' op returns 'tensor<4x10xi64>' first, which is not floating point: there is no loss to take of it}}
    return %x : tensor<4x10xi64>
  }
}

// -----

module {
  func.func @forward(%x: tensor<5x10xf32> {fsdp.name = "x"}) -> tensor<5x10xf32> {
    // expected-error@+1 {{'func.return' op returns 'tensor<5x10xf32>' first, which target 'y:4xi64' does not fit: cross_entropy needs class indices shaped like the output without its class dimension, tensor<5xi64>}}
    return %x : tensor<5x10xf32>
  }
}

// -----

module {
  func.func @forward(%x: tensor<f32> {fsdp.name = "x"}) -> tensor<f32> {
    // expected-error@+1 {{'func.return' op returns a scalar first: cross_entropy needs class scores}}
    return %x : tensor<f32>
  }
}
