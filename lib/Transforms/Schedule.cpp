//===- Schedule.cpp - when collectives start and are waited ----------------===//
//
// fsdp-shard places every all-gather right before its wait and every
// reduction's wait at the end of the step. These passes decide which
// gathers start earlier (fsdp-prefetch), take back what a memory limit
// forbids (fsdp-limit-all-gathers), bound the reductions in flight
// (fsdp-limit-reductions), and move the ops (fsdp-apply-schedule): decide,
// record the decision on the op, apply, each step on its own.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Analysis/StepAnalysis.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace fsdp {
#define GEN_PASS_DEF_PREFETCH
#define GEN_PASS_DEF_LIMITALLGATHERS
#define GEN_PASS_DEF_LIMITREDUCTIONS
#define GEN_PASS_DEF_APPLYSCHEDULE
#include "fsdp/Transforms/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;

namespace {

/// The op a prefetched gather starts after: the wait ("wait") or the free
/// ("free") of the previous gather of its phase; null if there is none or
/// the mark is neither.
Operation *anchorOf(ArrayRef<Gather> gathers, size_t k, StringRef mark) {
  if (k == 0 || gathers[k - 1].phase != gathers[k].phase)
    return nullptr;
  const Gather &previous = gathers[k - 1];
  if (mark == "wait")
    return previous.wait;
  if (mark == "free")
    return previous.free;
  return nullptr;
}

StringRef markOf(const Gather &g) {
  auto mark = g.start->getAttrOfType<StringAttr>(kPrefetchAttr);
  return mark ? mark.getValue() : StringRef();
}

/// Calls `f` on the body of every function that has one.
template <typename F> void forEachStep(ModuleOp module, F f) {
  module.walk([&](func::FuncOp func) {
    if (!func.getBody().empty())
      f(func.getBody().front());
  });
}

/// Whether an op after `from` and before `read` writes the state `read`
/// reads.
bool updatedBetween(Operation *from, GetOp read) {
  for (Operation *op = from->getNextNode(); op && op != read;
       op = op->getNextNode())
    if (auto update = dyn_cast<UpdateOp>(op);
        update && update.getName() == read.getName())
      return true;
  return false;
}

/// A limit option: negative is an error; 0 means no limit.
LogicalResult checkLimit(ModuleOp module, int64_t limit, StringRef what) {
  if (limit >= 0)
    return success();
  return module.emitError("the ")
         << what << " limit must not be negative, found " << limit;
}

struct Prefetch : fsdp::impl::PrefetchBase<Prefetch> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!isBackwardPrefetch(backwardPrefetch)) {
      module.emitError("unknown backward prefetch '")
          << backwardPrefetch << "': expected " << kBackwardPrefetchValues;
      return signalPassFailure();
    }
    StringRef backward = backwardPrefetch == "BACKWARD_PRE"    ? "wait"
                         : backwardPrefetch == "BACKWARD_POST" ? "free"
                                                               : "";
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

/// The step's reduction starts (reduce-scatter, all-reduce), in order.
SmallVector<Operation *> reductionStarts(Block &body) {
  SmallVector<Operation *> starts;
  for (Operation &op : body)
    if (auto collective = dyn_cast<CollectiveStartOp>(op);
        collective && collective.isReduction())
      starts.push_back(&op);
  return starts;
}

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

struct ApplySchedule : fsdp::impl::ApplyScheduleBase<ApplySchedule> {
  void runOnOperation() override {
    bool ok = true;
    forEachStep(getOperation(), [&](Block &body) {
      // Waits of reductions: right before the start they must precede.
      SmallVector<Operation *> starts = reductionStarts(body);
      SmallVector<std::pair<WaitOp, Operation *>> early;
      for (auto wait : body.getOps<WaitOp>()) {
        auto mark = wait->getAttrOfType<IntegerAttr>(kWaitBeforeAttr);
        if (!mark)
          continue;
        int64_t i = mark.getInt();
        if (i < 0 || i >= int64_t(starts.size())) {
          wait.emitOpError("is marked to wait before reduction #")
              << i << " but the step starts " << starts.size()
              << " reductions";
          ok = false;
          continue;
        }
        if (!starts[i]->isBeforeInBlock(wait)) {
          InFlightDiagnostic diag = wait.emitOpError(
              "is marked to wait before a reduction that starts after it (a "
              "schedule only moves a wait earlier)");
          diag.attachNote(starts[i]->getLoc()) << "that reduction";
          ok = false;
          continue;
        }
        Operation *start = wait.getFuture().getDefiningOp();
        if (!start || start->getBlock() != &body ||
            !start->isBeforeInBlock(starts[i])) {
          InFlightDiagnostic diag = wait.emitOpError(
              "is marked to wait before a reduction that starts before its "
              "own collective");
          diag.attachNote(starts[i]->getLoc()) << "that reduction";
          ok = false;
          continue;
        }
        early.emplace_back(wait, starts[i]);
      }
      for (auto &[wait, start] : early) {
        wait->moveBefore(start);
        wait->removeAttr(kWaitBeforeAttr);
      }

      StepOrder order(body);
      SmallVector<Gather> gathers = collectGathers(order);
      // Anchors are waits and frees, which stay: find them all first.
      SmallVector<std::pair<Gather, Operation *>> moves;
      for (size_t k = 0; k < gathers.size(); ++k) {
        Gather g = gathers[k];
        StringRef mark = markOf(g);
        if (mark.empty())
          continue;
        auto fail = [&](const Twine &message) {
          InFlightDiagnostic diag = g.start->emitOpError(message);
          ok = false;
          return diag;
        };
        if (mark != "wait" && mark != "free") {
          fail(Twine("is marked ") + kPrefetchAttr + " = \"" + mark +
               "\": expected \"wait\" or \"free\"");
          continue;
        }
        if (k == 0 || gathers[k - 1].phase != g.phase) {
          fail(Twine("is marked ") + kPrefetchAttr + " = \"" + mark +
               "\" but has no previous gather in its phase to start after");
          continue;
        }
        Operation *anchor = anchorOf(gathers, k, mark);
        if (!anchor) {
          fail("is marked to start after the free of the previous gather, "
               "which is never freed");
          continue;
        }
        if (order.at(anchor) >= order.at(g.read)) {
          fail("is marked to start after an op that comes after it (a "
               "schedule only moves a gather earlier)")
                  .attachNote(anchor->getLoc())
              << "that op";
          continue;
        }
        if (updatedBetween(anchor, g.read)) {
          fail(Twine("would read @") + g.read.getName() +
               " before an fsdp.update of it");
          continue;
        }
        moves.emplace_back(g, anchor);
      }
      for (auto &[g, anchor] : moves) {
        g.read->moveAfter(anchor);
        Operation *last = g.read;
        if (g.copy) {
          g.copy->moveAfter(g.read);
          last = g.copy;
        }
        g.start->moveAfter(last);
        g.start->removeAttr(kPrefetchAttr);
      }
    });
    if (!ok)
      signalPassFailure();
  }
};

} // namespace
