//===- StepDefaults.h - the training step's option defaults -----*- C++ -*-===//
//
// The default of each option of StepOptions.def, for those that declare an
// option of their own: the passes' options in Passes.td
// (`::fsdp::StepDefaults::lr()`) and the Accelerate reader. Each default is
// written once, in StepOptions.def.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_TRANSFORMS_STEPDEFAULTS_H
#define FSDP_TRANSFORMS_STEPDEFAULTS_H

#include <cstdint>
#include <string>

namespace fsdp {

struct StepDefaults {
  // fsdp-append-loss's and fsdp-optimizer's own defaults; fsdp-opt's
  // --loss and --optimizer have none (they ask for the training step).
  static std::string loss() { return "cross_entropy"; }
  static std::string optimizer() { return "sgd"; }
#define FSDP_TRAIN_OPTION(TYPE, FIELD, FLAG, NAME, DEFAULT, HELP)             \
  static TYPE FIELD() { return DEFAULT; }
#define FSDP_SHARD_OPTION(TYPE, FIELD, FLAG, NAME, DEFAULT, HELP)             \
  static TYPE FIELD() { return DEFAULT; }
#include "fsdp/Transforms/StepOptions.def"
};

} // namespace fsdp

#endif // FSDP_TRANSFORMS_STEPDEFAULTS_H
