//===- TorchCompat.h - what archives of newer torch need of libtorch -*- C++ -*-===//
//
// Archives saved by torch 2.x may call operators this libtorch (1.13) does
// not have; TorchScript refuses to load code that names an unknown
// operator. Their schemas, registered (without kernels) where libtorch
// lacks them, let such archives load: fsdp-opt decomposes the calls at
// import, and fsdp-run only reads tensors from them.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_TORCHCOMPAT_H
#define FSDP_RUNTIME_TORCHCOMPAT_H

namespace fsdp::runtime {

/// torch 2.x's `aten::scaled_dot_product_attention(Tensor query, Tensor
/// key, Tensor value, Tensor? attn_mask=None, float dropout_p=0.0, bool
/// is_causal=False, *, float? scale=None, bool enable_gqa=False)`, what
/// `nn.MultiheadAttention` calls there. Registered once per process, only
/// where the dispatcher does not have it.
void registerTorch2Schemas();

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_TORCHCOMPAT_H
