//===- LimitReductions.cpp - fsdp-limit-reductions --------------------------===//
//
// fsdp-limit-reductions: marks the waits that must come earlier for at most
// N reductions to be in flight (fsdp.wait_before).
//
//===----------------------------------------------------------------------===//

#include "ScheduleSupport.h"
#include "fsdp/Transforms/Passes.h"

namespace fsdp {
#define GEN_PASS_DEF_LIMITREDUCTIONS
#include "fsdp/Transforms/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;
using namespace fsdp::schedule;

namespace {

struct LimitReductions : fsdp::impl::LimitReductionsBase<LimitReductions> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(checkLimit(module, limit, "reduction")))
      return signalPassFailure();
    if (limit == 0)
      return;
    forEachStep(module, [&](Block &body) {
      StepOrder order(body);
      SmallVector<Operation *> starts = reductionStarts(body);
      Builder b(module.getContext());
      for (size_t k = 0; k + limit < starts.size(); ++k) {
        WaitOp wait = waitOf(cast<CollectiveStartOp>(starts[k]));
        Operation *bound = starts[k + limit];
        if (wait && order.at(wait) > order.at(bound))
          wait->setAttr(kWaitBeforeAttr, b.getI64IntegerAttr(k + limit));
      }
    });
  }
};

} // namespace
