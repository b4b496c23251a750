// RUN: fsdp-opt %s --fsdp-auto-wrap -split-input-file -verify-diagnostics

// The module tree comes from the importer.
// expected-error@+1 {{has no module tree (fsdp.modules): auto-wrap needs a module imported from TorchScript}}
module {
  fsdp.param @w : tensor<3xf32> in "" : "M"
}

// -----

// expected-error@+1 {{fsdp.modules entries must be [path, class] string pairs, found ["a"]}}
module attributes {fsdp.modules = [["", "M"], ["a"]]} {
}

// -----

// expected-error@+1 {{fsdp.modules must start with the root module (path "")}}
module attributes {fsdp.modules = [["a", "M"]]} {
}

// -----

module attributes {fsdp.modules = [["", "M"]]} {
  // expected-error@+1 {{'fsdp.param' op belongs to module 'gone', which is not in fsdp.modules}}
  fsdp.param @gone.w : tensor<3xf32> in "gone" : "M"
}
