//===- MemoryModel.cpp - the bytes a rank holds during a step --------------===//
//
// A simulation of fsdp-run's accounting over the step's ops, in plan order.
// Every value that becomes a slot refers to a storage; a storage counts from
// the first holder (slot, state entry, collective) to the last. Slots are
// released where the plan emitter releases them: after their last use, and
// at once for results nobody reads. What each collective holds and returns
// follows the runtime's communicators (runtime/lib/Communicator.cpp).
//
//===----------------------------------------------------------------------===//

#include "fsdp/Analysis/MemoryModel.h"

#include "fsdp/Dialect/ATen/IR/ATenDialect.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/runtime/PlanSchema.h"

#include "llvm/ADT/TypeSwitch.h"

#include <algorithm>
#include <numeric>
#include <optional>

using namespace mlir;
using namespace fsdp;

StringRef fsdp::memoryCategoryName(MemoryCategory category) {
  switch (category) {
  case MemoryCategory::State:
    return "state";
  case MemoryCategory::Inputs:
    return "inputs";
  case MemoryCategory::GatheredParameters:
    return "gathered parameters";
  case MemoryCategory::Activations:
    return "activations";
  case MemoryCategory::Gradients:
    return "gradients";
  case MemoryCategory::CommunicationBuffers:
    return "communication buffers";
  case MemoryCategory::Temporaries:
    return "temporaries";
  }
  llvm_unreachable("every category has a name");
}

//===----------------------------------------------------------------------===//
// Layouts: strides as ATen computes them
//===----------------------------------------------------------------------===//

namespace {

using Dims = SmallVector<int64_t>;

/// Sizes and strides (in elements) of a tensor.
struct Layout {
  Dims sizes, strides;
};

Dims contiguousStrides(ArrayRef<int64_t> sizes) {
  Dims strides(sizes.size());
  int64_t stride = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    strides[d] = stride;
    stride *= std::max<int64_t>(sizes[d], 1);
  }
  return strides;
}

Layout contiguous(ArrayRef<int64_t> sizes) {
  return {Dims(sizes), contiguousStrides(sizes)};
}

int64_t numel(ArrayRef<int64_t> sizes) {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t(1),
                         std::multiplies<int64_t>());
}

/// ATen's TensorImpl::is_contiguous (dims of size 1 have any stride).
bool isContiguous(const Layout &l) {
  if (numel(l.sizes) == 0)
    return true;
  int64_t expected = 1;
  for (int64_t d = static_cast<int64_t>(l.sizes.size()) - 1; d >= 0; --d) {
    if (l.sizes[d] == 1)
      continue;
    if (l.strides[d] != expected)
      return false;
    expected *= l.sizes[d];
  }
  return true;
}

/// ATen's is_non_overlapping_and_dense.
bool isNonOverlappingAndDense(const Layout &l) {
  size_t dim = l.sizes.size();
  if (dim == 1)
    return l.sizes[0] < 2 || l.strides[0] == 1;
  SmallVector<size_t> perm(dim);
  std::iota(perm.begin(), perm.end(), 0);
  std::sort(perm.begin(), perm.end(), [&](size_t a, size_t b) {
    if (l.sizes[a] < 2)
      return false;
    if (l.sizes[b] < 2)
      return true;
    return l.strides[a] < l.strides[b];
  });
  int64_t required = 1;
  for (size_t d : perm) {
    if (l.sizes[d] < 2)
      return true;
    if (l.strides[d] != required)
      return false;
    required *= l.sizes[d];
  }
  return true;
}

/// ATen's computeStride: the strides of `shape` viewing `from`'s storage,
/// if a view can (else reshape copies).
std::optional<Dims> viewStrides(const Layout &from, ArrayRef<int64_t> shape) {
  ArrayRef<int64_t> oldShape = from.sizes, oldStride = from.strides;
  Dims newStride(shape.size());
  if (oldShape.empty()) {
    std::fill(newStride.begin(), newStride.end(), 1);
    return newStride;
  }
  int64_t count = numel(oldShape);
  if (count == 0 && oldShape == shape)
    return Dims(oldStride);
  if (count == 0) {
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d)
      newStride[d] = d == static_cast<int64_t>(shape.size()) - 1
                         ? 1
                         : std::max<int64_t>(shape[d + 1], 1) * newStride[d + 1];
    return newStride;
  }
  int64_t viewD = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunkBase = oldStride.back();
  int64_t tensorNumel = 1, viewNumel = 1;
  for (int64_t t = static_cast<int64_t>(oldShape.size()) - 1; t >= 0; --t) {
    tensorNumel *= oldShape[t];
    if (t == 0 || (oldShape[t - 1] != 1 &&
                   oldStride[t - 1] != tensorNumel * chunkBase)) {
      while (viewD >= 0 && (viewNumel < tensorNumel || shape[viewD] == 1)) {
        newStride[viewD] = viewNumel * chunkBase;
        viewNumel *= shape[viewD];
        --viewD;
      }
      if (viewNumel != tensorNumel)
        return std::nullopt;
      if (t > 0) {
        chunkBase = oldStride[t - 1];
        tensorNumel = 1;
        viewNumel = 1;
      }
    }
  }
  if (viewD != -1)
    return std::nullopt;
  return newStride;
}

/// The layout of a TensorIterator result of `shape` over `operands`
/// (broadcast to it): contiguous where every operand is, else ordered as
/// the operands' strides order the dimensions (TensorIteratorBase's
/// reorder_dimensions and allocate_or_resize_outputs).
Layout tensorIteratorLayout(ArrayRef<int64_t> shape,
                            ArrayRef<const Layout *> operands) {
  size_t ndim = shape.size();
  bool sameShape = llvm::all_of(operands, [&](const Layout *l) {
    return ArrayRef<int64_t>(l->sizes) == shape;
  });
  if (operands.empty() || ndim == 0)
    return contiguous(shape);
  if (sameShape) {
    if (llvm::all_of(operands, [](const Layout *l) { return isContiguous(*l); }))
      return contiguous(shape);
    const Layout &first = *operands.front();
    if (llvm::all_of(operands, [&](const Layout *l) {
          return isNonOverlappingAndDense(*l) && l->strides == first.strides;
        }))
      return first;
  }
  // Each operand's strides broadcast to `shape` (0 where broadcast).
  SmallVector<Dims> strides;
  for (const Layout *l : operands) {
    Dims s(ndim, 0);
    size_t offset = ndim - l->sizes.size();
    for (size_t d = 0; d < l->sizes.size(); ++d)
      if (l->sizes[d] == shape[offset + d])
        s[offset + d] = l->strides[d];
    strides.push_back(std::move(s));
  }
  // perm[0] is the fastest-moving dimension.
  SmallVector<size_t> perm(ndim);
  for (size_t i = 0; i < ndim; ++i)
    perm[i] = ndim - 1 - i;
  auto shouldSwap = [&](size_t dim0, size_t dim1) {
    for (const Dims &s : strides) {
      int64_t s0 = s[dim0], s1 = s[dim1];
      if (s0 == 0 || s1 == 0)
        continue;
      if (s0 < s1)
        return -1;
      if (s0 > s1)
        return 1;
      if (shape[dim0] > shape[dim1])
        return 1;
    }
    return 0;
  };
  for (size_t i = 1; i < ndim; ++i) {
    size_t dim1 = i;
    for (int64_t dim0 = static_cast<int64_t>(i) - 1; dim0 >= 0; --dim0) {
      int comparison = shouldSwap(perm[dim0], perm[dim1]);
      if (comparison > 0) {
        std::swap(perm[dim0], perm[dim1]);
        dim1 = dim0;
      } else if (comparison < 0) {
        break;
      }
    }
  }
  Layout out{Dims(shape), Dims(ndim)};
  int64_t stride = 1;
  for (size_t i = 0; i < ndim; ++i) {
    out.strides[perm[i]] = stride;
    stride *= shape[perm[i]];
  }
  return out;
}

/// ATen's is_channels_last_strides_2d: whether a 4-D tensor's strides are
/// like NHWC's (what suggest_memory_format() reports as ChannelsLast).
bool isChannelsLastLike(const Layout &l) {
  if (l.sizes.size() != 4 || l.strides[1] == 0)
    return false;
  int64_t min = 0;
  for (int d : {1, 3, 2, 0}) {
    if (l.sizes[d] == 0 || l.strides[d] < min)
      return false;
    if (d == 0 && min == l.strides[1])
      return false;
    min = l.strides[d];
    if (l.sizes[d] > 1)
      min *= l.sizes[d];
  }
  return true;
}

/// NHWC strides of NCHW sizes.
Layout channelsLast(ArrayRef<int64_t> sizes) {
  int64_t c = sizes[1], h = sizes[2], w = sizes[3];
  return {Dims(sizes), Dims{h * w * c, 1, w * c, c}};
}

/// The layout of a copy with preserve_format (clone, *_like, aten::to):
/// the same strides where the input is non-overlapping and dense.
Layout preservedLayout(const Layout &input) {
  if (isNonOverlappingAndDense(input))
    return input;
  const Layout *operands[] = {&input};
  return tensorIteratorLayout(input.sizes, operands);
}


std::optional<int64_t> intArg(aten::CallOp call, size_t index) {
  if (index >= call.getArgs().size())
    return std::nullopt;
  if (auto i = dyn_cast<IntegerAttr>(call.getArgs()[index]))
    return i.getInt();
  return std::nullopt;
}

std::optional<double> floatArg(aten::CallOp call, size_t index) {
  if (index >= call.getArgs().size())
    return std::nullopt;
  if (auto f = dyn_cast<FloatAttr>(call.getArgs()[index]))
    return f.getValueAsDouble();
  if (auto i = dyn_cast<IntegerAttr>(call.getArgs()[index]))
    return static_cast<double>(i.getInt());
  return std::nullopt;
}

bool boolArg(aten::CallOp call, size_t index, bool otherwise) {
  if (index >= call.getArgs().size())
    return otherwise;
  if (auto b = dyn_cast<BoolAttr>(call.getArgs()[index]))
    return b.getValue();
  return otherwise;
}

int64_t wrapDim(int64_t dim, size_t rank) {
  return dim < 0 ? dim + static_cast<int64_t>(rank) : dim;
}

//===----------------------------------------------------------------------===//
// The simulation
//===----------------------------------------------------------------------===//

struct Storage {
  int64_t bytes = 0;
  int64_t refs = 0;
  MemoryCategory category = MemoryCategory::Temporaries;
  /// Held by something outside the step's slots (a constant, the batch):
  /// never written in place.
  bool pinned = false;
  /// CPU offload: in host memory, counted apart from the device's bytes.
  bool host = false;
  /// An aten.constant's: fsdp-run holds it for the whole run.
  bool constant = false;
};

/// One ATen call, as the case analysis of its results reads it.
struct CallSite {
  mutable aten::CallOp op; // a handle: its accessors are not const
  StringRef name, overload;
  /// The first operand, if any: what views and copies are of.
  Value self;
  /// self's layout. A copy: defining results may grow layoutOf.
  Layout in;
  /// Each written argument's storage (its own, or a copy's) and layout.
  SmallVector<std::pair<int, Layout>> written;
  /// Backward kernels with an output mask (convolution_backward,
  /// native_layer_norm_backward) return no tensor where it says false.
  ArrayAttr outputMask;
};

class Simulation {
public:
  Simulation(ModuleOp module, func::FuncOp step, bool operandLayouts)
      : module(module), step(step), operandLayouts(operandLayouts) {}
  FailureOr<MemoryPrediction> run();

private:
  int fresh(int64_t bytes, MemoryCategory category, bool pinned = false) {
    storages.push_back({bytes, 0, category, pinned});
    return static_cast<int>(storages.size()) - 1;
  }
  void count(int storage);
  void uncount(int storage);
  /// `value` becomes a slot that holds `storage` with `layout`.
  void define(Value value, int storage, Layout layout) {
    // A new storage lives where its value does (CPU offload).
    if (storages[storage].refs == 0 && hostSet.contains(value))
      storages[storage].host = true;
    count(storage);
    storageOf[value] = storage;
    layoutOf[value] = std::move(layout);
  }
  void release(Value value);
  int groupSize(CommGroup group) const;
  MemoryCategory categoryOf(Operation *op, Value result) const;

  // Before the first instruction: roles, the state, the batch.
  void noteUses(Block &body);
  void declareState();
  void declareInputs(Block &body);

  // One instruction each: what it holds, then what dies after it.
  LogicalResult simulateOp(Operation &op);
  LogicalResult simulate(GetOp get);
  LogicalResult simulate(UpdateOp update);
  LogicalResult simulate(aten::ConstantOp constant);
  LogicalResult simulate(aten::CallOp op);
  LogicalResult simulate(WaitOp wait);
  LogicalResult simulate(ViewOp view);
  LogicalResult simulate(LocalShardOp local);
  LogicalResult defineView(Value result, Value buffer);
  void freshResults(Operation *op);
  /// With operandLayouts: the current instruction's kernel operands as
  /// laid out.
  void recordOperands(ValueRange operands);
  void copyToOtherMemory(Operation *op);
  void releaseDead(Operation &op, Operation *terminator);
  void collectUnits();

  // Collectives.
  void collective(Operation *op);
  SmallVector<int> buffersOf(AllGatherStartOp gather);
  SmallVector<int> buffersOf(ReduceScatterStartOp scatter);
  SmallVector<int> buffersOf(AllReduceStartOp reduce);
  /// What a reduction sends: its input's storage, or a contiguous copy of
  /// `bytes` where the input is not contiguous.
  int sentBuffer(Value input, int64_t bytes);
  /// What Gloo's exchange of a reduction holds: `send` (the `bytes` it
  /// sends, n chunks), a buffer for the other ranks' chunks, and for the
  /// mean its divisor; nothing where there is nothing to move.
  SmallVector<int> glooExchange(int send, int64_t bytes, int n, Type element,
                                bool mean);

  // ATen calls (simulate(aten::CallOp)): one step per way a result gets
  // its storage.
  SmallVector<std::pair<int, Layout>> writtenArguments(aten::CallOp op);
  void callResult(const CallSite &c, unsigned r);
  void freshResult(aten::CallOp op, unsigned r, Layout layout);
  void aliasResult(const CallSite &c, unsigned r, Layout layout,
                   bool view = true);
  void broadcastResult(const CallSite &c, unsigned r, const Dims &shape);
  void contiguousResult(const CallSite &c, unsigned r, const Dims &shape);
  void reshapeResult(const CallSite &c, unsigned r, const Dims &shape);
  void conversionResult(const CallSite &c, unsigned r);
  void dropoutResult(const CallSite &c, unsigned r);
  void viewResult(const CallSite &c, unsigned r, const Dims &shape);
  void lossResult(const CallSite &c, unsigned r, const Dims &shape);
  void convolutionResult(const CallSite &c, unsigned r, const Dims &shape);
  void kernelResult(const CallSite &c, unsigned r, const Dims &shape);
  bool flashAttentionOnCpu(aten::CallOp op);

  ModuleOp module;
  /// Lookups of the state's symbols, each not a walk of the module.
  SymbolTableCollection symbols;
  func::FuncOp step;
  std::optional<StepOrder> order;
  llvm::SmallVector<Storage> storages;
  llvm::DenseMap<Value, int> storageOf;
  llvm::DenseMap<Value, Layout> layoutOf;
  /// Values that are views of another tensor (not the tensor itself).
  llvm::DenseSet<Value> views;
  /// What a collective's future holds until it is released.
  llvm::DenseMap<Value, SmallVector<int>> held;
  /// Futures whose wait returns the first buffer they hold.
  llvm::DenseMap<Value, bool> returnsHeld;
  /// Values the step reduces or hands the optimizer, and new state.
  llvm::DenseMap<Value, MemoryCategory> roles;
  llvm::DenseMap<Value, Operation *> lastUse;
  /// The state, as fsdp-run holds it between steps: one storage per entry.
  llvm::StringMap<int> state;
  llvm::StringMap<Type> stateType;
  const bool operandLayouts; // record each call's operands (callOperands)
  int64_t live = 0;
  int64_t constantLive = 0; // constants' bytes live, in either memory
  int64_t hostLive = 0; // CPU offload: bytes live in host memory
  llvm::DenseSet<Value> hostSet; // the step's values in host memory
  std::array<int64_t, kNumMemoryCategories> byCategory{};
  int64_t current = -1; // the instruction being simulated
  int64_t currentPeak = 0, currentHostPeak = 0;
  MemoryPrediction out;
  int64_t worldSize = 1, shardGroupSize = 1;
  // NCCL's collectives (fsdp.backend): a reduction writes its result into
  // a buffer of the result's size, which the wait returns; Gloo's receive
  // the other ranks' contributions and sum them with the rank's own into a
  // new tensor.
  bool nccl = false;
};

void Simulation::count(int storage) {
  Storage &s = storages[storage];
  if (s.refs++ > 0)
    return;
  if (s.constant)
    constantLive += s.bytes;
  if (s.host) {
    hostLive += s.bytes;
    out.hostPeakBytes = std::max(out.hostPeakBytes, hostLive);
    currentHostPeak = std::max(currentHostPeak, hostLive);
    return;
  }
  live += s.bytes;
  byCategory[static_cast<size_t>(s.category)] += s.bytes;
  currentPeak = std::max(currentPeak, live);
  if (live > out.peakBytes) {
    out.peakBytes = live;
    out.peakInstruction = current;
    out.breakdown = byCategory;
  }
}

void Simulation::uncount(int storage) {
  Storage &s = storages[storage];
  if (--s.refs > 0)
    return;
  if (s.constant)
    constantLive -= s.bytes;
  if (s.host) {
    hostLive -= s.bytes;
    return;
  }
  live -= s.bytes;
  byCategory[static_cast<size_t>(s.category)] -= s.bytes;
}

void Simulation::release(Value value) {
  auto it = storageOf.find(value);
  if (it != storageOf.end()) {
    uncount(it->second);
    storageOf.erase(it);
  }
  auto h = held.find(value);
  if (h != held.end()) {
    for (int storage : h->second)
      uncount(storage);
    held.erase(h);
  }
}

int Simulation::groupSize(CommGroup group) const {
  return static_cast<int>(commGroupSize(group, worldSize, shardGroupSize));
}

MemoryCategory Simulation::categoryOf(Operation *op, Value result) const {
  auto role = roles.find(result);
  if (role != roles.end())
    return role->second;
  return order->phase(op) == Phase::Forward ? MemoryCategory::Activations
                                            : MemoryCategory::Temporaries;
}

/// The strides the importer recorded for schema result `r` of `op`
/// (`aten.result_strides`: a dense, non-contiguous kernel result).
std::optional<Dims> resultStrides(aten::CallOp op, unsigned r) {
  auto all = op->getAttrOfType<ArrayAttr>("aten.result_strides");
  if (!all || r >= all.size())
    return std::nullopt;
  auto strides = dyn_cast<DenseI64ArrayAttr>(all[r]);
  if (!strides || strides.size() != static_cast<int64_t>(cast<RankedTensorType>(
                                        op.getResult(r).getType())
                                        .getRank()))
    return std::nullopt;
  return Dims(strides.asArrayRef());
}

/// Whether ATen's CPU attention takes its flash kernel for this call
/// (sdp_utils_cpp's use_flash_attention_cpp): no dropout, 4-D query, key
/// and value of one batch and head count and one head size, each with unit
/// stride in its last dimension. The flash kernel's output is laid out as
/// the query (empty_like); the math path's is contiguous, and so is the
/// meta kernel's, which the importer records.
bool Simulation::flashAttentionOnCpu(aten::CallOp op) {
  std::optional<double> dropout = floatArg(op, 4);
  if (!dropout || *dropout != 0.0 || op.getNumOperands() < 3)
    return false;
  // A mask that requires grad (operand 3) takes the math kernel.
  if (auto requiring =
          op->getAttrOfType<DenseI64ArrayAttr>(aten::kRequiresGradAttr))
    if (op.getNumOperands() > 3 && llvm::is_contained(requiring.asArrayRef(), 3))
      return false;
  SmallVector<const Layout *> qkv;
  for (unsigned i = 0; i < 3; ++i)
    qkv.push_back(&layoutOf[op.getOperand(i)]);
  for (const Layout *l : qkv)
    if (l->sizes.size() != 4 || l->strides.back() != 1 ||
        l->sizes[0] != qkv[0]->sizes[0] || l->sizes[1] != qkv[0]->sizes[1] ||
        l->sizes[3] != qkv[0]->sizes[3] || l->sizes[2] == 0)
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// ATen calls
//===----------------------------------------------------------------------===//

/// The output mask of a backward kernel that has one: its last argument, a
/// list of one bool per schema result.
ArrayAttr outputMaskOf(aten::CallOp op) {
  if (op.getArgs().empty())
    return ArrayAttr();
  auto last = dyn_cast<ArrayAttr>(op.getArgs()[op.getArgs().size() - 1]);
  if (last && last.size() == op.getNumSchemaResults() && !last.empty() &&
      llvm::all_of(last, [](Attribute a) { return isa<BoolAttr>(a); }))
    return last;
  return ArrayAttr();
}

/// The layout of `shape` viewing `in`'s storage, or contiguous strides
/// where no view can.
Layout viewedLayout(const Layout &in, const Dims &shape) {
  std::optional<Dims> strides = viewStrides(in, shape);
  return Layout{shape, strides ? *strides : contiguousStrides(shape)};
}

/// `from` expanded to `shape`: stride 0 along the broadcast dimensions.
Layout expandedLayout(const Layout &from, const Dims &shape) {
  Layout layout{shape, Dims(shape.size(), 0)};
  size_t offset = shape.size() - from.sizes.size();
  for (size_t d = 0; d < from.sizes.size(); ++d)
    if (from.sizes[d] == shape[offset + d])
      layout.strides[offset + d] = from.strides[d];
  return layout;
}

/// View ops whose result permutes the input's dimensions.
bool isPermutation(StringRef name) {
  return name == "aten::t" || name == "aten::transpose" ||
         name == "aten::swapaxes" || name == "aten::swapdims" ||
         name == "aten::numpy_T" || name == "aten::mT" ||
         name == "aten::adjoint" || name == "aten::matrix_H" ||
         name == "aten::mH" || name == "aten::permute" ||
         name == "aten::movedim";
}

/// aten::movedim's permutation: the result's dims, moved ones at their
/// destinations, the others in order.
SmallVector<int64_t> movedimPermutation(aten::CallOp op, size_t rank) {
  SmallVector<int64_t> src, dst;
  if (auto s = intArg(op, 1); s && intArg(op, 2)) {
    src.push_back(wrapDim(*s, rank));
    dst.push_back(wrapDim(*intArg(op, 2), rank));
  } else if (auto sa = dyn_cast<ArrayAttr>(op.getArgs()[1])) {
    for (auto [a, b] : llvm::zip(sa, cast<ArrayAttr>(op.getArgs()[2]))) {
      src.push_back(wrapDim(cast<IntegerAttr>(a).getInt(), rank));
      dst.push_back(wrapDim(cast<IntegerAttr>(b).getInt(), rank));
    }
  }
  SmallVector<int64_t> result(rank, -1);
  for (auto [s, d] : llvm::zip(src, dst))
    result[d] = s;
  size_t next = 0;
  for (size_t d = 0; d < rank; ++d) {
    if (result[d] >= 0)
      continue;
    while (llvm::is_contained(src, static_cast<int64_t>(next)))
      ++next;
    result[d] = next++;
  }
  return result;
}

/// The input dimension each result dimension of a permuting view is.
SmallVector<int64_t> permutation(aten::CallOp op, StringRef name,
                                 size_t rank) {
  SmallVector<int64_t> perm(rank);
  std::iota(perm.begin(), perm.end(), 0);
  if (name == "aten::permute") {
    if (auto dims = dyn_cast<ArrayAttr>(op.getArgs()[1]))
      for (size_t d = 0; d < rank && d < dims.size(); ++d)
        perm[d] = wrapDim(cast<IntegerAttr>(dims[d]).getInt(), rank);
    return perm;
  }
  if (name == "aten::movedim")
    return movedimPermutation(op, rank);
  if (rank < 2)
    return perm;
  int64_t d0 = rank - 2, d1 = rank - 1;
  if (name == "aten::transpose" || name == "aten::swapaxes" ||
      name == "aten::swapdims") {
    d0 = wrapDim(intArg(op, 1).value_or(0), rank);
    d1 = wrapDim(intArg(op, 2).value_or(1), rank);
  } else if (name == "aten::numpy_T") {
    std::reverse(perm.begin(), perm.end());
    d0 = d1 = 0;
  }
  std::swap(perm[d0], perm[d1]);
  return perm;
}

Layout unfoldLayout(aten::CallOp op, const Layout &in, const Dims &shape) {
  int64_t dim = wrapDim(intArg(op, 1).value_or(0), in.sizes.size());
  int64_t stepSize = intArg(op, 3).value_or(1);
  Layout layout;
  layout.sizes = shape;
  layout.strides = in.strides;
  if (in.sizes.empty()) {
    layout.strides = {1};
  } else {
    layout.strides[dim] *= stepSize;
    layout.strides.push_back(in.strides[dim]);
  }
  return layout;
}

Layout diagonalLayout(aten::CallOp op, const Layout &in, const Dims &shape) {
  size_t rank = in.sizes.size();
  int64_t d1 = wrapDim(intArg(op, 2).value_or(0), rank);
  int64_t d2 = wrapDim(intArg(op, 3).value_or(1), rank);
  Layout layout;
  for (size_t d = 0; d < rank; ++d)
    if (static_cast<int64_t>(d) != d1 && static_cast<int64_t>(d) != d2)
      layout.strides.push_back(in.strides[d]);
  layout.strides.push_back(in.strides[d1] + in.strides[d2]);
  layout.sizes = shape;
  return layout;
}

Layout asStridedLayout(aten::CallOp op, const Dims &shape) {
  Layout layout;
  layout.sizes = shape;
  if (auto strides = dyn_cast<ArrayAttr>(op.getArgs()[2]))
    for (Attribute s : strides)
      layout.strides.push_back(cast<IntegerAttr>(s).getInt());
  else
    layout.strides = contiguousStrides(shape);
  return layout;
}

/// Views between complex elements and their real parts, whose strides count
/// elements of another size: view_as_real ([..., 2], the parts adjacent),
/// view_as_complex and real/imag of a complex tensor. False for others.
bool complexViewLayout(aten::CallOp op, StringRef name, const Layout &in,
                       const Dims &shape, Layout &out) {
  auto input = dyn_cast<RankedTensorType>(op.getOperand(0).getType());
  if (!input)
    return false;
  bool fromComplex = isa<ComplexType>(input.getElementType());
  if (name == "aten::view_as_real" && fromComplex) {
    out.sizes = shape;
    for (int64_t s : in.strides)
      out.strides.push_back(2 * s);
    out.strides.push_back(1);
    return true;
  }
  if (name == "aten::view_as_complex" && !fromComplex && !in.strides.empty()) {
    out.sizes = shape;
    for (int64_t s : ArrayRef<int64_t>(in.strides).drop_back())
      out.strides.push_back(s / 2);
    return true;
  }
  if ((name == "aten::real" || name == "aten::imag") && fromComplex) {
    out.sizes = shape;
    for (int64_t s : in.strides)
      out.strides.push_back(2 * s);
    return true;
  }
  return false;
}

/// The layout of view op `name`'s result of `shape` over `in`. It may have
/// the wrong rank where the op's arguments are not what they should be.
Layout viewLayout(aten::CallOp op, StringRef name, const Layout &in,
                  const Dims &shape) {
  if (isPermutation(name)) {
    Layout layout;
    layout.sizes = shape;
    for (int64_t d : permutation(op, name, in.sizes.size()))
      layout.strides.push_back(in.strides[d]);
    return layout;
  }
  if (name == "aten::expand" || name == "aten::expand_as" ||
      name == "aten::broadcast_to")
    return expandedLayout(in, shape);
  if (name == "aten::select" || name == "aten::unbind") {
    int64_t dim = wrapDim(intArg(op, 1).value_or(0), in.sizes.size());
    Layout layout = in;
    layout.sizes.erase(layout.sizes.begin() + dim);
    layout.strides.erase(layout.strides.begin() + dim);
    return layout;
  }
  if (name == "aten::slice") {
    int64_t dim = wrapDim(intArg(op, 1).value_or(0), in.sizes.size());
    Layout layout = in;
    layout.sizes = shape;
    layout.strides[dim] *= intArg(op, 4).value_or(1);
    return layout;
  }
  if (name == "aten::narrow" || name == "aten::split" ||
      name == "aten::unsafe_split" ||
      name == "aten::unsafe_split_with_sizes" ||
      name == "aten::unsafe_chunk" || name == "aten::split_with_sizes" ||
      name == "aten::chunk" || name == "aten::tensor_split" ||
      name == "aten::hsplit" || name == "aten::vsplit" ||
      name == "aten::dsplit")
    return Layout{shape, in.strides};
  if (name == "aten::unfold")
    return unfoldLayout(op, in, shape);
  if (name == "aten::diagonal")
    return diagonalLayout(op, in, shape);
  if (name == "aten::as_strided")
    return asStridedLayout(op, shape);
  if (Layout complex; complexViewLayout(op, name, in, shape, complex))
    return complex;
  if (shape == in.sizes)
    return in; // detach, alias, view.dtype of a same-size type
  return viewedLayout(in, shape); // view, unflatten, squeeze, unsqueeze, ...
}

/// Losses that reduce their pointwise result in its own buffer: the
/// scalar keeps the unreduced storage (ATen's apply_loss_reduction).
bool reducesInOwnBuffer(aten::CallOp op, StringRef name) {
  return (name == "aten::mse_loss" || name == "aten::smooth_l1_loss" ||
          name == "aten::binary_cross_entropy" ||
          name == "aten::soft_margin_loss") &&
         intArg(op, op.getArgs().size() -
                        (name == "aten::smooth_l1_loss" ? 2 : 1))
                 .value_or(0) != 0;
}

Dims resultShape(aten::CallOp op, unsigned r) {
  return Dims(cast<RankedTensorType>(op.getResult(r).getType()).getShape());
}

/// The results of a call: each shares an operand's storage (a view, or an
/// op that returns its input when it can) or has a storage of its own, laid
/// out as ATen lays it out.
void Simulation::recordOperands(ValueRange operands) {
  if (!operandLayouts)
    return;
  out.callOperands.resize(current + 1);
  for (Value operand : operands) {
    auto type = cast<ShapedType>(operand.getType());
    Layout l = layoutOf.lookup(operand);
    if (l.sizes != ArrayRef<int64_t>(type.getShape()))
      l = contiguous(type.getShape());
    out.callOperands[current].push_back(
        {l.sizes, l.strides, type.getElementType()});
  }
}

LogicalResult Simulation::simulate(aten::CallOp op) {
  recordOperands(op.getOperands());
  CallSite c;
  c.op = op;
  c.name = op.getOpName();
  c.overload = op.getOverload();
  c.self = op.getNumOperands() ? op.getOperand(0) : Value();
  c.in = c.self ? layoutOf.lookup(c.self) : Layout();
  c.written = writtenArguments(op);
  c.outputMask = outputMaskOf(op);
  unsigned numSchema = op.getNumSchemaResults();
  for (unsigned r = 0; r < numSchema; ++r)
    callResult(c, r);
  // Results the kernel returns as views of a tensor of its own (the
  // importer's `aten.internal_views`: einsum's permuted product): their
  // base holds the storage too, so it is never written in place.
  if (auto internal = op->getAttrOfType<DenseI64ArrayAttr>("aten.internal_views"))
    for (int64_t r : internal.asArrayRef())
      if (r >= 0 && r < numSchema)
        views.insert(op.getResult(r));
  for (auto [k, w] : llvm::enumerate(c.written))
    define(op.getResult(numSchema + k), w.first, w.second);
  return success();
}

/// The written arguments: in place where the argument dies here, is passed
/// once, and nothing else holds its storage; else into a copy.
SmallVector<std::pair<int, Layout>>
Simulation::writtenArguments(aten::CallOp op) {
  SmallVector<std::pair<int, Layout>> written;
  auto mutates = op.getMutates();
  if (!mutates)
    return written;
  SmallVector<int64_t> firstOperand = argumentOperands(op);
  Operation *terminator = step.getBody().front().getTerminator();
  for (int64_t a : *mutates) {
    Value arg = op.getOperand(firstOperand[a]);
    const Layout &layout = layoutOf[arg];
    int storage = storageOf.lookup(arg);
    bool dies = lastUse.lookup(arg) == op.getOperation() &&
                !llvm::is_contained(terminator->getOperands(), arg);
    bool once = llvm::count(op.getOperands(), arg) == 1;
    if (dies && once && storages[storage].refs == 1 && !views.contains(arg) &&
        !storages[storage].pinned) {
      written.push_back({storage, layout});
    } else {
      Value result = op.getResult(op.getNumSchemaResults() + written.size());
      int copy = fresh(tensorBytes(arg.getType()), categoryOf(op, result));
      written.push_back({copy, preservedLayout(layout)});
    }
  }
  return written;
}

/// Schema result `r` of a call: the first case that applies decides.
void Simulation::callResult(const CallSite &c, unsigned r) {
  StringRef name = c.name, overload = c.overload;
  Dims shape = resultShape(c.op, r);
  if (c.outputMask && !cast<BoolAttr>(c.outputMask[r]).getValue()) {
    Value result = c.op.getResult(r);
    define(result, fresh(0, categoryOf(c.op, result)), contiguous(shape));
    return;
  }
  if (name == "aten::broadcast_tensors")
    return broadcastResult(c, r, shape);
  // In-place and out= ops return what they write.
  if (!c.written.empty() && returnsWrittenArguments(c.op)) {
    auto &[storage, layout] =
        c.written[std::min<size_t>(r, c.written.size() - 1)];
    define(c.op.getResult(r), storage, layout);
    return;
  }
  if (!c.self)
    return freshResult(c.op, r, contiguous(shape));
  // Ops that share their input's storage when they can.
  if (name == "aten::contiguous")
    return contiguousResult(c, r, shape);
  if (name == "aten::reshape" || name == "aten::reshape_as" ||
      overload == "aten::flatten.using_ints")
    return reshapeResult(c, r, shape);
  if (name == "aten::to" || name == "aten::type_as")
    return conversionResult(c, r);
  if (name == "aten::dropout" || name == "aten::feature_dropout" ||
      name == "aten::alpha_dropout" || name == "aten::feature_alpha_dropout")
    return dropoutResult(c, r);
  // View ops: always the input's storage.
  if (aten::hasFact(overload, aten::OpFact::View))
    return viewResult(c, r, shape);
  if (reducesInOwnBuffer(c.op, name))
    return lossResult(c, r, shape);
  if ((name == "aten::_convolution" || name == "aten::convolution" ||
       name == "aten::conv2d" || name == "aten::convolution_backward") &&
      shape.size() == 4)
    return convolutionResult(c, r, shape);
  // EmbeddingBag's offset2bag (mean and max modes): the CPU kernel fills
  // one element more and shrinks the tensor, not its storage.
  if ((name == "aten::embedding_bag" || name == "aten::_embedding_bag" ||
       name == "aten::_embedding_bag_forward_only") &&
      r == 1 && shape.size() == 1 && shape[0] > 0) {
    Value result = c.op.getResult(r);
    auto type = cast<RankedTensorType>(result.getType());
    int64_t bytes = tensorBytes(type) / shape[0] * (shape[0] + 1);
    define(result, fresh(bytes, categoryOf(c.op, result)), contiguous(shape));
    return;
  }
  if (name == "aten::scaled_dot_product_attention" && r == 0 &&
      shape.size() == 4)
    return freshResult(c.op, r,
                       flashAttentionOnCpu(c.op)
                           ? preservedLayout(layoutOf[c.op.getOperand(0)])
                           : contiguous(shape));
  kernelResult(c, r, shape);
}

void Simulation::freshResult(aten::CallOp op, unsigned r, Layout layout) {
  Value result = op.getResult(r);
  define(result, fresh(tensorBytes(result.getType()), categoryOf(op, result)),
         std::move(layout));
}

/// A result that shares self's storage; a view of it unless `view` is false.
void Simulation::aliasResult(const CallSite &c, unsigned r, Layout layout,
                             bool view) {
  define(c.op.getResult(r), storageOf.lookup(c.self), std::move(layout));
  if (view)
    views.insert(c.op.getResult(r));
}

/// broadcast_tensors: each result expands its own operand.
void Simulation::broadcastResult(const CallSite &c, unsigned r,
                                 const Dims &shape) {
  Value operand = c.op.getOperand(r);
  Layout layout = expandedLayout(layoutOf[operand], shape);
  define(c.op.getResult(r), storageOf.lookup(operand), std::move(layout));
  views.insert(c.op.getResult(r));
}

void Simulation::contiguousResult(const CallSite &c, unsigned r,
                                  const Dims &shape) {
  if (isContiguous(c.in))
    aliasResult(c, r, c.in, views.contains(c.self)); // the input itself
  else
    freshResult(c.op, r, contiguous(shape));
}

void Simulation::reshapeResult(const CallSite &c, unsigned r,
                               const Dims &shape) {
  // flatten of one dimension returns its input itself.
  const Layout &in = c.in;
  bool itself = c.overload == "aten::flatten.using_ints" &&
                intArg(c.op, 1) && intArg(c.op, 2) &&
                wrapDim(*intArg(c.op, 1), in.sizes.size()) ==
                    wrapDim(*intArg(c.op, 2), in.sizes.size()) &&
                !in.sizes.empty();
  if (std::optional<Dims> strides = viewStrides(in, shape))
    aliasResult(c, r, Layout{shape, *strides},
                !itself || views.contains(c.self));
  else
    freshResult(c.op, r, contiguous(shape));
}

/// aten::to and aten::type_as: the input itself where the dtype stays and
/// no copy is asked for.
void Simulation::conversionResult(const CallSite &c, unsigned r) {
  StringRef overload = c.overload;
  size_t copyArg = overload == "aten::to.dtype"          ? 3
                   : overload == "aten::to.other"        ? 3
                   : overload == "aten::to.device"       ? 4
                   : overload == "aten::to.dtype_layout" ? 6
                                                         : SIZE_MAX;
  bool sameType = cast<RankedTensorType>(c.self.getType()).getElementType() ==
                  cast<RankedTensorType>(c.op.getResult(r).getType())
                      .getElementType();
  if (sameType && !boolArg(c.op, copyArg, false))
    aliasResult(c, r, c.in, views.contains(c.self));
  else
    freshResult(c.op, r, preservedLayout(c.in));
}

void Simulation::dropoutResult(const CallSite &c, unsigned r) {
  // On the CPU, an identity dropout returns its input.
  std::optional<double> p = floatArg(c.op, 1);
  if (!boolArg(c.op, 2, true) || (p && *p == 0.0) || numel(c.in.sizes) == 0)
    aliasResult(c, r, c.in, views.contains(c.self));
  else
    freshResult(c.op, r, preservedLayout(c.in));
}

void Simulation::viewResult(const CallSite &c, unsigned r, const Dims &shape) {
  StringRef name = c.name;
  Layout layout = viewLayout(c.op, name, c.in, shape);
  if (layout.strides.size() != shape.size())
    layout = viewedLayout(c.in, shape);
  // Views keep their base alive (autograd's view metadata), so their
  // storage is never written in place. detach's and the "unsafe" ops'
  // results share the storage without that metadata: they are views
  // only where their input is one.
  bool untracked = name == "aten::detach" || name == "aten::lift_fresh" ||
                   name == "aten::_unsafe_view" ||
                   name == "aten::unsafe_split" ||
                   name == "aten::unsafe_split_with_sizes" ||
                   name == "aten::unsafe_chunk";
  aliasResult(c, r, std::move(layout), !untracked || views.contains(c.self));
}

/// A loss reduced in its own buffer (reducesInOwnBuffer): the scalar holds
/// the unreduced loss's storage.
void Simulation::lossResult(const CallSite &c, unsigned r, const Dims &shape) {
  Value result = c.op.getResult(r);
  // The unreduced loss has the broadcast shape of self and target.
  Dims target(cast<RankedTensorType>(c.op.getOperand(1).getType()).getShape());
  const Dims &sizes = c.in.sizes;
  Dims broadcast = sizes.size() >= target.size() ? sizes : target;
  const Dims &other = sizes.size() >= target.size() ? target : sizes;
  for (size_t d = 0; d < other.size(); ++d) {
    int64_t &b = broadcast[broadcast.size() - other.size() + d];
    b = std::max(b, other[d]);
  }
  int64_t unreduced =
      numel(broadcast) *
      elementBytes(cast<RankedTensorType>(result.getType()).getElementType());
  define(result, fresh(unreduced, categoryOf(c.op, result)),
         contiguous(shape));
}

/// Convolutions compute in NHWC where their input or weight is laid out so
/// (ATen's mkldnn_conv_use_channels_last): their output, and in the
/// backward the input's and weight's gradients.
void Simulation::convolutionResult(const CallSite &c, unsigned r,
                                   const Dims &shape) {
  unsigned first = c.name == "aten::convolution_backward" ? 1 : 0;
  bool nhwc = c.op.getNumOperands() > first + 1 &&
              (isChannelsLastLike(layoutOf[c.op.getOperand(first)]) ||
               isChannelsLastLike(layoutOf[c.op.getOperand(first + 1)]));
  freshResult(c.op, r, nhwc ? channelsLast(shape) : contiguous(shape));
}

/// A kernel's own result.
void Simulation::kernelResult(const CallSite &c, unsigned r,
                              const Dims &shape) {
  if (aten::hasFact(c.name, aten::OpFact::Pointwise)) {
    SmallVector<const Layout *> operands;
    for (Value operand : c.op.getOperands())
      operands.push_back(&layoutOf[operand]);
    freshResult(c.op, r, tensorIteratorLayout(shape, operands));
  } else if (aten::hasFact(c.name, aten::OpFact::PreservesLayout) &&
             c.in.sizes == shape) {
    freshResult(c.op, r, preservedLayout(c.in));
  } else if (auto strides = resultStrides(c.op, r)) {
    // Laid out as the importer's meta call or CPU run laid it out (dense,
    // permuted).
    freshResult(c.op, r, Layout{shape, *strides});
  } else {
    freshResult(c.op, r, contiguous(shape));
  }
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

/// What a collective holds from its start to its wait, as the runtime's
/// communicators hold it.
void Simulation::collective(Operation *op) {
  SmallVector<int> buffers =
      llvm::TypeSwitch<Operation *, SmallVector<int>>(op)
          .Case<AllGatherStartOp, ReduceScatterStartOp, AllReduceStartOp>(
              [&](auto start) { return buffersOf(start); })
          .Default([](Operation *) { return SmallVector<int>(); });
  for (int storage : buffers)
    count(storage);
  held[op->getResult(0)] = std::move(buffers);
}

SmallVector<int> Simulation::buffersOf(AllGatherStartOp gather) {
  // Its output buffer (a copy of the shard on a single rank).
  Value future = gather.getFuture();
  Type resultType = cast<FutureType>(future.getType()).getTensorType();
  returnsHeld[future] = true;
  int output =
      fresh(tensorBytes(resultType), MemoryCategory::GatheredParameters);
  if (nccl && groupSize(gather.getGroup()) > 1) {
    // NCCL reads the shard it sends until the collective completes: the
    // runtime holds it (a contiguous copy where it is not) until the wait,
    // where its last use would free it at the start (mixed precision's
    // cast shard).
    Value shard = gather.getShard();
    return {output, sentBuffer(shard, tensorBytes(shard.getType()))};
  }
  return {output};
}

/// The bytes of the one-element divisor Gloo's mean over `n` ranks holds
/// for a reduction of `element`s (plan::kDivisorInOwnTypeRanks).
static int64_t divisorBytes(Type element, int64_t n) {
  if (auto complex = dyn_cast<ComplexType>(element))
    return 2 * divisorBytes(complex.getElementType(), n);
  if (n > plan::kDivisorInOwnTypeRanks && (element.isBF16() || element.isF16()))
    return 4;
  return elementBytes(element);
}

SmallVector<int> Simulation::glooExchange(int send, int64_t bytes, int n,
                                          Type element, bool mean) {
  if (bytes == 0)
    return {};
  SmallVector<int> buffers = {
      send, fresh(bytes / n * (n - 1), MemoryCategory::CommunicationBuffers)};
  if (mean)
    buffers.push_back(fresh(divisorBytes(element, n),
                            MemoryCategory::CommunicationBuffers));
  return buffers;
}

SmallVector<int> Simulation::buffersOf(ReduceScatterStartOp scatter) {
  int64_t full = tensorBytes(scatter.getInput().getType());
  int n = groupSize(scatter.getGroup());
  bool overWorld = scatter.getAcross() && shardGroupSize != worldSize;
  if (nccl && (n > 1 || overWorld)) {
    // Its input (a contiguous copy where it is not) and the shard it
    // returns (over the world: reduce-scattered over the shard group, then
    // all-reduced in place over the replicas).
    int send = sentBuffer(scatter.getInput(), full);
    returnsHeld[scatter.getFuture()] = true;
    int64_t shard = full / (overWorld ? shardGroupSize : n);
    return {fresh(shard, MemoryCategory::Gradients), send};
  }
  bool mean = scatter.getReduce() == ReduceOp::mean;
  Type element =
      cast<RankedTensorType>(scatter.getInput().getType()).getElementType();
  if (overWorld) {
    // The shards every rank sends, concatenated.
    int64_t sent = full / shardGroupSize * worldSize;
    int send = sent == 0 ? -1 : fresh(sent, MemoryCategory::CommunicationBuffers);
    return glooExchange(send, sent, worldSize, element, mean);
  }
  if (n == 1) {
    returnsHeld[scatter.getFuture()] = true;
    return {fresh(full, MemoryCategory::Gradients)};
  }
  int send = full == 0 ? -1 : sentBuffer(scatter.getInput(), full);
  return glooExchange(send, full, n, element, mean);
}

int Simulation::sentBuffer(Value input, int64_t bytes) {
  return isContiguous(layoutOf.lookup(input))
             ? storageOf.lookup(input)
             : fresh(bytes, MemoryCategory::CommunicationBuffers);
}

SmallVector<int> Simulation::buffersOf(AllReduceStartOp reduce) {
  auto type = cast<RankedTensorType>(reduce.getInput().getType());
  int64_t bytes = tensorBytes(type);
  int n = groupSize(reduce.getGroup());
  if (n == 1) {
    returnsHeld[reduce.getFuture()] = true;
    return {fresh(bytes, MemoryCategory::Gradients)};
  }
  if (nccl) {
    // Its input (contiguous) and the result it returns.
    int send = sentBuffer(reduce.getInput(), bytes);
    returnsHeld[reduce.getFuture()] = true;
    return {fresh(bytes, MemoryCategory::Gradients), send};
  }
  // Padded to a multiple of n, reduce-scattered (the other ranks' chunks
  // received, as for a reduce-scatter), then gathered.
  int64_t count = type.getNumElements();
  int64_t padded = (count + n - 1) / n * n;
  int64_t element = elementBytes(type.getElementType());
  Value input = reduce.getInput();
  int flat = padded == count && isContiguous(layoutOf.lookup(input))
                 ? storageOf.lookup(input)
                 : fresh(padded * element, MemoryCategory::CommunicationBuffers);
  SmallVector<int> buffers =
      glooExchange(flat, padded * element, n, type.getElementType(),
                   reduce.getReduce() == ReduceOp::mean);
  // The padded input is held even with nothing to reduce.
  if (buffers.empty())
    buffers.push_back(flat);
  return buffers;
}

//===----------------------------------------------------------------------===//
// The step
//===----------------------------------------------------------------------===//

/// Last uses, and the roles that decide the category of what the step
/// reduces or hands the optimizer.
void Simulation::noteUses(Block &body) {
  for (Operation &op : body) {
    for (Value operand : op.getOperands())
      lastUse[operand] = &op;
    if (auto update = dyn_cast<UpdateOp>(op))
      roles[update.getValue()] = MemoryCategory::State;
    else if (isa<ReduceScatterStartOp, AllReduceStartOp>(op))
      roles.try_emplace(op.getOperand(0), MemoryCategory::Gradients);
    else if (isa<AllGatherStartOp>(op))
      roles.try_emplace(op.getOperand(0), MemoryCategory::CommunicationBuffers);
  }
}

/// The state, as fsdp-run holds it between steps: one storage per entry.
void Simulation::declareState() {
  llvm::DenseSet<StringAttr> flatMembers;
  for (FlatParamOp flat : module.getOps<FlatParamOp>())
    for (Attribute ref : flat.getParams())
      flatMembers.insert(cast<FlatSymbolRefAttr>(ref).getAttr());
  auto declare = [&](StringRef name, Type type) {
    int storage = fresh(tensorBytes(type), MemoryCategory::State);
    storages[storage].host = isHostState(
        step, FlatSymbolRefAttr::get(module.getContext(), name), &symbols);
    count(storage);
    state[name] = storage;
    stateType[name] = type;
  };
  for (Operation &op : module.getBody()->getOperations())
    llvm::TypeSwitch<Operation *>(&op)
        .Case([&](ParamOp param) {
          // A flat parameter's member is held in the flat parameter.
          if (!flatMembers.contains(param.getSymNameAttr()))
            declare(param.getSymName(), param.getType());
        })
        .Case([&](FlatParamOp flat) {
          declare(flat.getSymName(), flat.getStateType());
        })
        .Case<BufferOp, OptimStateOp>([&](auto symbol) {
          declare(symbol.getSymName(), symbol.getType());
        });
}

/// The batch: a copy of this step's entry of the data.
void Simulation::declareInputs(Block &body) {
  for (BlockArgument arg : body.getArguments()) {
    auto type = cast<RankedTensorType>(arg.getType());
    define(arg, fresh(tensorBytes(type), MemoryCategory::Inputs, /*pinned=*/true),
           contiguous(type.getShape()));
  }
}

FailureOr<MemoryPrediction> Simulation::run() {
  if (!step.getBody().hasOneBlock())
    return step.emitOpError("must be a single block to predict its memory");
  Block &body = step.getBody().front();
  order.emplace(body);
  if (auto w = module->getAttrOfType<IntegerAttr>(kWorldSizeAttr))
    worldSize = w.getInt();
  if (auto g = module->getAttrOfType<IntegerAttr>(kShardGroupSizeAttr))
    shardGroupSize = g.getInt();
  if (auto b = module->getAttrOfType<StringAttr>(kBackendAttr))
    nccl = b.getValue() == "nccl";
  noteUses(body);
  hostSet = hostValues(body);
  declareState();
  declareInputs(body);
  out.startBytes = live;
  out.hostStartBytes = hostLive;
  out.peakBytes = live;
  out.breakdown = byCategory;

  Operation *terminator = body.getTerminator();
  for (Operation &op : body) {
    if (&op == terminator)
      break;
    ++current;
    currentPeak = live;
    currentHostPeak = hostLive;
    int64_t before = out.peakBytes;
    if (failed(simulateOp(op)))
      return failure();
    // Constants are only ever added during an instruction: these are the
    // ones live at its peak.
    out.constantBytes.push_back(constantLive);
    out.hostInstructionPeak.push_back(currentHostPeak);
    releaseDead(op, terminator);
    if (out.peakBytes > before)
      out.peakOp = &op;
    out.timeline.push_back(live);
    out.instructionPeak.push_back(currentPeak);
  }
  collectUnits();
  return out;
}

LogicalResult Simulation::simulateOp(Operation &op) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(&op)
      .Case<GetOp, UpdateOp, aten::ConstantOp, aten::CallOp>(
          [&](auto kindOp) { return simulate(kindOp); })
      .Case([&](aten::RngStateOp rng) {
        freshResults(rng);
        return success();
      })
      .Case([&](aten::AutogradBackwardOp backward) {
        // The generator state it replays is not the kernel's operand.
        SmallVector<Value> operands(backward.getInputs());
        llvm::append_range(operands, backward.getResultGrads());
        recordOperands(operands);
        freshResults(backward);
        return success();
      })
      .Case([](aten::SetRngStateOp) {
        // Reads its operand; holds nothing.
        return success();
      })
      .Case<ToDeviceOp, ToHostOp>([&](Operation *copy) {
        copyToOtherMemory(copy);
        return success();
      })
      .Case([&](CollectiveStartOp start) {
        collective(start);
        return success();
      })
      .Case<WaitOp, ViewOp, LocalShardOp>(
          [&](auto kindOp) { return simulate(kindOp); })
      .Case([](FreeOp) { return success(); })
      .Default([](Operation *other) {
        return other->emitOpError(
            "has no memory model: it is not an instruction of a plan");
      });
}

/// Slots die after their last use; results nobody reads at once.
void Simulation::releaseDead(Operation &op, Operation *terminator) {
  llvm::SmallPtrSet<Value, 4> seen;
  for (Value operand : op.getOperands())
    if (lastUse.lookup(operand) == &op && seen.insert(operand).second &&
        !llvm::is_contained(terminator->getOperands(), operand))
      release(operand);
  for (Value result : op.getResults())
    if (result.use_empty())
      release(result);
}

/// Each unit's gathered interval and the peak inside it.
void Simulation::collectUnits() {
  for (Gather &g : collectGathers(*order)) {
    MemoryPrediction::Unit unit;
    unit.unit = g.start.getUnit().str();
    unit.phase = g.phase;
    unit.microBatch = order->microBatch(g.start);
    unit.start = order->at(g.start);
    unit.end = g.free ? order->at(g.free) : unit.start;
    unit.peakBytes = 0;
    for (int64_t i = unit.start; i <= unit.end; ++i)
      unit.peakBytes = std::max(unit.peakBytes, out.instructionPeak[i]);
    out.units.push_back(std::move(unit));
  }
}

/// An error at `op`, which reads or writes @name that no rank holds.
static LogicalResult notHeldState(Operation *op, StringRef verb,
                                  StringRef name) {
  return op->emitError() << verb << " @" << name
                         << ", which no rank holds as state (a member of a "
                            "flat parameter, or not state at all)";
}

LogicalResult Simulation::simulate(GetOp get) {
  auto it = state.find(get.getName());
  if (it == state.end())
    return notHeldState(get, "reads", get.getName());
  auto type = cast<RankedTensorType>(get.getType());
  if (type == stateType.lookup(get.getName())) {
    define(get.getResult(), it->second, contiguous(type.getShape()));
    return success();
  }
  // Mixed precision: a rounded copy in the compute type.
  auto role = roles.find(get.getResult());
  define(get.getResult(),
         fresh(tensorBytes(type), role != roles.end()
                                      ? role->second
                                      : MemoryCategory::GatheredParameters),
         contiguous(type.getShape()));
  return success();
}

LogicalResult Simulation::simulate(UpdateOp update) {
  auto it = state.find(update.getName());
  if (it == state.end())
    return notHeldState(update, "writes", update.getName());
  Type type = stateType.lookup(update.getName());
  Storage &old = storages[it->second];
  if (old.host && old.refs == 1) {
    // CPU offload: fsdp-run copies the new value into the state's own
    // buffer, which nothing else holds (pinned on a GPU); mixed
    // precision's widened copy lives only during the copy.
    if (update.getValue().getType() != type) {
      int widened = fresh(tensorBytes(type), MemoryCategory::State);
      storages[widened].host = true;
      count(widened);
      uncount(widened);
    }
    return success();
  }
  // Mixed precision: a value in the compute type, widened into a new
  // tensor of the state's type.
  int next = update.getValue().getType() == type
                 ? storageOf.lookup(update.getValue())
                 : fresh(tensorBytes(type), MemoryCategory::State);
  if (storages[next].refs == 0)
    storages[next].host =
        isHostState(update, update.getNameAttr(), &symbols);
  count(next);
  uncount(it->second);
  it->second = next;
  return success();
}

LogicalResult Simulation::simulate(aten::ConstantOp constant) {
  auto type = cast<RankedTensorType>(constant.getType());
  int storage = fresh(tensorBytes(type),
                      categoryOf(constant, constant.getResult()),
                      /*pinned=*/true);
  storages[storage].constant = true;
  define(constant.getResult(), storage, contiguous(type.getShape()));
  return success();
}

/// A copy of the generator's state; gradients the runtime makes contiguous,
/// each in a storage of its own (what the recomputation allocates besides
/// them is gone when the instruction ends).
void Simulation::freshResults(Operation *op) {
  for (Value result : op->getResults()) {
    auto type = cast<RankedTensorType>(result.getType());
    define(result, fresh(tensorBytes(type), categoryOf(op, result)),
           contiguous(type.getShape()));
  }
}

/// CPU offload: a copy in the other memory.
void Simulation::copyToOtherMemory(Operation *op) {
  Value result = op->getResult(0);
  auto type = cast<RankedTensorType>(result.getType());
  define(result,
         fresh(tensorBytes(type), isa<ToHostOp>(op) ? MemoryCategory::Gradients
                                                    : categoryOf(op, result)),
         contiguous(type.getShape()));
}

LogicalResult Simulation::simulate(WaitOp wait) {
  Operation *start = wait.getFuture().getDefiningOp();
  auto type = cast<RankedTensorType>(wait.getType());
  if (returnsHeld.lookup(wait.getFuture())) {
    // What the collective held: the gathered buffer, or a single
    // rank's copy.
    define(wait.getResult(), held.lookup(wait.getFuture()).front(),
           contiguous(type.getShape()));
  } else if (auto reduce = dyn_cast_or_null<AllReduceStartOp>(start)) {
    // A view of the padded gather's output.
    int n = groupSize(reduce.getGroup());
    int64_t padded = (type.getNumElements() + n - 1) / n * n;
    define(wait.getResult(),
           fresh(padded * elementBytes(type.getElementType()),
                 MemoryCategory::Gradients),
           contiguous(type.getShape()));
    views.insert(wait.getResult());
  } else {
    // The sum of the received chunks.
    define(wait.getResult(), fresh(tensorBytes(type), MemoryCategory::Gradients),
           contiguous(type.getShape()));
  }
  return success();
}

/// fsdp.view and fsdp.local_shard: a contiguous view of their buffer.
LogicalResult Simulation::defineView(Value result, Value buffer) {
  views.insert(result);
  define(result, storageOf.lookup(buffer),
         contiguous(cast<RankedTensorType>(result.getType()).getShape()));
  return success();
}

LogicalResult Simulation::simulate(ViewOp view) {
  return defineView(view.getResult(), view.getBuffer());
}

LogicalResult Simulation::simulate(LocalShardOp local) {
  return defineView(local.getResult(), local.getBuffer());
}

} // namespace

FailureOr<MemoryPrediction> fsdp::predictMemory(ModuleOp module,
                                                func::FuncOp step,
                                                bool operandLayouts) {
  FailureOr<MemoryPrediction> prediction =
      Simulation(module, step, operandLayouts).run();
  if (succeeded(prediction) && operandLayouts)
    prediction->callOperands.resize(prediction->timeline.size());
  return prediction;
}

int64_t fsdp::elementBytes(Type type) {
  if (type.isInteger(1))
    return 1;
  if (auto complex = dyn_cast<ComplexType>(type))
    return 2 * elementBytes(complex.getElementType());
  return (type.getIntOrFloatBitWidth() + 7) / 8;
}

int64_t fsdp::tensorBytes(Type type) {
  auto tensor = cast<ShapedType>(type);
  return tensor.getNumElements() * elementBytes(tensor.getElementType());
}
