//===- Shard.cpp - flat parameters, sharding strategies, collectives -------===//
//
// What PyTorch FSDP does in its pre-forward, pre-backward and post-backward
// hooks, placed once in the static step: a unit's parameters live as one
// flat shard per rank, are gathered before their first use and freed after
// their last, and the unit's flat gradient is reduce-scattered as soon as
// its last contribution is computed.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Analysis/StepAnalysis.h"
#include "fsdp/Dialect/ATen/IR/ATenBuilder.h"
#include "fsdp/Dialect/ATen/IR/OpTable.h"
#include "fsdp/Target/Plan/PlanTypes.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

#include <algorithm>
#include <optional>


namespace fsdp {
#define GEN_PASS_DEF_SHARD
#include "fsdp/Transforms/Passes.h.inc"
} // namespace fsdp

using namespace mlir;
using namespace fsdp;

namespace {

/// Whether `value`, or a view of it, is viewed as complex
/// (aten::view_as_complex), which needs its storage offset even.
bool isViewedAsComplex(Value value) {
  SmallVector<Value> work{value};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    for (Operation *user : v.getUsers()) {
      auto call = dyn_cast<aten::CallOp>(user);
      if (!call || !aten::hasFact(call.getOverload(), aten::OpFact::View))
        continue;
      if (call.getOverload() == "aten::view_as_complex")
        return true;
      for (Value r : call.getResults())
        work.push_back(r);
    }
  }
  return false;
}

// fairscale's OSS (optimizer-state sharding, ZeRO-1) and SHARDED_DDP
// (ShardedDDP + OSS, ZeRO-2) hold parameters whole on every rank, so nothing
// is gathered for the forward or backward.
using Strategy = ShardingStrategy;

struct Unit {
  std::string path;
  SmallVector<ParamOp> members;
  SmallVector<int64_t> offsets;
  int64_t numel = 0;
  FlatParamOp flat;
  /// The type the step reads the parameters in (mixed precision's param
  /// dtype), which the all-gather moves.
  Type computeType;
  /// CPU offload of the unit (its shard, gradient and optimizer state on
  /// the host), or of its optimizer state alone.
  bool offload = false, offloadOptim = false;
};

struct Shard : fsdp::impl::ShardBase<Shard> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(run(getOperation())))
      signalPassFailure();
  }

  LogicalResult run(ModuleOp module);
  LogicalResult checkOptions(ModuleOp module);
  /// Gathers `unit` before the first of `uses` (reads of its parameters
  /// or of ATen views of them, all in one region of the step) and frees the
  /// buffer after the last. Reads of a parameter become reads of an
  /// `fsdp.view` of the buffer; with `recompute`, the forward's views (a
  /// transposed weight the backward reads) are taken again from this
  /// buffer, so that nothing reads the forward's buffer after its free.
  void gather(Unit &unit, ArrayRef<OpOperand *> uses, bool recompute);
  void reduceGradients(Unit &unit);
  /// The evaluation step `eval` reads the units' parameters as the
  /// forward does: each gathered before its first read and freed after its
  /// last.
  void shardEvaluation(func::FuncOp eval, ArrayRef<Unit *> units);

  /// Parameters live whole on every rank (a replicated flat parameter).
  bool replicated() const {
    return strategy == Strategy::OSS || strategy == Strategy::SHARDED_DDP;
  }
  /// The forward and backward gather a unit's shards before reading it.
  bool gathers() const {
    return strategy != Strategy::NO_SHARD && !replicated();
  }

  /// The type `g` is reduced in: `reduce-dtype`, or its own.
  Type reduceType(Value g) const {
    return reduceElement ? reduceElement
                         : cast<ShapedType>(g.getType()).getElementType();
  }

  Strategy strategy = Strategy::FULL_SHARD;
  HybridReduction reduction = HybridReduction::Ordered;
  Type reduceElement; // reduce-dtype, or null
  int64_t groupSize = 1;
  func::FuncOp func;
  Block *body = nullptr;
  std::optional<StepOrder> order;
  llvm::DenseMap<StringAttr, GetOp> reads;   // parameter -> its fsdp.get
  llvm::DenseMap<StringAttr, GradOp> grads;  // parameter -> its fsdp.grad
  /// ATen views of a unit's parameters (through other views): the
  /// forward's view ops per unit, in order, and every view value (forward
  /// and backward), as a set and per unit.
  llvm::DenseMap<Unit *, SmallVector<Operation *>> derivedOps;
  llvm::DenseSet<Value> derived;
  llvm::DenseMap<Unit *, SmallVector<Value>> viewsOf;
  /// The parameter read each view stands for.
  llvm::DenseMap<Value, Value> viewOf;
  /// The same, the other way: each parameter read's views, in order.
  llvm::DenseMap<Value, SmallVector<Value>> viewsOfRead;
  /// Collectives whose wait goes at the end of the step, in start order,
  /// with what to do with the result.
  SmallVector<std::pair<int64_t, std::function<void(OpBuilder &)>>> finishers;
};

LogicalResult Shard::checkOptions(ModuleOp module) {
  if (std::optional<Strategy> parsed = symbolizeShardingStrategy(sharding))
    strategy = *parsed;
  else
    return module.emitError("unknown sharding strategy '")
           << sharding << "': expected " << kShardingStrategies;
  MLIRContext *ctx = module.getContext();
  if (!reduceDtype.empty()) {
    StringRef name = reduceDtype;
    if (name != "bf16" && name != "f16" && name != "f32")
      return module.emitError("unknown reduce dtype '")
             << reduceDtype << "': expected bf16, f16 or f32";
    reduceElement = elementTypeNamed(name, ctx);
  }
  bool offloads = offloadParams || !offloadUnits.empty() ||
                  !offloadOptimUnits.empty();
  if (offloads && (strategy == Strategy::OSS ||
                   strategy == Strategy::SHARDED_DDP))
    return module.emitError("CPU offload applies to FSDP's strategies, not ")
           << sharding << " (its parameters are whole on every rank)";
  std::optional<HybridReduction> named =
      symbolizeHybridReduction(hybridReduction);
  if (!named)
    return module.emitError("unknown HYBRID_SHARD reduction '")
           << hybridReduction << "': expected ordered or two-stage";
  reduction = *named;
  if (backend != "gloo" && backend != "nccl")
    return module.emitError("unknown backend '")
           << backend << "': expected gloo or nccl";
  if (worldSize < 1)
    return module.emitError("world size must be at least 1, found ")
           << int64_t(worldSize);
  if (worldSize > kMaxWorldSize || shardGroupSize > kMaxWorldSize)
    return module.emitError("world size ")
           << int64_t(worldSize) << " and shard-group size "
           << int64_t(shardGroupSize) << " must be at most " << kMaxWorldSize
           << " ranks";
  if (strategy == Strategy::HYBRID_SHARD) {
    if (shardGroupSize <= 0)
      return module.emitError(
          "HYBRID_SHARD needs the shard-group size (the ranks of one node "
          "that shard a unit; the groups replicate it)");
    if (worldSize % shardGroupSize != 0)
      return module.emitError("shard-group size ")
             << int64_t(shardGroupSize) << " does not divide the world size "
             << int64_t(worldSize);
    groupSize = shardGroupSize;
    return success();
  }
  if (shardGroupSize != 0)
    return module.emitError("shard-group size applies to HYBRID_SHARD, not ")
           << sharding;
  groupSize = strategy == Strategy::NO_SHARD ? 1 : worldSize;
  return success();
}

void Shard::gather(Unit &unit, ArrayRef<OpOperand *> uses, bool recompute) {
  if (uses.empty())
    return;
  auto before = [&](OpOperand *a, OpOperand *b) {
    return order->at(a->getOwner()) < order->at(b->getOwner());
  };
  OpOperand *first = *llvm::min_element(uses, before);
  OpOperand *last = *llvm::max_element(uses, before);
  Operation *firstOp = body->findAncestorOpInBlock(*first->getOwner());
  Operation *lastOp = body->findAncestorOpInBlock(*last->getOwner());
  Location loc = firstOp->getLoc();
  OpBuilder b(firstOp);
  auto ref = FlatSymbolRefAttr::get(unit.flat.getSymNameAttr());
  // Mixed precision: the shard read in the compute type (a rounded copy),
  // so that the gather moves that type.
  Value shard = GetOp::create(
      b, loc, unit.flat.getStateType().clone(unit.computeType), ref);
  // CPU offload: the shard lives on the host; the device gathers a copy.
  if (unit.offload)
    shard = ToDeviceOp::create(b, loc, shard);
  Value full = shard;
  if (gathers()) {
    auto fullType = RankedTensorType::get({int64_t(unit.flat.getPaddedNumel())},
                                          unit.computeType);
    auto start = AllGatherStartOp::create(
        b, loc, FutureType::get(b.getContext(), fullType), shard, ref,
        CommGroupAttr::get(b.getContext(), CommGroup::shard));
    full = WaitOp::create(b, loc, fullType, start.getResult());
  }

  // What these uses read: parameters directly, or through their views
  // (which, taken again, read the parameters themselves).
  llvm::DenseSet<Value> needed;
  SmallVector<Value> work;
  for (OpOperand *use : uses)
    if (needed.insert(use->get()).second)
      work.push_back(use->get());
  while (recompute && !work.empty()) {
    Value v = work.pop_back_val();
    if (!derived.contains(v))
      continue;
    for (Value operand : v.getDefiningOp()->getOperands()) {
      // The forward reads a parameter through its forward view.
      Value read = viewOf.lookup(operand);
      if (!read)
        read = operand;
      if (needed.insert(read).second)
        work.push_back(read);
    }
  }

  // One view per member read.
  IRMapping mapping;
  for (auto [param, offset] : llvm::zip(unit.members, unit.offsets)) {
    GetOp read = reads.lookup(param.getSymNameAttr());
    if (!read || !needed.contains(read.getResult()))
      continue;
    Value old = read.getResult();
    Value view = ViewOp::create(b, loc, old.getType(), full,
                                b.getI64IntegerAttr(offset));
    mapping.map(old, view);
    viewOf[view] = old;
    viewsOfRead[old].push_back(view);
  }
  // The forward's views read the forward's views of the same parameters.
  // (Only this unit's reads have a new view: a walk of their views, not
  // of every unit's.)
  if (recompute)
    for (ParamOp param : unit.members) {
      GetOp read = reads.lookup(param.getSymNameAttr());
      if (!read)
        continue;
      Value now = mapping.lookupOrNull(read.getResult());
      if (!now)
        continue;
      for (Value view : viewsOfRead.lookup(read.getResult()))
        if (view != now)
          mapping.map(view, now);
    }
  // The forward's views again, in their order, from the new buffer.
  if (recompute)
    for (Operation *op : derivedOps.lookup(&unit))
      if (llvm::any_of(op->getResults(),
                       [&](Value r) { return needed.contains(r); }))
        b.clone(*op, mapping);
  for (OpOperand *use : uses)
    if (Value replacement = mapping.lookupOrNull(use->get()))
      use->set(replacement);
  if (gathers()) {
    b.setInsertionPointAfter(lastOp);
    FreeOp::create(b, lastOp->getLoc(), full);
  }
}

void Shard::reduceGradients(Unit &unit) {
  SmallVector<GradOp> memberGrads;
  GradOp lastGrad;
  for (ParamOp p : unit.members) {
    GradOp g = grads.lookup(p.getSymNameAttr());
    memberGrads.push_back(g);
    if (!lastGrad || order->at(g) > order->at(lastGrad))
      lastGrad = g;
  }
  Location loc = lastGrad.getLoc();
  int64_t completedAt = order->at(lastGrad);
  OpBuilder builder(lastGrad);
  builder.setInsertionPointAfter(lastGrad);
  aten::ATenBuilder b(builder, loc);
  Type elem = cast<ShapedType>(memberGrads.front().getValue().getType())
                  .getElementType();
  int64_t padded = unit.flat.getPaddedNumel();
  SmallVector<Value> pieces;
  for (GradOp g : memberGrads) {
    auto type = cast<RankedTensorType>(g.getValue().getType());
    pieces.push_back(b.reshape(g.getValue(), {type.getNumElements()}));
  }
  if (padded > unit.numel)
    pieces.push_back(
        b.zeros(pieces.front(), RankedTensorType::get({padded - unit.numel},
                                                      elem)));
  Value flatGrad = pieces.size() == 1 ? pieces.front() : b.cat(pieces, 0);
  for (GradOp g : memberGrads)
    g.erase();
  // Mixed precision: reduced in the reduce dtype, then (once waited) cast
  // to the flat parameter's own type, as FSDP casts the reduced shard.
  flatGrad = b.cast(flatGrad, reduceType(flatGrad));
  // fp16: the mean is a division before the sum and one after, as FSDP2
  // divides fp16 gradients (its pre- and post-divide factors), so that
  // neither the sum overflows nor the quotient underflows; bf16 and f32
  // reduce to the mean (FSDP2's ReduceOp.AVG), which divides each rank's
  // contribution before the sum.
  double pre = 1.0, post = 1.0;
  bool divides =
      cast<ShapedType>(flatGrad.getType()).getElementType().isF16();
  if (divides) {
    int64_t factor = 1;
    while (worldSize % factor == 0 && worldSize / factor > factor)
      factor *= 2;
    pre = double(factor);
    post = double(worldSize) / pre;
    if (pre > 1.0)
      flatGrad = b.divScalar(flatGrad, pre);
  }
  Type stored = unit.flat.getElementType();
  bool offload = unit.offload || unit.offloadOptim;
  // CPU offload: the reduced (and cast) shard is copied to the host, where
  // the optimizer runs.
  auto toStored = [loc, stored, offload, post](OpBuilder &end, Value g) {
    aten::ATenBuilder b(end, loc);
    if (post > 1.0)
      g = b.divScalar(g, post);
    g = b.cast(g, stored);
    return offload ? Value(ToHostOp::create(end, loc, g)) : g;
  };

  MLIRContext *ctx = builder.getContext();
  auto ref = FlatSymbolRefAttr::get(unit.flat.getSymNameAttr());
  auto shardType = unit.flat.getShardType().clone(
      cast<ShapedType>(flatGrad.getType()).getElementType());
  auto mean = ReduceOpAttr::get(ctx, divides ? ReduceOp::sum : ReduceOp::mean);
  if (strategy == Strategy::NO_SHARD) {
    auto start = AllReduceStartOp::create(
        builder, loc, FutureType::get(ctx, shardType), flatGrad,
        CommGroupAttr::get(ctx, CommGroup::world), mean);
    Value future = start.getResult();
    finishers.emplace_back(completedAt, [=](OpBuilder &end) {
      auto g = WaitOp::create(end, loc, shardType, future);
      g->setAttr(kReducedGradAttr, end.getUnitAttr());
      GradOp::create(end, loc, ref, toStored(end, g));
    });
    return;
  }
  if (strategy == Strategy::OSS) {
    // Every rank gets the whole mean gradient and keeps its shard of it.
    auto fullType = unit.flat.getFullType().clone(shardType.getElementType());
    auto start = AllReduceStartOp::create(
        builder, loc, FutureType::get(ctx, fullType), flatGrad,
        CommGroupAttr::get(ctx, CommGroup::world), mean);
    Value future = start.getResult();
    finishers.emplace_back(completedAt, [=](OpBuilder &end) {
      auto whole = WaitOp::create(end, loc, fullType, future);
      whole->setAttr(kReducedGradAttr, end.getUnitAttr());
      Value g = LocalShardOp::create(
          end, loc, shardType, whole, ref,
          CommGroupAttr::get(ctx, CommGroup::shard));
      GradOp::create(end, loc, ref, toStored(end, g));
    });
    return;
  }
  bool hybrid = strategy == Strategy::HYBRID_SHARD && groupSize != worldSize;
  // HYBRID_SHARD, ordered: one reduce-scatter whose sum runs over the world
  // in rank order; two-stage: a reduce-scatter in the shard group, then an
  // all-reduce across the replica groups.
  bool ordered = hybrid && reduction == HybridReduction::Ordered;
  auto start = ReduceScatterStartOp::create(
      builder, loc, FutureType::get(ctx, shardType), flatGrad, ref,
      CommGroupAttr::get(ctx, CommGroup::shard),
      ordered ? CommGroupAttr::get(ctx, CommGroup::world) : CommGroupAttr(),
      mean);
  Value future = start.getResult();
  bool twoStage = hybrid && !ordered;
  finishers.emplace_back(completedAt, [=](OpBuilder &end) {
    auto g = WaitOp::create(end, loc, shardType, future);
    if (twoStage) {
      auto across = AllReduceStartOp::create(
          end, loc, FutureType::get(ctx, shardType), g.getResult(),
          CommGroupAttr::get(ctx, CommGroup::replicate), mean);
      g = WaitOp::create(end, loc, shardType, across.getResult());
    }
    g->setAttr(kReducedGradAttr, end.getUnitAttr());
    GradOp::create(end, loc, ref, toStored(end, g));
  });
}

void Shard::shardEvaluation(func::FuncOp eval, ArrayRef<Unit *> units) {
  func = eval;
  body = &eval.getBody().front();
  order.emplace(*body);
  reads.clear();
  viewOf.clear();
  viewsOfRead.clear();
  for (auto get : body->getOps<GetOp>())
    reads.try_emplace(get.getNameAttr().getAttr(), get);
  for (Unit *unit : units) {
    SmallVector<Value> memberReads;
    for (ParamOp p : unit->members)
      if (GetOp read = reads.lookup(p.getSymNameAttr()))
        memberReads.push_back(read.getResult());
    // The reads, and their views' uses, which read the gathered buffer.
    SmallVector<OpOperand *> uses;
    for (Value v : viewClosure(memberReads))
      for (OpOperand &use : v.getUses())
        uses.push_back(&use);
    gather(*unit, uses, /*recompute=*/false);
    for (ParamOp p : unit->members)
      if (GetOp read = reads.lookup(p.getSymNameAttr());
          read && read.use_empty()) {
        reads.erase(p.getSymNameAttr());
        read.erase();
      }
  }
}

LogicalResult Shard::run(ModuleOp module) {
  if (failed(checkOptions(module)))
    return failure();
  func = module.lookupSymbol<func::FuncOp>("train_step");
  if (!func)
    return module.emitError("no @train_step to shard (fsdp-append-loss and "
                            "fsdp-autodiff build it)");
  body = &func.getBody().front();
  order.emplace(*body);
  for (Operation &op : *body) {
    if (auto get = dyn_cast<GetOp>(op))
      reads.try_emplace(get.getNameAttr().getAttr(), get);
    if (auto grad = dyn_cast<GradOp>(op))
      if (!grads.try_emplace(grad.getParamAttr().getAttr(), grad).second)
        return grad.emitOpError("is the second gradient of ")
               << grad.getParamAttr();
  }
  if (!order->backwardStart() || grads.empty())
    return func.emitOpError("has no backward: run fsdp-autodiff before "
                            "fsdp-shard");
  if (!module.getOps<FlatParamOp>().empty())
    return module.emitError("is already sharded (it has flat parameters)");

  // Units, in the order the step first reads them; members in declaration
  // (state_dict) order, but that those the step views as complex come
  // first: view_as_complex needs an even offset, which their even sizes
  // (pairs) keep.
  llvm::MapVector<StringRef, Unit> units;
  SmallVector<ParamOp> ignored;
  SmallVector<ParamOp> members;
  for (ParamOp p : module.getOps<ParamOp>())
    members.push_back(p);
  std::stable_partition(members.begin(), members.end(), [&](ParamOp p) {
    GetOp read = reads.lookup(p.getSymNameAttr());
    return read && isViewedAsComplex(read.getResult());
  });
  for (ParamOp p : members) {
    if (!grads.count(p.getSymNameAttr()))
      continue; // never updated: stays whole
    if (p->hasAttr(kIgnoredAttr)) {
      ignored.push_back(p);
      continue;
    }
    auto unitAttr = p->getAttrOfType<StringAttr>(kUnitAttr);
    StringRef path = unitAttr ? unitAttr.getValue() : StringRef();
    Unit &unit = units[path];
    unit.path = path.str();
    Type elem = cast<ShapedType>(p.getType()).getElementType();
    if (!unit.members.empty() &&
        cast<ShapedType>(unit.members.front().getType()).getElementType() !=
            elem)
      return p.emitOpError("has element type ")
             << elem << " but the FSDP unit '" << path
             << "' it belongs to holds "
             << cast<ShapedType>(unit.members.front().getType())
                    .getElementType()
             << ": a flat parameter needs one dtype (wrap it in a unit of "
                "its own)";
    // Mixed precision: the type the step reads the parameter in.
    Type compute = elem;
    if (GetOp read = reads.lookup(p.getSymNameAttr()))
      compute = cast<ShapedType>(read.getType()).getElementType();
    if (!unit.members.empty() && unit.computeType != compute)
      return p.emitOpError("is read as ")
             << compute << " but the FSDP unit '" << path
             << "' it belongs to is read as " << unit.computeType
             << ": a unit's all-gather moves one dtype";
    unit.computeType = compute;
    unit.members.push_back(p);
    unit.offsets.push_back(unit.numel);
    unit.numel += cast<ShapedType>(p.getType()).getNumElements();
  }
  llvm::DenseMap<Unit *, int64_t> firstRead;
  SmallVector<Unit *> ordered;
  for (auto &entry : units) {
    Unit *unit = &entry.second;
    int64_t &first = firstRead[unit];
    first = std::numeric_limits<int64_t>::max();
    for (ParamOp p : unit->members)
      if (GetOp read = reads.lookup(p.getSymNameAttr()))
        for (Operation *user : read->getUsers())
          first = std::min(first, order->at(user));
    ordered.push_back(unit);
  }
  llvm::stable_sort(ordered, [&](Unit *a, Unit *b) {
    return firstRead.lookup(a) < firstRead.lookup(b);
  });

  OpBuilder symbols(func);
  MLIRContext *ctx = module.getContext();
  // Flat parameters' names differ (one per unit path): the module's names
  // before any is made are all a new one can collide with.
  SymbolTable symbolTable(module);
  for (Unit *unit : ordered) {
    SmallVector<Attribute> members;
    for (ParamOp p : unit->members)
      members.push_back(FlatSymbolRefAttr::get(p.getSymNameAttr()));
    int64_t padded = (unit->numel + groupSize - 1) / groupSize * groupSize;
    std::string name =
        unit->path.empty() ? "_flat_param" : unit->path + "._flat_param";
    if (symbolTable.lookup(name))
      return module.emitError("cannot name the flat parameter of unit '")
             << unit->path << "' " << name << ": the symbol exists";
    Type elem = cast<ShapedType>(unit->members.front().getType())
                    .getElementType();
    unit->flat = FlatParamOp::create(
        symbols, unit->members.front().getLoc(), name, unit->path,
        ArrayAttr::get(ctx, members), unit->offsets, unit->numel, padded,
        groupSize, elem, replicated());
    unit->offload = offloadParams || llvm::is_contained(offloadUnits, unit->path);
    unit->offloadOptim =
        !unit->offload && llvm::is_contained(offloadOptimUnits, unit->path);
    if (unit->offload)
      unit->flat->setAttr(kHostAttr, UnitAttr::get(ctx));
    if (unit->offloadOptim)
      unit->flat->setAttr(kHostOptimAttr, UnitAttr::get(ctx));
  }
  for (const auto *names : {&offloadUnits, &offloadOptimUnits})
    for (const std::string &name : *names)
      if (llvm::none_of(ordered, [&](Unit *u) { return u->path == name; }))
        return module.emitError("CPU offload of unit '")
               << name << "': no unit has that module path";

  // Views of one unit's parameters (a transposed weight) share its
  // gathered buffer: their uses count as uses of the unit, and the backward
  // takes the forward's again from its own gather.
  for (Unit *unit : ordered) {
    SmallVector<Value> memberReads;
    for (ParamOp p : unit->members)
      if (GetOp read = reads.lookup(p.getSymNameAttr()))
        memberReads.push_back(read.getResult());
    llvm::SetVector<Value> aliases = viewClosure(memberReads);
    SmallVector<Operation *> forwardViews;
    for (Value v : aliases.getArrayRef().drop_front(memberReads.size())) {
      derived.insert(v);
      viewsOf[unit].push_back(v);
      // The backward computes forward ones again; its own follow its reads.
      Operation *op = v.getDefiningOp();
      if (order->phase(op) == Phase::Forward &&
          (forwardViews.empty() || forwardViews.back() != op))
        forwardViews.push_back(op);
    }
    llvm::sort(forwardViews, [&](Operation *a, Operation *b) {
      return order->at(a) < order->at(b);
    });
    forwardViews.erase(llvm::unique(forwardViews), forwardViews.end());
    derivedOps[unit] = std::move(forwardViews);
  }

  // Each unit's uses in the forward and in the backward, and the units each
  // checkpointed region's recomputation reads.
  struct Uses {
    SmallVector<OpOperand *> forward, backward;
  };
  llvm::DenseMap<Unit *, Uses> usesOf;
  llvm::DenseMap<StringAttr, llvm::SmallPtrSet<Unit *, 4>> regionUnits;
  // The region a backward use belongs to: that of the recomputed op reading
  // the unit, or of the recomputed view (a weight transposed in the region)
  // it reads, which lives in the recomputation's buffer.
  auto regionOf = [&](OpOperand *use) {
    for (Operation *op : {use->getOwner(), use->get().getDefiningOp()})
      if (op)
        if (Operation *top = body->findAncestorOpInBlock(*op))
          if (auto region = top->getAttrOfType<StringAttr>(kRecomputeAttr))
            return region;
    return StringAttr();
  };
  for (Unit *unit : ordered) {
    Uses &uses = usesOf[unit];
    auto collect = [&](Value v) {
      for (OpOperand &use : v.getUses()) {
        (order->phase(use.getOwner()) == Phase::Forward ? uses.forward
                                                        : uses.backward)
            .push_back(&use);
        if (StringAttr region = regionOf(&use))
          regionUnits[region].insert(unit);
      }
    };
    for (ParamOp p : unit->members)
      if (GetOp read = reads.lookup(p.getSymNameAttr()))
        collect(read.getResult());
    for (Value v : viewsOf.lookup(unit))
      collect(v);
  }

  // Gathers, views and frees.
  for (Unit *unit : ordered) {
    SmallVector<OpOperand *> forwardUses = usesOf[unit].forward;
    SmallVector<OpOperand *> backwardUses = usesOf[unit].backward;
    // A recomputation that reads several units gathers each for its own
    // reads and frees it after them, as FSDP's hooks do when the checkpointed
    // forward runs again in the backward: held to the unit's own backward,
    // the region's units would all be gathered at once.
    SmallVector<OpOperand *> recomputeUses;
    llvm::erase_if(backwardUses, [&](OpOperand *use) {
      StringAttr region = regionOf(use);
      if (!region || regionUnits.lookup(region).size() < 2)
        return false;
      recomputeUses.push_back(use);
      return true;
    });
    switch (strategy) {
    case Strategy::FULL_SHARD:
    case Strategy::HYBRID_SHARD:
      // Resharded after forward, gathered again for backward (and for a
      // recomputation of several units).
      gather(*unit, forwardUses, /*recompute=*/false);
      gather(*unit, recomputeUses, /*recompute=*/true);
      gather(*unit, backwardUses, /*recompute=*/true);
      break;
    case Strategy::SHARD_GRAD_OP:
    case Strategy::NO_SHARD:
    case Strategy::OSS:
    case Strategy::SHARDED_DDP: {
      // Kept from the forward to the last backward use.
      SmallVector<OpOperand *> all(forwardUses);
      all.append(recomputeUses);
      all.append(backwardUses);
      gather(*unit, all, /*recompute=*/false);
      break;
    }
    }
    for (ParamOp p : unit->members)
      if (GetOp read = reads.lookup(p.getSymNameAttr()); read && read.use_empty()) {
        reads.erase(p.getSymNameAttr());
        read.erase();
      }
  }

  // Gradient reduction, started as each unit's gradient completes.
  for (Unit *unit : ordered)
    reduceGradients(*unit);
  auto mean = ReduceOpAttr::get(ctx, ReduceOp::mean);
  for (ParamOp p : ignored) {
    GradOp grad = grads.lookup(p.getSymNameAttr());
    OpBuilder builder(grad);
    Location loc = grad.getLoc();
    Value input = aten::ATenBuilder(builder, loc)
                      .cast(grad.getValue(), reduceType(grad.getValue()));
    auto type = cast<RankedTensorType>(input.getType());
    auto start = AllReduceStartOp::create(
        builder, loc, FutureType::get(ctx, type), input,
        CommGroupAttr::get(ctx, CommGroup::world), mean);
    auto ref = grad.getParamAttr();
    Type stored = cast<ShapedType>(p.getType()).getElementType();
    Value future = start.getResult();
    finishers.emplace_back(order->at(grad), [=](OpBuilder &end) {
      auto g = WaitOp::create(end, loc, type, future);
      g->setAttr(kReducedGradAttr, end.getUnitAttr());
      GradOp::create(end, loc, ref,
                     aten::ATenBuilder(end, loc).cast(g, stored));
    });
    grad.erase();
  }
  // Waited in the order they started.
  llvm::stable_sort(finishers, [](const auto &a, const auto &b) {
    return a.first < b.first;
  });
  OpBuilder end(body->getTerminator());
  for (auto &finish : finishers)
    finish.second(end);

  if (auto eval = module.lookupSymbol<func::FuncOp>(kEvalStepName))
    shardEvaluation(eval, ordered);

  Builder b(ctx);
  module->setAttr(kWorldSizeAttr, b.getI64IntegerAttr(worldSize));
  module->setAttr(kShardGroupSizeAttr, b.getI64IntegerAttr(groupSize));
  module->setAttr(kShardingAttr, ShardingStrategyAttr::get(ctx, strategy));
  if (backend != "gloo")
    module->setAttr(kBackendAttr, b.getStringAttr(backend));
  return success();
}

} // namespace
