//===- ScheduleSupport.cpp - what the scheduling passes share -------------===//
//
// See ScheduleSupport.h.
//
//===----------------------------------------------------------------------===//

#include "ScheduleSupport.h"

using namespace mlir;

namespace fsdp::schedule {

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

bool updatedBetween(Operation *from, GetOp read) {
  for (Operation *op = from->getNextNode(); op && op != read;
       op = op->getNextNode())
    if (auto update = dyn_cast<UpdateOp>(op);
        update && update.getName() == read.getName())
      return true;
  return false;
}

LogicalResult checkLimit(ModuleOp module, int64_t limit, StringRef what) {
  if (limit >= 0)
    return success();
  return module.emitError("the ")
         << what << " limit must not be negative, found " << limit;
}

SmallVector<Operation *> reductionStarts(Block &body) {
  SmallVector<Operation *> starts;
  for (Operation &op : body)
    if (auto collective = dyn_cast<CollectiveStartOp>(op);
        collective && collective.isReduction())
      starts.push_back(&op);
  return starts;
}

} // namespace fsdp::schedule
