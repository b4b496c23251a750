//===- LimitAllGathers.cpp - fsdp-limit-all-gathers -------------------------===//
//
// fsdp-limit-all-gathers: takes back prefetch decisions that would put more
// than N gathered buffers in flight (FSDP's limit_all_gathers).
//
//===----------------------------------------------------------------------===//

#include "ScheduleSupport.h"
#include "fsdp/Transforms/Passes.h"

namespace fsdp {
#define GEN_PASS_DEF_LIMITALLGATHERS
#include "fsdp/Transforms/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;
using namespace fsdp::schedule;

namespace {

struct LimitAllGathers : fsdp::impl::LimitAllGathersBase<LimitAllGathers> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(checkLimit(module, limit, "all-gather")))
      return signalPassFailure();
    if (limit == 0)
      return;
    forEachStep(module, [&](Block &body) {
      StepOrder order(body);
      SmallVector<Gather> gathers = collectGathers(order);
      // Where each buffer counts, in half-positions: from its start (right
      // after its anchor if prefetched) to its free.
      SmallVector<int64_t> from, to;
      for (size_t k = 0; k < gathers.size(); ++k) {
        Operation *anchor = anchorOf(gathers, k, markOf(gathers[k]));
        from.push_back(anchor ? 2 * order.at(anchor) + 1
                              : 2 * order.at(gathers[k].start));
        to.push_back(gathers[k].free ? 2 * order.at(gathers[k].free)
                                     : std::numeric_limits<int64_t>::max());
      }
      for (size_t k = 0; k < gathers.size(); ++k) {
        if (markOf(gathers[k]).empty())
          continue;
        int64_t counted = 0;
        for (size_t j = 0; j < gathers.size(); ++j)
          if (j != k && from[j] < from[k] && from[k] < to[j])
            ++counted;
        if (counted < limit)
          continue;
        gathers[k].start->removeAttr(kPrefetchAttr);
        from[k] = 2 * order.at(gathers[k].start);
      }
    });
  }
};

} // namespace
