// RUN: fsdp-opt %s --fsdp-verify-plan -split-input-file -verify-diagnostics

// CPU offload: nothing read in the wrong memory. A collective sends device
// tensors only.
module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  fsdp.param @w : tensor<4xf32> in "" : "M"
  fsdp.flat_param @u for "" params [@w] offsets [0] numel 4 padded 4 shards 2 : f32 {fsdp.host}
  func.func @train_step() {
    %s = fsdp.get @u : tensor<2xf32>
    // expected-error@+1 {{'fsdp.all_gather.start' op sends a host tensor: a collective runs on the device (copy it with fsdp.to_device)}}
    %f = fsdp.all_gather.start %s for @u group shard : tensor<2xf32> -> !fsdp.future<tensor<4xf32>>
    %g = fsdp.wait %f : !fsdp.future<tensor<4xf32>>
    fsdp.free %g : tensor<4xf32>
    return
  }
}

// -----

// An ATen call does not mix host and device tensors.
module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  fsdp.param @w : tensor<4xf32> in "" : "M"
  fsdp.flat_param @u for "" params [@w] offsets [0] numel 4 padded 4 shards 2 : f32 {fsdp.host}
  func.func @train_step(%x: tensor<2xf32>) {
    %s = fsdp.get @u : tensor<2xf32>
    // expected-error@+1 {{'aten.call' op reads host and device tensors together (copy one with fsdp.to_host or fsdp.to_device)}}
    %y = aten.call "aten::add.Tensor"(%s, %x, 1) : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    return
  }
}

// -----

// Host state is written from the host, device state from the device.
module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  fsdp.param @w : tensor<4xf32> in "" : "M"
  fsdp.flat_param @u for "" params [@w] offsets [0] numel 4 padded 4 shards 2 : f32 {fsdp.host}
  func.func @train_step(%x: tensor<2xf32>) {
    // expected-error@+1 {{'fsdp.update' op writes @u, which lives on the host, from the device}}
    fsdp.update @u, %x : tensor<2xf32>
    return
  }
}

// -----

// Copies go the other way.
module attributes {fsdp.world_size = 2 : i64, fsdp.shard_group_size = 2 : i64} {
  fsdp.param @w : tensor<4xf32> in "" : "M"
  fsdp.flat_param @u for "" params [@w] offsets [0] numel 4 padded 4 shards 2 : f32 {fsdp.host}
  func.func @train_step(%x: tensor<2xf32>) {
    %s = fsdp.get @u : tensor<2xf32>
    // expected-error@+1 {{'fsdp.to_host' op copies a host tensor to the host}}
    %h = fsdp.to_host %s : tensor<2xf32>
    // expected-error@+1 {{'fsdp.to_device' op copies a device tensor to the device}}
    %d = fsdp.to_device %x : tensor<2xf32>
    return
  }
}
