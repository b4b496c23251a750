//===- ATenBuilder.cpp - reading and building aten.call ops ----------------===//

#include "fsdp/Dialect/ATen/IR/ATenBuilder.h"

#include "mlir/IR/BuiltinAttributes.h"

#include <cmath>
#include <complex>

using namespace mlir;
using namespace fsdp::aten;

//===----------------------------------------------------------------------===//
// CallArgs
//===----------------------------------------------------------------------===//

CallArgs::CallArgs(CallOp op) : op(op) {
  unsigned next = 0;
  for (Attribute arg : op.getArgs()) {
    attrs.push_back(arg);
    firstOperand.push_back(next);
    next += numOperandsOf(arg);
  }
}

Value CallArgs::tensor(unsigned i) const {
  if (i >= attrs.size() || !isa<TensorArgAttr>(attrs[i]))
    return Value();
  return op.getOperand(firstOperand[i]);
}

int64_t CallArgs::operandIndex(unsigned i) const {
  if (i >= attrs.size() || !isa<TensorArgAttr>(attrs[i]))
    return -1;
  return firstOperand[i];
}

int64_t CallArgs::listOperandIndex(unsigned i, unsigned k) const {
  if (i >= attrs.size())
    return -1;
  if (auto list = dyn_cast<TensorListArgAttr>(attrs[i]))
    return k < list.getSize() ? int64_t(firstOperand[i] + k) : -1;
  auto array = dyn_cast<ArrayAttr>(attrs[i]);
  if (!array || k >= array.size() || !isa<TensorArgAttr>(array[k]))
    return -1;
  int64_t before = llvm::count_if(array.getValue().take_front(k),
                                  llvm::IsaPred<TensorArgAttr>);
  return firstOperand[i] + before;
}

SmallVector<Value> CallArgs::tensorList(unsigned i) const {
  SmallVector<Value> values;
  if (i >= attrs.size())
    return values;
  unsigned next = firstOperand[i];
  if (auto list = dyn_cast<TensorListArgAttr>(attrs[i])) {
    for (int64_t k = 0; k < list.getSize(); ++k)
      values.push_back(op.getOperand(next++));
  } else if (auto array = dyn_cast<ArrayAttr>(attrs[i])) {
    for (Attribute e : array)
      values.push_back(isa<TensorArgAttr>(e) ? op.getOperand(next++) : Value());
  }
  return values;
}

bool CallArgs::isNone(unsigned i) const {
  return i >= attrs.size() || isa<NoneAttr>(attrs[i]);
}

std::optional<int64_t> CallArgs::getInt(unsigned i) const {
  if (i < attrs.size())
    if (auto v = dyn_cast<IntegerAttr>(attrs[i]))
      return v.getValue().getSExtValue();
  return std::nullopt;
}

std::optional<double> CallArgs::getFloat(unsigned i) const {
  if (i < attrs.size()) {
    if (auto v = dyn_cast<FloatAttr>(attrs[i]))
      return v.getValueAsDouble();
    if (auto v = dyn_cast<IntegerAttr>(attrs[i]))
      return static_cast<double>(v.getValue().getSExtValue());
  }
  return std::nullopt;
}

std::optional<bool> CallArgs::getBool(unsigned i) const {
  if (i < attrs.size())
    if (auto v = dyn_cast<BoolAttr>(attrs[i]))
      return v.getValue();
  return std::nullopt;
}

std::optional<SmallVector<int64_t>> CallArgs::getInts(unsigned i) const {
  if (i >= attrs.size())
    return std::nullopt;
  auto array = dyn_cast<ArrayAttr>(attrs[i]);
  if (!array)
    return std::nullopt;
  SmallVector<int64_t> values;
  for (Attribute e : array) {
    auto v = dyn_cast<IntegerAttr>(e);
    if (!v)
      return std::nullopt;
    values.push_back(v.getValue().getSExtValue());
  }
  return values;
}

std::optional<StringRef> CallArgs::getString(unsigned i) const {
  if (i < attrs.size())
    if (auto v = dyn_cast<StringAttr>(attrs[i]))
      return v.getValue();
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// ArgValue
//===----------------------------------------------------------------------===//

ArgValue ArgValue::tensors(ValueRange values) {
  ArgValue a(Value{});
  a.kind = Kind::TensorList;
  a.tensor = Value();
  a.list.assign(values.begin(), values.end());
  return a;
}

ArgValue ArgValue::optionalTensors(ArrayRef<Value> values) {
  ArgValue a(Value{});
  a.kind = Kind::OptionalTensorList;
  a.tensor = Value();
  a.list.assign(values.begin(), values.end());
  return a;
}

std::optional<SmallVector<int64_t>>
fsdp::aten::broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> shape(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    shape[i] = da == 1 ? db : da;
  }
  return shape;
}

//===----------------------------------------------------------------------===//
// ATenBuilder
//===----------------------------------------------------------------------===//

Attribute ATenBuilder::none() { return NoneAttr::get(b.getContext()); }

Attribute ATenBuilder::ints(ArrayRef<int64_t> v) {
  SmallVector<Attribute> elements;
  for (int64_t x : v)
    elements.push_back(i64(x));
  return b.getArrayAttr(elements);
}

Attribute ATenBuilder::bools(ArrayRef<bool> v) {
  SmallVector<Attribute> elements;
  for (bool x : v)
    elements.push_back(boolean(x));
  return b.getArrayAttr(elements);
}

CallOp ATenBuilder::create(StringRef overload, ArrayRef<ArgValue> args,
                           TypeRange results, ArrayRef<int64_t> mutates,
                           bool listResult) {
  MLIRContext *context = b.getContext();
  SmallVector<Attribute> attrs;
  SmallVector<Value> operands;
  for (const ArgValue &arg : args) {
    switch (arg.kind) {
    case ArgValue::Kind::Tensor:
      if (arg.tensor) {
        attrs.push_back(TensorArgAttr::get(context));
        operands.push_back(arg.tensor);
      } else {
        attrs.push_back(none());
      }
      break;
    case ArgValue::Kind::TensorList:
      attrs.push_back(TensorListArgAttr::get(context, arg.list.size()));
      operands.append(arg.list.begin(), arg.list.end());
      break;
    case ArgValue::Kind::OptionalTensorList: {
      // Without a None it is a plain tensor list, as the importer writes it.
      if (llvm::all_of(arg.list, [](Value v) { return bool(v); })) {
        attrs.push_back(TensorListArgAttr::get(context, arg.list.size()));
        operands.append(arg.list.begin(), arg.list.end());
        break;
      }
      SmallVector<Attribute> elements;
      for (Value v : arg.list) {
        elements.push_back(v ? Attribute(TensorArgAttr::get(context)) : none());
        if (v)
          operands.push_back(v);
      }
      attrs.push_back(b.getArrayAttr(elements));
      break;
    }
    case ArgValue::Kind::Attr:
      attrs.push_back(arg.attr);
      break;
    }
  }
  return CallOp::create(b, loc, results, b.getStringAttr(overload),
                        b.getArrayAttr(attrs), operands,
                        mutates.empty() ? DenseI64ArrayAttr()
                                        : b.getDenseI64ArrayAttr(mutates),
                        listResult ? b.getUnitAttr() : UnitAttr());
}

Value ATenBuilder::call(StringRef overload, ArrayRef<ArgValue> args,
                        Type result) {
  return create(overload, args, TypeRange(result)).getResult(0);
}

Value ATenBuilder::callInPlace(StringRef overload, ArrayRef<ArgValue> args) {
  Type type = args.front().tensor.getType();
  return create(overload, args, {type, type}, /*mutates=*/{0}).getResult(1);
}

Value ATenBuilder::splat(RankedTensorType type, double value) {
  Type elem = type.getElementType();
  if (auto complex = dyn_cast<ComplexType>(elem)) {
    DenseElementsAttr attr =
        complex.getElementType().isF64()
            ? DenseElementsAttr::get(type, std::complex<double>(value, 0))
            : DenseElementsAttr::get(
                  type, std::complex<float>(static_cast<float>(value), 0));
    return ConstantOp::create(b, loc, type, attr);
  }
  Attribute element;
  if (auto f = dyn_cast<FloatType>(elem))
    element = b.getFloatAttr(f, value);
  else if (elem.isInteger(1))
    element = b.getBoolAttr(value != 0);
  else
    element = b.getIntegerAttr(elem, static_cast<int64_t>(value));
  return ConstantOp::create(b, loc, type,
                            DenseElementsAttr::get(type, element));
}

Type ATenBuilder::promote(Value a, Value b) {
  RankedTensorType ta = typeOf(a), tb = typeOf(b);
  Type ea = ta.getElementType(), eb = tb.getElementType();
  if (ea == eb)
    return ea;
  // A complex operand makes the result complex, its parts the wider
  // floating-point type of the two.
  if (isa<ComplexType>(ea) || isa<ComplexType>(eb)) {
    auto part = [](Type t) -> Type {
      if (auto c = dyn_cast<ComplexType>(t))
        return c.getElementType();
      return isa<FloatType>(t) ? t : Type();
    };
    Type pa = part(ea), pb = part(eb);
    if (!pa || !pb)
      return ComplexType::get(pa ? pa : pb);
    return ComplexType::get(pa.getIntOrFloatBitWidth() >= pb.getIntOrFloatBitWidth()
                                ? pa
                                : pb);
  }
  bool fa = isa<FloatType>(ea), fb = isa<FloatType>(eb);
  if (fa != fb)
    return fa ? ea : eb;
  // Same category: a zero-dimensional tensor does not widen a dimensioned one.
  if ((ta.getRank() == 0) != (tb.getRank() == 0))
    return ta.getRank() == 0 ? eb : ea;
  return ea.getIntOrFloatBitWidth() >= eb.getIntOrFloatBitWidth() ? ea : eb;
}

Value ATenBuilder::binary(StringRef overload, Value x, Value y,
                          std::optional<double> alpha) {
  auto shape = broadcastShapes(typeOf(x).getShape(), typeOf(y).getShape());
  assert(shape && "operands do not broadcast");
  auto type = RankedTensorType::get(*shape, promote(x, y));
  SmallVector<ArgValue> args{x, y};
  if (alpha) {
    double a = *alpha;
    args.push_back(a == std::floor(a) && std::abs(a) < 1e15
                       ? i64(static_cast<int64_t>(a))
                       : f64(a));
  }
  return call(overload, args, type);
}

Value ATenBuilder::add(Value x, Value y, double alpha) {
  return binary("aten::add.Tensor", x, y, alpha);
}

Value ATenBuilder::sub(Value x, Value y) {
  return binary("aten::sub.Tensor", x, y, 1.0);
}

Value ATenBuilder::mul(Value x, Value y) {
  return binary("aten::mul.Tensor", x, y, std::nullopt);
}

Value ATenBuilder::div(Value x, Value y) {
  return binary("aten::div.Tensor", x, y, std::nullopt);
}

Value ATenBuilder::mulScalar(Value x, double s) {
  return call("aten::mul.Scalar", {x, f64(s)}, x.getType());
}

Value ATenBuilder::divScalar(Value x, double s) {
  return call("aten::div.Scalar", {x, f64(s)}, x.getType());
}

Value ATenBuilder::addScalar(Value x, double s) {
  return call("aten::add.Scalar", {x, f64(s), i64(1)}, x.getType());
}

Value ATenBuilder::neg(Value x) { return unary("aten::neg", x); }

Value ATenBuilder::unary(StringRef overload, Value x) {
  return call(overload, {x}, x.getType());
}

Value ATenBuilder::reshape(Value v, ArrayRef<int64_t> shape) {
  if (typeOf(v).getShape() == shape)
    return v;
  return call("aten::reshape", {v, ints(shape)},
              RankedTensorType::get(shape, typeOf(v).getElementType()));
}

Value ATenBuilder::transpose(Value v, int64_t d0, int64_t d1) {
  auto type = typeOf(v);
  int64_t rank = type.getRank();
  d0 = d0 < 0 ? d0 + rank : d0;
  d1 = d1 < 0 ? d1 + rank : d1;
  SmallVector<int64_t> shape(type.getShape());
  std::swap(shape[d0], shape[d1]);
  return call("aten::transpose.int", {v, i64(d0), i64(d1)},
              RankedTensorType::get(shape, type.getElementType()));
}

Value ATenBuilder::permute(Value v, ArrayRef<int64_t> dims) {
  auto type = typeOf(v);
  SmallVector<int64_t> shape;
  for (int64_t d : dims)
    shape.push_back(type.getShape()[d < 0 ? d + type.getRank() : d]);
  return call("aten::permute", {v, ints(dims)},
              RankedTensorType::get(shape, type.getElementType()));
}

Value ATenBuilder::expand(Value v, ArrayRef<int64_t> shape) {
  if (typeOf(v).getShape() == shape)
    return v;
  return call("aten::expand", {v, ints(shape), boolean(false)},
              RankedTensorType::get(shape, typeOf(v).getElementType()));
}

Value ATenBuilder::sumDims(Value v, ArrayRef<int64_t> dims, bool keepdim) {
  auto type = typeOf(v);
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    bool reduced = llvm::any_of(dims, [&](int64_t r) {
      return (r < 0 ? r + type.getRank() : r) == d;
    });
    if (!reduced)
      shape.push_back(type.getShape()[d]);
    else if (keepdim)
      shape.push_back(1);
  }
  return call("aten::sum.dim_IntList", {v, ints(dims), boolean(keepdim), none()},
              RankedTensorType::get(shape, type.getElementType()));
}

Value ATenBuilder::sumToShape(Value v, ArrayRef<int64_t> shape) {
  auto type = typeOf(v);
  if (type.getShape() == shape)
    return v;
  int64_t lead = type.getRank() - static_cast<int64_t>(shape.size());
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < type.getRank(); ++d)
    if (d < lead || (shape[d - lead] == 1 && type.getShape()[d] != 1))
      dims.push_back(d);
  Value summed = dims.empty() ? v : sumDims(v, dims, /*keepdim=*/true);
  return reshape(summed, shape);
}

Value ATenBuilder::mm(Value x, Value y) {
  auto tx = typeOf(x), ty = typeOf(y);
  return call("aten::mm", {x, y},
              RankedTensorType::get({tx.getShape()[0], ty.getShape()[1]},
                                    tx.getElementType()));
}

Value ATenBuilder::bmm(Value x, Value y) {
  auto tx = typeOf(x), ty = typeOf(y);
  return call("aten::bmm", {x, y},
              RankedTensorType::get({tx.getShape()[0], tx.getShape()[1],
                                     ty.getShape()[2]},
                                    tx.getElementType()));
}

Value ATenBuilder::matmul(Value x, Value y) {
  // Both at least 2-D here: batch dimensions broadcast.
  auto tx = typeOf(x), ty = typeOf(y);
  auto batch = broadcastShapes(tx.getShape().drop_back(2),
                               ty.getShape().drop_back(2));
  assert(batch && "matmul batch dimensions do not broadcast");
  SmallVector<int64_t> shape(*batch);
  shape.push_back(tx.getShape()[tx.getRank() - 2]);
  shape.push_back(ty.getShape()[ty.getRank() - 1]);
  return call("aten::matmul", {x, y},
              RankedTensorType::get(shape, tx.getElementType()));
}

Value ATenBuilder::zeros(Value like, RankedTensorType type) {
  return call("aten::new_zeros",
              {like, ints(type.getShape()), dtype(type.getElementType()),
               none(), none(), none()},
              type);
}

Value ATenBuilder::cast(Value v, Type elementType) {
  auto type = typeOf(v);
  if (type.getElementType() == elementType)
    return v;
  return call("aten::to.dtype",
              {v, dtype(elementType), boolean(false), boolean(false), none()},
              RankedTensorType::get(type.getShape(), elementType));
}

Value ATenBuilder::slice(Value v, int64_t dim, int64_t start, int64_t end) {
  auto type = typeOf(v);
  dim = dim < 0 ? dim + type.getRank() : dim;
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = end - start;
  return call("aten::slice.Tensor", {v, i64(dim), i64(start), i64(end), i64(1)},
              RankedTensorType::get(shape, type.getElementType()));
}

Value ATenBuilder::select(Value v, int64_t dim, int64_t index) {
  auto type = typeOf(v);
  dim = dim < 0 ? dim + type.getRank() : dim;
  SmallVector<int64_t> shape(type.getShape());
  shape.erase(shape.begin() + dim);
  return call("aten::select.int", {v, i64(dim), i64(index)},
              RankedTensorType::get(shape, type.getElementType()));
}

Value ATenBuilder::cat(ValueRange values, int64_t dim) {
  auto type = typeOf(values.front());
  dim = dim < 0 ? dim + type.getRank() : dim;
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = 0;
  for (Value v : values)
    shape[dim] += typeOf(v).getShape()[dim];
  return call("aten::cat", {ArgValue::tensors(values), i64(dim)},
              RankedTensorType::get(shape, type.getElementType()));
}

Value ATenBuilder::where(Value cond, Value x, double other) {
  auto shape = broadcastShapes(typeOf(cond).getShape(), typeOf(x).getShape());
  assert(shape && "where operands do not broadcast");
  return call("aten::where.ScalarOther", {cond, x, f64(other)},
              RankedTensorType::get(*shape, typeOf(x).getElementType()));
}
