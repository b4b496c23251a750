//===- OperatorGuards.h - checks around a plan's operator calls -*- C++ -*-===//
//
// A plan calls only the operators of PlanOperators.def. A few of those have
// kernels that trust an index or size argument (an embedding's gradient
// writes at each index it is given); fsdp-run checks those arguments before
// each call. Every call's results are checked to lie within their storage.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_OPERATORGUARDS_H
#define FSDP_RUNTIME_OPERATORGUARDS_H

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>

#include <string>

namespace fsdp::runtime {

/// Checks the boxed arguments of a call before it runs; throws Error
/// beginning with `where` (on a GPU an index check is a device-side assert:
/// no host synchronisation).
using OperatorGuard = void (*)(const torch::jit::Stack &args,
                               const std::string &where);

/// The guard of `overload` ("aten::embedding_dense_backward"); null when its
/// kernel checks its own arguments.
OperatorGuard operatorGuard(const std::string &overload);

/// True if every element of `t` lies within its storage (non-negative
/// strides and offset, the last element's byte inside it).
bool withinStorage(const at::Tensor &t);

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_OPERATORGUARDS_H
