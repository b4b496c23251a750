// What the memory model cannot account for is an error at the op.
// RUN: fsdp-opt %s --split-input-file --fsdp-memory-report -o /dev/null -verify-diagnostics

// A member of a flat parameter is not state a rank holds: only the flat
// parameter's shard is.
module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  fsdp.param @w : tensor<2xf32> in "a" : "L"
  fsdp.flat_param @a for "a" params [@w] offsets [0] numel 2 padded 2 shards 2 : f32
  func.func @train_step() {
    // expected-error @below {{reads @w, which no rank holds as state (a member of a flat parameter, or not state at all)}}
    %w = fsdp.get @w : tensor<2xf32>
    return
  }
}

// -----

// fsdp.grad is gone by the time a plan is emitted (the optimizer consumes it).
module {
  fsdp.param @w : tensor<2xf32> in "" : "L"
  func.func @train_step(%g: tensor<2xf32>) {
    // expected-error @below {{'fsdp.grad' op has no memory model: it is not an instruction of a plan}}
    fsdp.grad @w, %g : tensor<2xf32>
    return
  }
}

// -----

// A plan is one straight line of instructions.
module {
  // expected-error @below {{'func.func' op must be a single block to predict its memory}}
  func.func @train_step() {
    return
  ^unreachable:
    return
  }
}
