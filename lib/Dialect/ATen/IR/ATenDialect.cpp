//===- ATenDialect.cpp - ATen compute ops ----------------------------------===//

#include "fsdp/Dialect/ATen/IR/ATenDialect.h"


#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace fsdp::aten;

#include "fsdp/Dialect/ATen/IR/ATenOpsDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "fsdp/Dialect/ATen/IR/ATenAttrs.cpp.inc"

void ATenDialect::initialize() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "fsdp/Dialect/ATen/IR/ATenAttrs.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "fsdp/Dialect/ATen/IR/ATenOps.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// CallOp
//===----------------------------------------------------------------------===//

StringRef CallOp::getOpName() { return getOverload().split('.').first; }

unsigned CallOp::getNumSchemaResults() {
  size_t numMutated = getMutates() ? getMutates()->size() : 0;
  return getNumResults() - numMutated;
}

/// i64 integers and f64 floats are what a bare literal parses as.
static bool isDefaultTyped(Attribute attr) {
  if (auto i = dyn_cast<IntegerAttr>(attr))
    return i.getType().isSignlessInteger(64);
  // Non-finite floats print in hex, which would read back as an integer.
  if (auto f = dyn_cast<FloatAttr>(attr))
    return f.getType().isF64() && f.getValue().isFinite();
  return false;
}

/// True if a list argument holds operands or None (a Tensor?[]).
static bool hasPlaceholders(ArrayAttr array) {
  return llvm::any_of(array, [](Attribute a) {
    return isa<TensorArgAttr, NoneAttr>(a);
  });
}

int64_t fsdp::aten::numOperandsOf(Attribute arg) {
  if (isa<TensorArgAttr>(arg))
    return 1;
  if (auto list = dyn_cast<TensorListArgAttr>(arg))
    return list.getSize();
  if (auto array = dyn_cast<ArrayAttr>(arg))
    return llvm::count_if(array, [](Attribute a) {
      return isa<TensorArgAttr>(a);
    });
  return 0;
}

// Arguments print in place: `%v` for a tensor, `[%a, %b]` for a Tensor[],
// `none` for None, the attribute itself for anything else.
void CallOp::print(OpAsmPrinter &p) {
  p << ' ';
  p.printAttributeWithoutType(getOverloadAttr());
  p << '(';
  auto operands = getOperands();
  unsigned next = 0;
  llvm::interleaveComma(getArgs(), p, [&](Attribute arg) {
    if (isa<TensorArgAttr>(arg)) {
      p.printOperand(operands[next++]);
    } else if (auto list = dyn_cast<TensorListArgAttr>(arg);
               list && list.getSize() > 0) {
      p << '[';
      p.printOperands(operands.slice(next, list.getSize()));
      next += list.getSize();
      p << ']';
    } else if (isa<NoneAttr>(arg)) {
      p << "none";
    } else if (auto array = dyn_cast<ArrayAttr>(arg);
               array && hasPlaceholders(array)) {
      // A Tensor?[]: operands and `none` in place.
      p << '[';
      llvm::interleaveComma(array, p, [&](Attribute element) {
        if (isa<TensorArgAttr>(element))
          p.printOperand(operands[next++]);
        else if (isa<NoneAttr>(element))
          p << "none";
        else
          p.printAttribute(element);
      });
      p << ']';
    } else if (isDefaultTyped(arg)) {
      p.printAttributeWithoutType(arg);
    } else {
      p.printAttribute(arg);
    }
  });
  p << ')';
  p.printOptionalAttrDict((*this)->getAttrs(),
                          {getOverloadAttrName(), getArgsAttrName()});
  p << " : ";
  p.printFunctionalType(getOperandTypes(), getResultTypes());
}

ParseResult CallOp::parse(OpAsmParser &parser, OperationState &result) {
  Builder &b = parser.getBuilder();
  StringAttr overload;
  if (parser.parseAttribute(overload, b.getNoneType()) || parser.parseLParen())
    return failure();
  SmallVector<OpAsmParser::UnresolvedOperand> operands;
  SmallVector<Attribute> args;
  // One argument, or one element of a list: `%v`, `none` or an attribute;
  // operands become placeholders in `into`.
  auto parseElement = [&](SmallVectorImpl<Attribute> &into) -> ParseResult {
    OpAsmParser::UnresolvedOperand operand;
    OptionalParseResult isOperand = parser.parseOptionalOperand(operand);
    if (isOperand.has_value()) {
      if (failed(*isOperand))
        return failure();
      operands.push_back(operand);
      into.push_back(TensorArgAttr::get(b.getContext()));
      return success();
    }
    if (succeeded(parser.parseOptionalKeyword("none"))) {
      into.push_back(NoneAttr::get(b.getContext()));
      return success();
    }
    Attribute attr;
    if (parser.parseAttribute(attr))
      return failure();
    into.push_back(attr);
    return success();
  };
  auto parseArg = [&]() -> ParseResult {
    if (failed(parser.parseOptionalLSquare()))
      return parseElement(args);
    // A Tensor[] of operands, a Tensor?[] mixing operands and `none`, or a
    // list attribute.
    SmallVector<Attribute> elements;
    if (failed(parser.parseOptionalRSquare())) {
      do {
        if (parseElement(elements))
          return failure();
      } while (succeeded(parser.parseOptionalComma()));
      if (parser.parseRSquare())
        return failure();
    }
    if (!elements.empty() && llvm::all_of(elements, llvm::IsaPred<TensorArgAttr>))
      args.push_back(TensorListArgAttr::get(b.getContext(), elements.size()));
    else
      args.push_back(b.getArrayAttr(elements));
    return success();
  };
  if (failed(parser.parseOptionalRParen())) {
    if (parser.parseCommaSeparatedList(parseArg) || parser.parseRParen())
      return failure();
  }
  result.addAttribute(getOverloadAttrName(result.name), overload);
  result.addAttribute(getArgsAttrName(result.name), b.getArrayAttr(args));
  FunctionType type;
  llvm::SMLoc attrLoc = parser.getCurrentLocation();
  if (parser.parseOptionalAttrDict(result.attributes))
    return failure();
  if (failed(verifyInherentAttrs(result.name, result.attributes, [&]() {
        return parser.emitError(attrLoc);
      })))
    return failure();
  llvm::SMLoc typeLoc = parser.getCurrentLocation();
  if (parser.parseColonType(type))
    return failure();
  result.addTypes(type.getResults());
  return parser.resolveOperands(operands, type.getInputs(), typeLoc,
                                result.operands);
}

LogicalResult CallOp::verify() {
  // `namespace::name` or `namespace::name.overload`.
  StringRef overload = getOverload();
  auto [ns, rest] = overload.split("::");
  if (ns.empty() || rest.empty() || rest.contains("::") ||
      rest.starts_with(".") || rest.ends_with("."))
    return emitOpError("expects an overload name `namespace::name[.overload]`, "
                       "found \"")
           << overload << "\"";
  int64_t consumed = 0;
  for (Attribute arg : getArgs()) {
    if (auto list = dyn_cast<TensorListArgAttr>(arg); list && list.getSize() < 0)
      return emitOpError("has a tensor list of negative size");
    consumed += numOperandsOf(arg);
  }
  if (consumed != static_cast<int64_t>(getNumOperands()))
    return emitOpError("arguments name ")
           << consumed << " tensor operands but the op has "
           << getNumOperands();
  if (std::optional<ArrayRef<int64_t>> mutates = getMutates()) {
    if (mutates->size() > getNumResults())
      return emitOpError("mutates ") << mutates->size()
                                     << " arguments but has only "
                                     << getNumResults() << " results";
    // Map each mutated schema argument to its operand.
    SmallVector<int64_t> operandOfArg;
    int64_t index = 0;
    for (Attribute arg : getArgs()) {
      if (isa<TensorArgAttr>(arg))
        operandOfArg.push_back(index++);
      else {
        operandOfArg.push_back(-1);
        index += numOperandsOf(arg);
      }
    }
    unsigned firstMutated = getNumSchemaResults();
    for (auto [i, argIndex] : llvm::enumerate(*mutates)) {
      if (argIndex < 0 || argIndex >= static_cast<int64_t>(operandOfArg.size()) ||
          operandOfArg[argIndex] < 0)
        return emitOpError("mutates argument ")
               << argIndex << ", which is not a tensor argument";
      Type operandType = getOperand(operandOfArg[argIndex]).getType();
      Type resultType = getResult(firstMutated + i).getType();
      if (operandType != resultType)
        return emitOpError("new value of mutated argument ")
               << argIndex << " has type " << resultType
               << ", expected its operand's type " << operandType;
    }
  }
  return success();
}

//===----------------------------------------------------------------------===//
// ConstantOp
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::verify() {
  auto type = dyn_cast<ShapedType>(getValue().getType());
  if (!type || !type.hasStaticShape())
    return emitOpError("expects a statically shaped tensor value");
  return success();
}


//===----------------------------------------------------------------------===//
// RngStateOp
//===----------------------------------------------------------------------===//

/// A generator's state is its bytes: a 1-D tensor of ui8.
static LogicalResult verifyRngStateType(Operation *op, Type stateType) {
  auto type = cast<RankedTensorType>(stateType);
  if (type.getRank() != 1 || !type.getElementType().isUnsignedInteger(8))
    return op->emitOpError("expects a 1-D tensor of ui8 (the generator's "
                           "state bytes), found ")
           << type;
  return success();
}

LogicalResult RngStateOp::verify() {
  return verifyRngStateType(*this, getState().getType());
}

LogicalResult SetRngStateOp::verify() {
  return verifyRngStateType(*this, getState().getType());
}

//===----------------------------------------------------------------------===//
// AutogradBackwardOp
//===----------------------------------------------------------------------===//

LogicalResult AutogradBackwardOp::verify() {
  StringRef overload = getOverload();
  auto [ns, rest] = overload.split("::");
  if (ns.empty() || rest.empty())
    return emitOpError("expects an overload name `namespace::name[.overload]`, "
                       "found \"")
           << overload << "\"";
  int64_t consumed = 0;
  for (Attribute arg : getArgs())
    consumed += numOperandsOf(arg);
  if (consumed != static_cast<int64_t>(getInputs().size()))
    return emitOpError("arguments name ")
           << consumed << " tensor operands but the op has "
           << getInputs().size() << " inputs";
  if (getGradResults().size() != getResultGrads().size())
    return emitOpError("has ")
           << getResultGrads().size() << " result gradients but grad_results "
           << "names " << getGradResults().size();
  int64_t previous = -1;
  for (int64_t r : getGradResults()) {
    if (r <= previous || r >= static_cast<int64_t>(getNumForwardResults()))
      return emitOpError("grad_results must name forward results in "
                         "increasing order, below ")
             << getNumForwardResults() << ", found " << r;
    previous = r;
  }
  if (getWrt().size() != getGrads().size())
    return emitOpError("returns ")
           << getGrads().size() << " gradients but wrt names "
           << getWrt().size() << " inputs";
  previous = -1;
  for (auto [k, index] : llvm::enumerate(getWrt())) {
    if (index <= previous || index >= static_cast<int64_t>(getInputs().size()))
      return emitOpError("wrt must name inputs in increasing order, found ")
             << index;
    previous = index;
    Type want = getInputs()[index].getType();
    if (getGrads()[k].getType() != want)
      return emitOpError("gradient #")
             << k << " has type " << getGrads()[k].getType()
             << ", expected input #" << index << "'s type " << want;
  }
  if (Value state = getRngState())
    return verifyRngStateType(*this, state.getType());
  return success();
}

#define GET_OP_CLASSES
#include "fsdp/Dialect/ATen/IR/ATenOps.cpp.inc"
