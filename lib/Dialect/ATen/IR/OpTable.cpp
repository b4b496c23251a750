//===- OpTable.cpp - what the compiler knows of ATen operators ------------===//

#include "fsdp/Dialect/ATen/IR/OpTable.h"

#include "llvm/ADT/StringMap.h"

#include <initializer_list>

using namespace fsdp::aten;

/// Each operator's facts, keyed by overload (View) or by name (the rest).
static const llvm::StringMap<unsigned> &table() {
  static const llvm::StringMap<unsigned> facts = [] {
    llvm::StringMap<unsigned> t;
    auto add = [&](OpFact fact, std::initializer_list<llvm::StringRef> keys) {
      for (llvm::StringRef key : keys)
        t[key] |= static_cast<unsigned>(fact);
    };
    // ATen's view operators (`Tensor(a)` results) and those that return their
    // input unchanged when they can. By overload.
    add(OpFact::View, {"aten::alias",
                       "aten::as_strided",
                       "aten::broadcast_to",
                       "aten::chunk",
                       "aten::contiguous",
                       "aten::detach",
                       "aten::diagonal",
                       "aten::expand",
                       "aten::expand_as",
                       "aten::flatten.using_ints",
                       "aten::movedim.int",
                       "aten::movedim.intlist",
                       "aten::narrow",
                       "aten::numpy_T",
                       "aten::permute",
                       "aten::reshape",
                       "aten::reshape_as",
                       "aten::select.int",
                       "aten::slice.Tensor",
                       "aten::split.Tensor",
                       "aten::split_with_sizes",
                       "aten::squeeze",
                       "aten::squeeze.dim",
                       "aten::squeeze.dims",
                       "aten::swapaxes",
                       "aten::swapdims",
                       "aten::t",
                       "aten::to.dtype",
                       "aten::to.dtype_layout",
                       "aten::to.device",
                       "aten::to.other",
                       "aten::transpose.int",
                       "aten::type_as",
                       "aten::unbind.int",
                       "aten::unflatten.int",
                       "aten::unfold",
                       "aten::unsqueeze",
                       "aten::view",
                       "aten::view_as",
                       "aten::mT",
                       "aten::mH",
                       "aten::adjoint",
                       "aten::matrix_H",
                       "aten::real",
                       "aten::imag",
                       "aten::view.dtype",
                       "aten::tensor_split.sections",
                       "aten::tensor_split.indices",
                       "aten::hsplit.int",
                       "aten::vsplit.int",
                       "aten::dsplit.int",
                       "aten::indices",
                       "aten::values",
                       "aten::split.sizes",
                       "aten::unsafe_split.Tensor",
                       "aten::unsafe_split_with_sizes",
                       "aten::unsafe_chunk",
                       "aten::_unsafe_view",
                       "aten::_reshape_alias",
                       "aten::view_as_real",
                       "aten::view_as_complex",
                       "aten::conj",
                       "aten::_conj",
                       "aten::lift_fresh",
                       "aten::split_with_sizes.dimname",
                       "aten::squeeze.dimname"});
    // By operator name: every overload, and the in-place form too.
    add(OpFact::NonDifferentiable, {"aten::eq",
                                    "aten::ne",
                                    "aten::lt",
                                    "aten::le",
                                    "aten::gt",
                                    "aten::ge",
                                    "aten::logical_and",
                                    "aten::logical_or",
                                    "aten::logical_not",
                                    "aten::logical_xor",
                                    "aten::bitwise_and",
                                    "aten::bitwise_or",
                                    "aten::bitwise_not",
                                    "aten::bitwise_xor",
                                    "aten::argmax",
                                    "aten::argmin",
                                    "aten::argsort",
                                    "aten::sign",
                                    "aten::sgn",
                                    "aten::floor",
                                    "aten::ceil",
                                    "aten::round",
                                    "aten::trunc",
                                    "aten::floor_divide",
                                    "aten::zeros_like",
                                    "aten::ones_like",
                                    "aten::full_like",
                                    "aten::empty_like",
                                    "aten::rand_like",
                                    "aten::randn_like",
                                    "aten::randint_like",
                                    "aten::new_zeros",
                                    "aten::new_ones",
                                    "aten::new_full",
                                    "aten::new_empty",
                                    "aten::new_empty_strided",
                                    "aten::bernoulli",
                                    "aten::detach",
                                    "aten::isnan",
                                    "aten::isinf",
                                    "aten::isfinite",
                                    "aten::fill",
                                    "aten::zero",
                                    "aten::empty",
                                    "aten::zeros",
                                    "aten::ones",
                                    "aten::full",
                                    "aten::arange",
                                    "aten::rand",
                                    "aten::randn",
                                    "aten::randint",
                                    "aten::randperm",
                                    "aten::uniform",
                                    "aten::normal",
                                    "aten::multinomial",
                                    "aten::one_hot",
                                    "aten::eye",
                                    "aten::_shape_as_tensor",
                                    "aten::scalar_tensor",
                                    "aten::tensor"});
    // ATen kernels built on TensorIterator (by name, every overload).
    add(OpFact::Pointwise, {"aten::abs",
                            "aten::add",
                            "aten::addcdiv",
                            "aten::addcmul",
                            "aten::bitwise_and",
                            "aten::bitwise_not",
                            "aten::bitwise_or",
                            "aten::bitwise_xor",
                            "aten::ceil",
                            "aten::clamp",
                            "aten::clamp_max",
                            "aten::clamp_min",
                            "aten::cos",
                            "aten::cosh",
                            "aten::div",
                            "aten::elu",
                            "aten::elu_backward",
                            "aten::eq",
                            "aten::erf",
                            "aten::exp",
                            "aten::expm1",
                            "aten::floor",
                            "aten::ge",
                            "aten::gelu",
                            "aten::gelu_backward",
                            "aten::gt",
                            "aten::hardsigmoid",
                            "aten::hardsigmoid_backward",
                            "aten::hardswish",
                            "aten::hardswish_backward",
                            "aten::hardtanh",
                            "aten::hardtanh_backward",
                            "aten::le",
                            "aten::leaky_relu",
                            "aten::leaky_relu_backward",
                            "aten::lerp",
                            "aten::log",
                            "aten::log1p",
                            "aten::logical_and",
                            "aten::logical_not",
                            "aten::logical_or",
                            "aten::lt",
                            "aten::masked_fill",
                            "aten::maximum",
                            "aten::minimum",
                            "aten::mish",
                            "aten::mish_backward",
                            "aten::mul",
                            "aten::ne",
                            "aten::neg",
                            "aten::pow",
                            "aten::reciprocal",
                            "aten::relu",
                            "aten::remainder",
                            "aten::round",
                            "aten::rsqrt",
                            "aten::rsub",
                            "aten::sigmoid",
                            "aten::sigmoid_backward",
                            "aten::sign",
                            "aten::silu",
                            "aten::silu_backward",
                            "aten::sin",
                            "aten::sinh",
                            "aten::softplus",
                            "aten::softplus_backward",
                            "aten::sqrt",
                            "aten::square",
                            "aten::sub",
                            "aten::tan",
                            "aten::tanh",
                            "aten::tanh_backward",
                            "aten::threshold",
                            "aten::threshold_backward",
                            "aten::true_divide",
                            "aten::trunc",
                            "aten::where",
                            "aten::xlogy"});
    // Copies that keep their input's layout (preserve_format).
    add(OpFact::PreservesLayout,
        {"aten::clone", "aten::_to_copy", "aten::empty_like",
         "aten::select_scatter", "aten::slice_scatter",
         "aten::zeros_like", "aten::ones_like", "aten::full_like",
         "aten::rand_like", "aten::randn_like"});
    // Fill a new tensor of their dtype (ranges, `arange` and `linspace`, are
    // not: bf16 would round their integers).
    add(OpFact::FillingFactory,
        {"aten::zeros", "aten::ones", "aten::empty", "aten::full", "aten::rand",
         "aten::randn", "aten::empty_strided"});
    // Read only the type of their tensor input.
    add(OpFact::TypeOnlyFactory,
        {"aten::new_zeros", "aten::new_ones", "aten::new_full",
         "aten::zeros_like", "aten::ones_like", "aten::full_like"});
    // Uninitialized memory.
    add(OpFact::Uninitialized,
        {"aten::empty", "aten::empty_like", "aten::new_empty",
         "aten::empty_strided", "aten::new_empty_strided"});
    // Values read from tensor data (a property of the static types, such as
    // is_floating_point, is not).
    add(OpFact::DataDependentValue,
        {"aten::item", "aten::Int", "aten::Float", "aten::Bool",
         "aten::ScalarImplicit", "aten::equal", "aten::allclose",
         "aten::is_nonzero", "aten::tolist", "aten::_local_scalar_dense",
         "aten::IntImplicit", "aten::FloatImplicit", "aten::is_meta",
         "prim::is_meta"});
    // Results whose shape depends on tensor data.
    add(OpFact::DataDependentShape,
        {"aten::nonzero", "aten::nonzero_numpy", "aten::argwhere",
         "aten::masked_select", "aten::unique", "aten::_unique",
         "aten::_unique2", "aten::unique_dim", "aten::unique_consecutive",
         "aten::bincount", "aten::repeat_interleave", "aten::nonzero_static",
         "aten::one_hot"});
    // at::matmul's should_fold, reached from linear with an operand of rank
    // 3 or more; scaled_dot_product_attention, whose CPU flash kernel gives
    // no gradient for an attention mask, runs the math kernel on a mask that
    // requires grad (T5's learned position bias).
    add(OpFact::ReadsRequiresGrad,
        {"aten::matmul", "aten::linear", "aten::scaled_dot_product_attention"});
    // Operators that draw from the generator: those ATen tags
    // nondeterministic_seeded, and composite ones that call one of them.
    add(OpFact::Random,
        {"aten::dropout", "aten::native_dropout", "aten::_fused_dropout",
         "aten::feature_dropout", "aten::alpha_dropout",
         "aten::feature_alpha_dropout", "aten::bernoulli", "aten::binomial",
         "aten::cauchy", "aten::exponential", "aten::geometric",
         "aten::log_normal", "aten::normal", "aten::uniform", "aten::random",
         "aten::multinomial", "aten::poisson", "aten::_standard_gamma",
         "aten::_sample_dirichlet", "aten::rand", "aten::rand_like",
         "aten::randn", "aten::randn_like", "aten::randint",
         "aten::randint_like", "aten::randperm", "aten::rrelu",
         "aten::rrelu_with_noise", "aten::rrelu_with_noise_functional",
         "aten::lstm", "aten::gru", "aten::rnn_tanh", "aten::rnn_relu",
         "aten::scaled_dot_product_attention",
         "aten::_scaled_dot_product_attention_math",
         "aten::_scaled_dot_product_flash_attention_for_cpu",
         "aten::_scaled_dot_product_efficient_attention",
         "aten::_scaled_dot_product_flash_attention",
         "aten::_scaled_dot_product_cudnn_attention",
         "aten::_efficient_attention_forward",
         "aten::_flash_attention_forward"});
    return t;
  }();
  return facts;
}

std::string fsdp::aten::functionalForm(llvm::StringRef overload) {
  auto [base, rest] = overload.split('.');
  if (!base.ends_with("_") || base.ends_with("__"))
    return "";
  std::string name = base.drop_back().str();
  if (!rest.empty())
    name += "." + rest.str();
  return name;
}

bool fsdp::aten::hasFact(llvm::StringRef overloadOrName, OpFact fact) {
  llvm::StringRef key = overloadOrName;
  // A fact of an operator name holds for each of its overloads; that of
  // no gradient for its in-place form too.
  if (fact != OpFact::View) {
    key = key.split('.').first;
    if ((fact == OpFact::NonDifferentiable || fact == OpFact::Random) &&
        key.ends_with("_") &&
        !key.ends_with("__"))
      key = key.drop_back();
  }
  auto it = table().find(key);
  return it != table().end() && (it->second & static_cast<unsigned>(fact));
}
