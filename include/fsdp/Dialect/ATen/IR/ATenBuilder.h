//===- ATenBuilder.h - reading and building aten.call ops -------*- C++ -*-===//
//
// Passes read the schema arguments of an `aten.call` through `CallArgs` and
// build new calls through `ATenBuilder`, which also knows the result types of
// the handful of ops passes emit themselves (shapes are static, and passes do
// not link libtorch, so no meta kernel is at hand).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DIALECT_ATEN_IR_ATENBUILDER_H
#define FSDP_DIALECT_ATEN_IR_ATENBUILDER_H

#include "fsdp/Dialect/ATen/IR/ATenDialect.h"

#include "mlir/IR/Builders.h"

#include <optional>

namespace fsdp::aten {

/// The schema arguments of a call, by position.
class CallArgs {
public:
  explicit CallArgs(CallOp op);

  size_t size() const { return attrs.size(); }
  mlir::Attribute attr(unsigned i) const { return attrs[i]; }
  /// The tensor operand of argument `i`, or null if it is not a tensor.
  mlir::Value tensor(unsigned i) const;
  /// The operand index of tensor argument `i`, or -1.
  int64_t operandIndex(unsigned i) const;
  /// The operand index of element `k` of list argument `i`, or -1 (None).
  int64_t listOperandIndex(unsigned i, unsigned k) const;
  /// The operands of a Tensor[] or Tensor?[] argument (None as null).
  llvm::SmallVector<mlir::Value> tensorList(unsigned i) const;
  bool isNone(unsigned i) const;
  std::optional<int64_t> getInt(unsigned i) const;
  /// A float, or an integer read as a float (a Scalar may be either).
  std::optional<double> getFloat(unsigned i) const;
  std::optional<bool> getBool(unsigned i) const;
  std::optional<llvm::SmallVector<int64_t>> getInts(unsigned i) const;
  std::optional<llvm::StringRef> getString(unsigned i) const;

private:
  mutable CallOp op; // op accessors are not const
  llvm::SmallVector<mlir::Attribute> attrs;
  llvm::SmallVector<unsigned> firstOperand; // per argument
};

/// One schema argument of a call being built.
struct ArgValue {
  enum class Kind { Tensor, TensorList, OptionalTensorList, Attr };
  Kind kind = Kind::Attr;
  mlir::Value tensor;
  llvm::SmallVector<mlir::Value> list; // OptionalTensorList: null is None
  mlir::Attribute attr;

  ArgValue(mlir::Value v) : kind(Kind::Tensor), tensor(v) {}
  ArgValue(mlir::Attribute a) : attr(a) {}
  static ArgValue tensors(mlir::ValueRange values);
  static ArgValue optionalTensors(llvm::ArrayRef<mlir::Value> values);
};

/// The shape both shapes broadcast to, or nullopt if they do not.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

/// Builds ATen calls at the builder's insertion point.
class ATenBuilder {
public:
  ATenBuilder(mlir::OpBuilder &builder, mlir::Location loc)
      : b(builder), loc(loc) {}

  mlir::OpBuilder &builder() { return b; }
  mlir::Location getLoc() const { return loc; }
  void setLoc(mlir::Location l) { loc = l; }

  // Non-tensor arguments, encoded as the importer encodes them.
  mlir::Attribute i64(int64_t v) { return b.getI64IntegerAttr(v); }
  mlir::Attribute f64(double v) { return b.getF64FloatAttr(v); }
  mlir::Attribute boolean(bool v) { return b.getBoolAttr(v); }
  mlir::Attribute str(llvm::StringRef v) { return b.getStringAttr(v); }
  mlir::Attribute none();
  mlir::Attribute ints(llvm::ArrayRef<int64_t> v);
  mlir::Attribute bools(llvm::ArrayRef<bool> v);
  mlir::Attribute dtype(mlir::Type elementType) {
    return mlir::TypeAttr::get(elementType);
  }

  /// A call with the given result types.
  CallOp create(llvm::StringRef overload, llvm::ArrayRef<ArgValue> args,
                mlir::TypeRange results, llvm::ArrayRef<int64_t> mutates = {},
                bool listResult = false);
  /// A call with one result.
  mlir::Value call(llvm::StringRef overload, llvm::ArrayRef<ArgValue> args,
                   mlir::Type result);

  /// An in-place call (`aten::add_.Tensor`) writing its first argument,
  /// made functional: returns the new value. The runtime writes in place
  /// when nothing else holds the old one.
  mlir::Value callInPlace(llvm::StringRef overload,
                          llvm::ArrayRef<ArgValue> args);

  /// A constant tensor of `type` with every element `value`.
  mlir::Value splat(mlir::RankedTensorType type, double value);

  // Common ops, with their result types computed here.
  mlir::Value add(mlir::Value a, mlir::Value b, double alpha = 1.0);
  mlir::Value sub(mlir::Value a, mlir::Value b);
  mlir::Value mul(mlir::Value a, mlir::Value b);
  mlir::Value div(mlir::Value a, mlir::Value b);
  mlir::Value mulScalar(mlir::Value a, double s);
  mlir::Value divScalar(mlir::Value a, double s);
  mlir::Value addScalar(mlir::Value a, double s);
  mlir::Value neg(mlir::Value a);
  mlir::Value unary(llvm::StringRef overload, mlir::Value a);
  mlir::Value reshape(mlir::Value v, llvm::ArrayRef<int64_t> shape);
  mlir::Value transpose(mlir::Value v, int64_t d0, int64_t d1);
  mlir::Value permute(mlir::Value v, llvm::ArrayRef<int64_t> dims);
  mlir::Value expand(mlir::Value v, llvm::ArrayRef<int64_t> shape);
  mlir::Value sumDims(mlir::Value v, llvm::ArrayRef<int64_t> dims,
                      bool keepdim);
  /// Sums a broadcast value back to `shape` (the gradient of a broadcast).
  mlir::Value sumToShape(mlir::Value v, llvm::ArrayRef<int64_t> shape);
  mlir::Value mm(mlir::Value a, mlir::Value b);
  mlir::Value bmm(mlir::Value a, mlir::Value b);
  mlir::Value matmul(mlir::Value a, mlir::Value b);
  /// Zeros shaped `type`, on `like`'s device.
  mlir::Value zeros(mlir::Value like, mlir::RankedTensorType type);
  mlir::Value cast(mlir::Value v, mlir::Type elementType);
  mlir::Value slice(mlir::Value v, int64_t dim, int64_t start, int64_t end);
  mlir::Value select(mlir::Value v, int64_t dim, int64_t index);
  mlir::Value cat(mlir::ValueRange values, int64_t dim);
  mlir::Value where(mlir::Value cond, mlir::Value a, double other);

  /// The element type of a binary op's result (PyTorch's type promotion for
  /// the cases passes build).
  static mlir::Type promote(mlir::Value a, mlir::Value b);
  static mlir::RankedTensorType typeOf(mlir::Value v) {
    return llvm::cast<mlir::RankedTensorType>(v.getType());
  }

private:
  mlir::Value binary(llvm::StringRef overload, mlir::Value a, mlir::Value b,
                     std::optional<double> alpha);

  mlir::OpBuilder &b;
  mlir::Location loc;
};

} // namespace fsdp::aten

#endif // FSDP_DIALECT_ATEN_IR_ATENBUILDER_H
