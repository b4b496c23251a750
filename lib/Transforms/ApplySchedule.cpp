//===- ApplySchedule.cpp - fsdp-apply-schedule ------------------------------===//
//
// fsdp-apply-schedule: moves the ops as the scheduling passes recorded:
// marked reduction waits before the start they must precede, prefetched
// gathers after their anchor.
//
//===----------------------------------------------------------------------===//

#include "ScheduleSupport.h"
#include "fsdp/Transforms/Passes.h"

namespace fsdp {
#define GEN_PASS_DEF_APPLYSCHEDULE
#include "fsdp/Transforms/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;
using namespace fsdp::schedule;

namespace {

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
