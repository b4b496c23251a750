//===- Prefetch.cpp - fsdp-prefetch -----------------------------------------===//
//
// fsdp-prefetch: decides which all-gathers start earlier (FSDP's backward
// and forward prefetch) and records it on the gather (fsdp.prefetch);
// fsdp-apply-schedule moves them.
//
//===----------------------------------------------------------------------===//

#include "ScheduleSupport.h"
#include "fsdp/Transforms/Passes.h"

namespace fsdp {
#define GEN_PASS_DEF_PREFETCH
#include "fsdp/Transforms/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;
using namespace fsdp::schedule;

namespace {

/// Where a backward gather prefetched in `mode` starts: after the previous
/// gather's wait (BACKWARD_PRE) or free (BACKWARD_POST); "" for none.
StringRef anchorMark(BackwardPrefetch mode) {
  switch (mode) {
  case BackwardPrefetch::BACKWARD_PRE:
    return "wait";
  case BackwardPrefetch::BACKWARD_POST:
    return "free";
  case BackwardPrefetch::NO_PREFETCH:
    return "";
  }
  llvm_unreachable("a BackwardPrefetch value");
}

struct Prefetch : fsdp::impl::PrefetchBase<Prefetch> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<BackwardPrefetch> mode =
        symbolizeBackwardPrefetch(backwardPrefetch);
    if (!mode) {
      module.emitError("unknown backward prefetch '")
          << backwardPrefetch << "': expected " << kBackwardPrefetchValues;
      return signalPassFailure();
    }
    StringRef backward = anchorMark(*mode);
    StringRef forward = forwardPrefetch ? "wait" : "";
    forEachStep(module, [&](Block &body) {
      StepOrder order(body);
      SmallVector<Gather> gathers = collectGathers(order);
      for (size_t k = 0; k < gathers.size(); ++k) {
        const Gather &g = gathers[k];
        StringRef mark = g.phase == Phase::Forward ? forward : backward;
        Operation *anchor = anchorOf(gathers, k, mark);
        // Earlier than where it starts now, and not over an update of the
        // state it reads.
        if (!anchor || order.at(anchor) + 1 >= order.at(g.read) ||
            updatedBetween(anchor, g.read))
          continue;
        g.start->setAttr(kPrefetchAttr,
                         StringAttr::get(module.getContext(), mark));
      }
    });
  }
};

} // namespace
