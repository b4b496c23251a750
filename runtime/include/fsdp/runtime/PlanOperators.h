//===- PlanOperators.h - the ATen operators a plan may call -----*- C++ -*-===//
//
// The one list of operators fsdp-opt may emit and fsdp-run may call
// (PlanOperators.def), shared by both. Header-only: the compiler does not
// link the runtime.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_PLANOPERATORS_H
#define FSDP_RUNTIME_PLANOPERATORS_H

#include <string_view>
#include <unordered_set>

namespace fsdp::runtime {

/// True if a plan may call `overload` ("aten::add.Tensor", "aten::relu").
inline bool isPlanOperator(std::string_view overload) {
  static const std::unordered_set<std::string_view> operators = {
#define FSDP_PLAN_OPERATOR(NAME) NAME,
#include "fsdp/runtime/PlanOperators.def"
  };
  return operators.count(overload) != 0;
}

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_PLANOPERATORS_H
