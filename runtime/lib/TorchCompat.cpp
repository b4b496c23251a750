//===- TorchCompat.cpp - what archives of newer torch need of libtorch -----===//

#include "fsdp/runtime/TorchCompat.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/jit/frontend/function_schema_parser.h>

#include <mutex>

namespace fsdp::runtime {

void registerTorch2Schemas() {
  static std::once_flag once;
  std::call_once(once, [] {
    auto &dispatcher = c10::Dispatcher::singleton();
    if (dispatcher.findSchema({"aten::scaled_dot_product_attention", ""}))
      return;
    // Kept for the life of the process.
    static c10::RegistrationHandleRAII handle = dispatcher.registerDef(
        torch::jit::parseSchema(
            "aten::scaled_dot_product_attention(Tensor query, Tensor key, "
            "Tensor value, Tensor? attn_mask=None, float dropout_p=0.0, bool "
            "is_causal=False, *, float? scale=None, bool enable_gqa=False) "
            "-> Tensor"),
        "fsdp-opt: torch 2.x's attention (no kernel: decomposed at import)");
  });
}

} // namespace fsdp::runtime
