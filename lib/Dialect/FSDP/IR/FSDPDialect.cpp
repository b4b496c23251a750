//===- FSDPDialect.cpp - model state and FSDP ops --------------------------===//

#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"

#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace fsdp;

#include "fsdp/Dialect/FSDP/IR/FSDPOpsDialect.cpp.inc"
#include "fsdp/Dialect/FSDP/IR/FSDPEnums.cpp.inc"
#include "fsdp/Dialect/FSDP/IR/FSDPInterfaces.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPOpsTypes.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPAttrs.cpp.inc"

LogicalResult
FutureType::verify(llvm::function_ref<InFlightDiagnostic()> emitError,
                   RankedTensorType tensorType) {
  if (!tensorType.hasStaticShape())
    return emitError() << "future must hold a statically shaped tensor, found "
                       << tensorType;
  return success();
}

void FSDPDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "fsdp/Dialect/FSDP/IR/FSDPOpsTypes.cpp.inc"
      >();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "fsdp/Dialect/FSDP/IR/FSDPAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "fsdp/Dialect/FSDP/IR/FSDPOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// Model state
//===----------------------------------------------------------------------===//

template <typename SymbolOp>
static LogicalResult verifyStateSymbol(SymbolOp op) {
  if (op.getSymName().empty())
    return op.emitOpError("expects a non-empty fully-qualified name");
  if (std::optional<ArrayAttr> aliases = op.getAliases()) {
    llvm::SmallSet<StringRef, 4> seen;
    for (Attribute alias : *aliases) {
      StringRef name = cast<StringAttr>(alias).getValue();
      if (name.empty() || name == op.getSymName())
        return op.emitOpError("alias \"")
               << name << "\" must be another, non-empty name";
      if (!seen.insert(name).second)
        return op.emitOpError("lists alias \"") << name << "\" twice";
    }
  }
  return success();
}

LogicalResult ParamOp::verify() {
  if (!isa<FloatType>(cast<ShapedType>(getType()).getElementType()))
    return emitOpError("expects a floating-point parameter, found ")
           << getType();
  return verifyStateSymbol(*this);
}

LogicalResult BufferOp::verify() { return verifyStateSymbol(*this); }

/// The type of the state symbol (parameter, buffer or optimizer state) `name`
/// refers to; an error at `op` if there is none.
static FailureOr<Type> lookupState(Operation *op, FlatSymbolRefAttr name,
                                   SymbolTableCollection &symbolTable) {
  Operation *symbol = symbolTable.lookupNearestSymbolFrom(op, name);
  if (auto buffer = dyn_cast_or_null<BufferOp>(symbol))
    return buffer.getType();
  if (auto param = dyn_cast_or_null<ParamOp>(symbol))
    return param.getType();
  if (auto state = dyn_cast_or_null<OptimStateOp>(symbol))
    return state.getType();
  if (auto flat = dyn_cast_or_null<FlatParamOp>(symbol))
    return Type(flat.getStateType());
  return op->emitOpError("refers to ")
         << name
         << ", which is not a parameter, flat parameter, buffer or optimizer "
            "state";
}

/// The type a parameter's gradient and optimizer state have: the parameter's
/// own, or the local shard of a flat parameter.
static FailureOr<Type> lookupTrainable(Operation *op, FlatSymbolRefAttr name,
                                       SymbolTableCollection &symbolTable,
                                       StringRef role) {
  Operation *symbol = symbolTable.lookupNearestSymbolFrom(op, name);
  if (auto param = dyn_cast_or_null<ParamOp>(symbol))
    return param.getType();
  if (auto flat = dyn_cast_or_null<FlatParamOp>(symbol))
    return Type(flat.getShardType());
  return op->emitOpError(role)
         << " " << name << ", which is not a parameter or flat parameter";
}

/// Whether `type` is one of mixed precision's 16-bit compute types.
static bool isHalfPrecision(Type type) { return type.isBF16() || type.isF16(); }

/// Whether a value of type `value` may stand for state `name` of type
/// `state`: the same type, or (mixed precision) a model parameter or buffer
/// in floating point, as the same shape in bf16 or f16: a read rounds the
/// state to it, a write widens it back. Optimizer state is read and written
/// in its own type.
static bool matchesState(Operation *op, FlatSymbolRefAttr name, Type value,
                         Type state, SymbolTableCollection &symbolTable) {
  if (value == state)
    return true;
  auto v = cast<ShapedType>(value), s = cast<ShapedType>(state);
  if (v.getShape() != s.getShape() || !isHalfPrecision(v.getElementType()) ||
      !isa<FloatType>(s.getElementType()))
    return false;
  Operation *symbol = symbolTable.lookupNearestSymbolFrom(op, name);
  return isa_and_nonnull<ParamOp, BufferOp, FlatParamOp>(symbol);
}

LogicalResult GetOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<Type> type = lookupState(*this, getNameAttr(), symbolTable);
  if (failed(type))
    return failure();
  if (!matchesState(*this, getNameAttr(), getType(), *type, symbolTable))
    return emitOpError("result type ")
           << getType() << " does not match " << getNameAttr() << " of type "
           << *type;
  return success();
}

LogicalResult UpdateOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<Type> type = lookupState(*this, getNameAttr(), symbolTable);
  if (failed(type))
    return failure();
  if (!matchesState(*this, getNameAttr(), getValue().getType(), *type,
                    symbolTable))
    return emitOpError("value type ")
           << getValue().getType() << " does not match " << getNameAttr()
           << " of type " << *type;
  return success();
}

LogicalResult GradOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<Type> type =
      lookupTrainable(*this, getParamAttr(), symbolTable, "refers to");
  if (failed(type))
    return failure();
  if (!matchesState(*this, getParamAttr(), getValue().getType(), *type,
                    symbolTable))
    return emitOpError("gradient type ")
           << getValue().getType() << " does not match " << getParamAttr()
           << " of type " << *type;
  return success();
}

LogicalResult
OptimStateOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  if (!getParamAttr())
    return success();
  FailureOr<Type> type =
      lookupTrainable(*this, getParamAttr(), symbolTable, "is for");
  if (failed(type))
    return failure();
  if (cast<ShapedType>(*type).getShape() !=
      cast<ShapedType>(getType()).getShape())
    return emitOpError("has type ")
           << getType() << " but its parameter " << getParamAttr()
           << " has type " << *type;
  return success();
}

//===----------------------------------------------------------------------===//
// FlatParamOp
//===----------------------------------------------------------------------===//

LogicalResult FlatParamOp::verify() {
  int64_t numel = getNumel(), padded = getPaddedNumel(),
          groupSize = getShardGroupSize();
  if (getParams().size() != getOffsets().size())
    return emitOpError("has ") << getParams().size() << " params but "
                               << getOffsets().size() << " offsets";
  if (groupSize < 1)
    return emitOpError("expects a shard group size of at least 1, found ")
           << groupSize;
  if (numel < 0 || padded < numel)
    return emitOpError("padded size ")
           << padded << " is smaller than its numel " << numel;
  if (padded % groupSize != 0)
    return emitOpError("padded size ")
           << padded << " is not a multiple of the shard group size "
           << groupSize;
  if (!isa<FloatType>(getElementType()))
    return emitOpError("expects a floating-point element type, found ")
           << getElementType();
  return success();
}

LogicalResult
FlatParamOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  int64_t end = 0;
  for (auto [attr, offset] : llvm::zip(getParams(), getOffsets())) {
    auto name = cast<FlatSymbolRefAttr>(attr);
    auto param = symbolTable.lookupNearestSymbolFrom<ParamOp>(*this, name);
    if (!param)
      return emitOpError("lists ") << name << ", which is not a parameter";
    auto type = cast<ShapedType>(param.getType());
    if (type.getElementType() != getElementType())
      return emitOpError("parameter ")
             << name << " has element type " << type.getElementType()
             << " but the flat parameter holds " << getElementType();
    if (offset < end)
      return emitOpError("parameter ")
             << name << " at offset " << offset
             << " overlaps the previous one, which ends at " << end;
    end = offset + type.getNumElements();
  }
  if (end != static_cast<int64_t>(getNumel()))
    return emitOpError("parameters end at ")
           << end << " but numel is " << getNumel();
  return success();
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

static FailureOr<FlatParamOp> lookupUnit(Operation *op, FlatSymbolRefAttr unit,
                                         SymbolTableCollection &symbolTable) {
  auto flat = symbolTable.lookupNearestSymbolFrom<FlatParamOp>(op, unit);
  if (!flat)
    return op->emitOpError("refers to ")
           << unit << ", which is not a flat parameter";
  return flat;
}

/// A gather or scatter between a unit's shard and its full padded buffer.
static LogicalResult verifyShardedTransfer(Operation *op, Type shardType,
                                           Type fullType, FlatParamOp flat,
                                           StringRef shardRole) {
  auto shard = cast<ShapedType>(shardType);
  auto full = cast<ShapedType>(fullType);
  if (shard.getElementType() != full.getElementType())
    return op->emitOpError("element types differ: ")
           << shard.getElementType() << " and " << full.getElementType();
  // Mixed precision moves a unit in its 16-bit compute or reduce dtype.
  if (full.getElementType() != flat.getElementType() &&
      !isHalfPrecision(full.getElementType()))
    return op->emitOpError("element type ")
           << full.getElementType() << " differs from @" << flat.getSymName()
           << "'s " << flat.getElementType();
  int64_t padded = flat.getPaddedNumel(), groupSize = flat.getShardGroupSize();
  if (shard.getRank() != 1 || full.getRank() != 1 ||
      full.getNumElements() != padded)
    return op->emitOpError("full buffer must be ")
           << RankedTensorType::get({padded}, flat.getElementType())
           << ", the padded size of @" << flat.getSymName() << ", and the "
           << shardRole << " 1-D; found " << fullType << " and " << shardType;
  if (shard.getNumElements() * groupSize != full.getNumElements())
    return op->emitOpError()
           << shardRole << " of " << shard.getNumElements()
           << " elements times the shard group size "
           << flat.getShardGroupSize() << " is not the padded size "
           << flat.getPaddedNumel();
  return success();
}

static LogicalResult verifyShardGroup(Operation *op, CommGroup group) {
  if (group == CommGroup::replicate)
    return op->emitOpError(
        "shards over the shard group or the world, not the replica group");
  return success();
}

Value AllGatherStartOp::getCollectiveInput() { return getShard(); }
bool AllGatherStartOp::isReduction() { return false; }
Value ReduceScatterStartOp::getCollectiveInput() { return getInput(); }
bool ReduceScatterStartOp::isReduction() { return true; }
Value AllReduceStartOp::getCollectiveInput() { return getInput(); }
bool AllReduceStartOp::isReduction() { return true; }

LogicalResult AllGatherStartOp::verify() {
  return verifyShardGroup(*this, getGroup());
}

LogicalResult
AllGatherStartOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<FlatParamOp> flat = lookupUnit(*this, getUnitAttr(), symbolTable);
  if (failed(flat))
    return failure();
  return verifyShardedTransfer(*this, getShard().getType(),
                               getFuture().getType().getTensorType(), *flat,
                               "shard");
}

LogicalResult ReduceScatterStartOp::verify() {
  if (std::optional<CommGroup> across = getAcross()) {
    if (*across != CommGroup::world || getGroup() != CommGroup::shard)
      return emitOpError("sums across ")
             << stringifyCommGroup(*across) << " and scatters over "
             << stringifyCommGroup(getGroup())
             << ": only a sum across the world scattered over the shard "
                "group is defined";
  }
  return verifyShardGroup(*this, getGroup());
}

LogicalResult
ReduceScatterStartOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<FlatParamOp> flat = lookupUnit(*this, getUnitAttr(), symbolTable);
  if (failed(flat))
    return failure();
  return verifyShardedTransfer(*this, getFuture().getType().getTensorType(),
                               getInput().getType(), *flat, "result shard");
}

LogicalResult LocalShardOp::verify() {
  return verifyShardGroup(*this, getGroup());
}

LogicalResult
LocalShardOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  FailureOr<FlatParamOp> flat = lookupUnit(*this, getUnitAttr(), symbolTable);
  if (failed(flat))
    return failure();
  return verifyShardedTransfer(*this, getResult().getType(),
                               getBuffer().getType(), *flat, "result shard");
}

LogicalResult AllReduceStartOp::verify() {
  if (getFuture().getType().getTensorType() != getInput().getType())
    return emitOpError("result ")
           << getFuture().getType() << " must hold the input's type "
           << getInput().getType();
  return success();
}

LogicalResult WaitOp::verify() {
  Operation *def = getFuture().getDefiningOp();
  if (!isa_and_nonnull<AllGatherStartOp, ReduceScatterStartOp,
                       AllReduceStartOp>(def))
    return emitOpError("must wait on the future of a collective start");
  if (!getFuture().hasOneUse())
    return emitOpError("future is waited more than once");
  return success();
}

LogicalResult FreeOp::verify() {
  auto wait = getBuffer().getDefiningOp<WaitOp>();
  if (!wait || !wait.getFuture().getDefiningOp<AllGatherStartOp>())
    return emitOpError("can only free a buffer gathered by an all-gather");
  return success();
}

LogicalResult ViewOp::verify() {
  auto buffer = cast<ShapedType>(getBuffer().getType());
  auto result = cast<ShapedType>(getResult().getType());
  if (buffer.getElementType() != result.getElementType())
    return emitOpError("result element type ")
           << result.getElementType() << " differs from the buffer's "
           << buffer.getElementType();
  int64_t offset = getOffset();
  if (offset < 0 || result.getNumElements() > buffer.getNumElements() ||
      offset > buffer.getNumElements() - result.getNumElements())
    return emitOpError("view of ")
           << result.getNumElements() << " elements at offset " << offset
           << " does not fit in a buffer of " << buffer.getNumElements();
  return success();
}

#define GET_OP_CLASSES
#include "fsdp/Dialect/FSDP/IR/FSDPOps.cpp.inc"
