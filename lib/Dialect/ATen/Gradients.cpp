//===- Gradients.cpp - one gradient rule per ATen op -----------------------===//
//
// Each rule is the formula of PyTorch's derivatives.yaml for that op, written
// with ATen ops and, where ATen has one, its own backward kernel, so the
// arithmetic is the arithmetic eager autograd does. Argument positions are
// schema positions (`aten::linear(input=0, weight=1, bias=2)`).
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/ATen/Gradients.h"

#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <numeric>

using namespace mlir;
using namespace fsdp::aten;

//===----------------------------------------------------------------------===//
// GradientContext
//===----------------------------------------------------------------------===//

GradientContext::GradientContext(ATenBuilder &builder, CallOp op,
                                 ArrayRef<Value> resultGrads,
                                 ArrayRef<bool> operandNeedsGrad)
    : b(builder), op(op), args(op), resultGrads(resultGrads),
      needsGrad(operandNeedsGrad), grads(op.getNumOperands()) {}

Value GradientContext::grad(unsigned i) const {
  return i < resultGrads.size() ? resultGrads[i] : Value();
}

Value GradientContext::gradOrZeros(unsigned i) {
  if (Value g = grad(i))
    return g;
  Value like = llvm::find_if(resultGrads, [](Value v) { return bool(v); })[0];
  return b.zeros(like, cast<RankedTensorType>(op.getResult(i).getType()));
}

bool GradientContext::needs(unsigned arg) const {
  int64_t index = args.operandIndex(arg);
  return index >= 0 && needsGrad[index];
}

bool GradientContext::needsListElement(unsigned arg, unsigned k) const {
  int64_t index = args.listOperandIndex(arg, k);
  return index >= 0 && needsGrad[index];
}

/// `g` in `operand`'s floating-point type: as autograd's engine casts a
/// gradient to its input's dtype, for ops whose result type differs from an
/// input's (a cast, a bf16 tensor promoted with an f32 one).
static Value inOperandType(ATenBuilder &b, Value g, Value operand) {
  Type want = cast<ShapedType>(operand.getType()).getElementType();
  Type have = cast<ShapedType>(g.getType()).getElementType();
  if (want == have || !isa<FloatType>(want) || !isa<FloatType>(have))
    return g;
  return b.cast(g, want);
}

void GradientContext::set(unsigned arg, Value g) {
  int64_t index = args.operandIndex(arg);
  if (index >= 0 && needsGrad[index] && g)
    grads[index] = inOperandType(b, g, op->getOperand(index));
}

void GradientContext::setListElement(unsigned arg, unsigned k, Value g) {
  int64_t index = args.listOperandIndex(arg, k);
  if (index >= 0 && needsGrad[index] && g)
    grads[index] = inOperandType(b, g, op->getOperand(index));
}

LogicalResult GradientContext::fail(const Twine &message) {
  return op.emitOpError("cannot be differentiated: ") << message;
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

namespace {

using Rule = GradientRule;

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }
ArrayRef<int64_t> shapeOf(Value v) { return typeOf(v).getShape(); }

int64_t normDim(int64_t dim, int64_t rank) { return dim < 0 ? dim + rank : dim; }

RankedTensorType withShape(Value like, ArrayRef<int64_t> shape) {
  return RankedTensorType::get(shape, typeOf(like).getElementType());
}

/// Replaces the results of `old` by `values` (one per result) and erases it.
void replaceCall(CallOp old, ArrayRef<Value> values) {
  for (auto [result, value] : llvm::zip(old.getResults(), values))
    result.replaceAllUsesWith(value);
  old.erase();
}

/// Replaces a one-output op, or its in-place form (whose result and new
/// value of `self` are one value), by `output`.
void replaceOutput(CallOp old, Value output) {
  replaceCall(old, SmallVector<Value>(old.getNumResults(), output));
}

/// A required constant argument; an error at the op if it is not one.
#define REQUIRE(var, expr, what)                                               \
  auto var = (expr);                                                           \
  if (!var)                                                                    \
    return c.fail(Twine(what) + " must be a compile-time constant");

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

LogicalResult identity(GradientContext &c) {
  c.set(0, c.grad());
  return success();
}

/// Rules of the form `KERNEL(grad, X, extra...)` for ATen's own elementwise
/// backward kernels: X is the input (`self`) or the result.
template <const char *Kernel, bool UseResult>
LogicalResult kernelOfGrad(GradientContext &c) {
  Value x = UseResult ? c.result() : c.args.tensor(0);
  c.set(0, c.b.call(Kernel, {c.grad(), x}, c.grad().getType()));
  return success();
}

constexpr char kTanhBackward[] = "aten::tanh_backward";
constexpr char kSigmoidBackward[] = "aten::sigmoid_backward";
constexpr char kSiluBackward[] = "aten::silu_backward";
constexpr char kHardswishBackward[] = "aten::hardswish_backward";
constexpr char kHardsigmoidBackward[] = "aten::hardsigmoid_backward";
constexpr char kMishBackward[] = "aten::mish_backward";

LogicalResult relu(GradientContext &c) {
  c.set(0, c.b.call("aten::threshold_backward",
                    {c.grad(), c.result(), c.b.i64(0)}, c.grad().getType()));
  return success();
}

LogicalResult hardtanh(GradientContext &c) {
  c.set(0, c.b.call("aten::hardtanh_backward",
                    {c.grad(), c.args.tensor(0), c.args.attr(1), c.args.attr(2)},
                    c.grad().getType()));
  return success();
}

LogicalResult relu6(GradientContext &c) {
  c.set(0, c.b.call("aten::hardtanh_backward",
                    {c.grad(), c.args.tensor(0), c.b.i64(0), c.b.i64(6)},
                    c.grad().getType()));
  return success();
}

LogicalResult gelu(GradientContext &c) {
  SmallVector<ArgValue> args{c.grad(), c.args.tensor(0)};
  args.push_back(c.args.size() > 1 ? c.args.attr(1) : c.b.str("none"));
  c.set(0, c.b.call("aten::gelu_backward", args, c.grad().getType()));
  return success();
}

LogicalResult leakyRelu(GradientContext &c) {
  c.set(0, c.b.call("aten::leaky_relu_backward",
                    {c.grad(), c.args.tensor(0), c.args.attr(1),
                     c.b.boolean(false)},
                    c.grad().getType()));
  return success();
}

LogicalResult elu(GradientContext &c) {
  c.set(0, c.b.call("aten::elu_backward",
                    {c.grad(), c.args.attr(1), c.args.attr(2), c.args.attr(3),
                     c.b.boolean(false), c.args.tensor(0)},
                    c.grad().getType()));
  return success();
}

LogicalResult softplus(GradientContext &c) {
  c.set(0, c.b.call("aten::softplus_backward",
                    {c.grad(), c.args.tensor(0), c.args.attr(1), c.args.attr(2)},
                    c.grad().getType()));
  return success();
}

LogicalResult expRule(GradientContext &c) {
  c.set(0, c.b.mul(c.grad(), c.result()));
  return success();
}

LogicalResult logRule(GradientContext &c) {
  c.set(0, c.b.div(c.grad(), c.args.tensor(0)));
  return success();
}

LogicalResult sqrtRule(GradientContext &c) {
  c.set(0, c.b.div(c.grad(), c.b.mulScalar(c.result(), 2.0)));
  return success();
}

LogicalResult rsqrtRule(GradientContext &c) {
  // -0.5 * grad * result^3
  Value cube = c.b.call("aten::pow.Tensor_Scalar", {c.result(), c.b.i64(3)},
                        c.result().getType());
  c.set(0, c.b.mul(c.grad(), c.b.mulScalar(cube, -0.5)));
  return success();
}

LogicalResult negRule(GradientContext &c) {
  c.set(0, c.b.neg(c.grad()));
  return success();
}

LogicalResult absRule(GradientContext &c) {
  c.set(0, c.b.mul(c.grad(), c.b.unary("aten::sgn", c.args.tensor(0))));
  return success();
}

LogicalResult sinRule(GradientContext &c) {
  c.set(0, c.b.mul(c.grad(), c.b.unary("aten::cos", c.args.tensor(0))));
  return success();
}

LogicalResult cosRule(GradientContext &c) {
  Value sin = c.b.unary("aten::sin", c.args.tensor(0));
  c.set(0, c.b.mul(c.grad(), c.b.neg(sin)));
  return success();
}

LogicalResult powScalar(GradientContext &c) {
  REQUIRE(exponent, c.args.getFloat(1), "the exponent");
  Value self = c.args.tensor(0);
  if (*exponent == 0.0) {
    c.set(0, c.b.zeros(c.grad(), typeOf(self)));
    return success();
  }
  // grad * exponent * self^(exponent - 1)
  Value pow = c.b.call("aten::pow.Tensor_Scalar",
                       {self, c.b.f64(*exponent - 1.0)}, self.getType());
  c.set(0, c.b.mul(c.grad(), c.b.mulScalar(pow, *exponent)));
  return success();
}

LogicalResult square(GradientContext &c) {
  c.set(0, c.b.mul(c.grad(), c.b.mulScalar(c.args.tensor(0), 2.0)));
  return success();
}

LogicalResult reciprocal(GradientContext &c) {
  Value sq = c.b.mul(c.result(), c.result());
  c.set(0, c.b.mul(c.grad(), c.b.neg(sq)));
  return success();
}

LogicalResult erfRule(GradientContext &c) {
  Value self = c.args.tensor(0);
  Value e = c.b.unary("aten::exp", c.b.neg(c.b.mul(self, self)));
  c.set(0, c.b.mul(c.grad(), c.b.mulScalar(e, 2.0 / std::sqrt(M_PI))));
  return success();
}

/// Where the input passed through a clamp unchanged.
Value clampMask(GradientContext &c, Value self, std::optional<unsigned> minArg,
                std::optional<unsigned> maxArg) {
  auto boolType = RankedTensorType::get(shapeOf(self),
                                        c.b.builder().getI1Type());
  Value mask;
  auto combine = [&](const char *cmp, unsigned arg) {
    if (c.args.isNone(arg))
      return;
    Value m = c.b.call(cmp, {self, c.args.attr(arg)}, boolType);
    mask = mask ? c.b.call("aten::logical_and", {mask, m}, boolType) : m;
  };
  if (minArg)
    combine("aten::ge.Scalar", *minArg);
  if (maxArg)
    combine("aten::le.Scalar", *maxArg);
  return mask;
}

LogicalResult clampWith(GradientContext &c, std::optional<unsigned> minArg,
                        std::optional<unsigned> maxArg) {
  Value self = c.args.tensor(0);
  for (std::optional<unsigned> arg : {minArg, maxArg})
    if (arg && !c.args.isNone(*arg) && !c.args.getFloat(*arg))
      return c.autograd();
  Value mask = clampMask(c, self, minArg, maxArg);
  c.set(0, mask ? c.b.where(mask, c.grad(), 0.0) : c.grad());
  return success();
}

LogicalResult clamp(GradientContext &c) { return clampWith(c, 1u, 2u); }
LogicalResult clampMin(GradientContext &c) {
  return clampWith(c, 1u, std::nullopt);
}
LogicalResult clampMax(GradientContext &c) {
  return clampWith(c, std::nullopt, 1u);
}

//===----------------------------------------------------------------------===//
// Binary arithmetic (broadcasting: gradients are summed back to each shape)
//===----------------------------------------------------------------------===//

void setSummed(GradientContext &c, unsigned arg, Value g) {
  if (!c.needs(arg) || !g)
    return;
  c.set(arg, c.b.sumToShape(g, shapeOf(c.args.tensor(arg))));
}

Value scaled(GradientContext &c, Value g, double alpha) {
  if (alpha == 1.0)
    return g;
  if (alpha == -1.0)
    return c.b.neg(g);
  return c.b.mulScalar(g, alpha);
}

LogicalResult addTensor(GradientContext &c) {
  REQUIRE(alpha, c.args.getFloat(2), "alpha");
  setSummed(c, 0, c.grad());
  if (c.needs(1))
    setSummed(c, 1, scaled(c, c.grad(), *alpha));
  return success();
}

LogicalResult subTensor(GradientContext &c) {
  REQUIRE(alpha, c.args.getFloat(2), "alpha");
  setSummed(c, 0, c.grad());
  if (c.needs(1))
    setSummed(c, 1, scaled(c, c.grad(), -*alpha));
  return success();
}

LogicalResult rsubTensor(GradientContext &c) {
  // other - alpha * self
  REQUIRE(alpha, c.args.getFloat(2), "alpha");
  if (c.needs(0))
    setSummed(c, 0, scaled(c, c.grad(), -*alpha));
  setSummed(c, 1, c.grad());
  return success();
}

LogicalResult rsubScalar(GradientContext &c) {
  REQUIRE(alpha, c.args.getFloat(2), "alpha");
  c.set(0, scaled(c, c.grad(), -*alpha));
  return success();
}

LogicalResult mulTensor(GradientContext &c) {
  Value self = c.args.tensor(0), other = c.args.tensor(1);
  if (c.needs(0))
    setSummed(c, 0, c.b.mul(c.grad(), other));
  if (c.needs(1))
    setSummed(c, 1, c.b.mul(c.grad(), self));
  return success();
}

LogicalResult mulScalar(GradientContext &c) {
  REQUIRE(other, c.args.getFloat(1), "the scalar factor");
  c.set(0, c.b.mulScalar(c.grad(), *other));
  return success();
}

LogicalResult divTensor(GradientContext &c) {
  if (c.args.size() > 2 && !c.args.isNone(2)) {
    // Rounding divisions are piecewise constant: zero gradients.
    for (unsigned arg : {0u, 1u})
      if (c.needs(arg))
        c.set(arg, c.b.zeros(c.grad(), typeOf(c.args.tensor(arg))));
    return success();
  }
  Value self = c.args.tensor(0), other = c.args.tensor(1);
  if (c.needs(0))
    setSummed(c, 0, c.b.div(c.grad(), other));
  if (c.needs(1)) {
    // -grad * ((self / other) / other)
    Value q = c.b.div(c.b.div(self, other), other);
    setSummed(c, 1, c.b.neg(c.b.mul(c.grad(), q)));
  }
  return success();
}

LogicalResult divScalar(GradientContext &c) {
  if (c.args.size() > 2 && !c.args.isNone(2)) {
    c.set(0, c.b.zeros(c.grad(), typeOf(c.args.tensor(0))));
    return success();
  }
  REQUIRE(other, c.args.getFloat(1), "the divisor");
  c.set(0, c.b.divScalar(c.grad(), *other));
  return success();
}

/// maximum / minimum: the gradient goes to the larger (smaller) input, split
/// in half on ties.
template <bool IsMax>
LogicalResult extremum(GradientContext &c) {
  Value self = c.args.tensor(0), other = c.args.tensor(1);
  auto shape = broadcastShapes(shapeOf(self), shapeOf(other));
  auto boolType = RankedTensorType::get(*shape, c.b.builder().getI1Type());
  Value tie = c.b.call("aten::eq.Tensor", {self, other}, boolType);
  Value half = c.b.divScalar(c.grad(), 2.0);
  Value split = c.b.call("aten::where.self", {tie, half, c.grad()},
                         c.grad().getType());
  auto towards = [&](const char *cmp) {
    Value loses = c.b.call(cmp, {self, other}, boolType);
    return c.b.call("aten::masked_fill.Scalar", {split, loses, c.b.i64(0)},
                    split.getType());
  };
  if (c.needs(0))
    setSummed(c, 0, towards(IsMax ? "aten::lt.Tensor" : "aten::gt.Tensor"));
  if (c.needs(1))
    setSummed(c, 1, towards(IsMax ? "aten::gt.Tensor" : "aten::lt.Tensor"));
  return success();
}

LogicalResult whereSelf(GradientContext &c) {
  Value cond = c.args.tensor(0);
  if (c.needs(1))
    setSummed(c, 1, c.b.where(cond, c.grad(), 0.0));
  if (c.needs(2))
    setSummed(c, 2, c.b.call("aten::where.ScalarSelf",
                             {cond, c.b.f64(0.0), c.grad()},
                             c.grad().getType()));
  return success();
}

LogicalResult maskedFill(GradientContext &c) {
  Value mask = c.args.tensor(1);
  if (c.needs(0))
    c.set(0, c.b.call("aten::masked_fill.Scalar", {c.grad(), mask, c.b.i64(0)},
                      c.grad().getType()));
  if (c.needs(2)) {
    // value (a 0-dim tensor) receives the gradient of every filled element.
    Value filled = c.b.where(mask, c.grad(), 0.0);
    c.set(2, c.b.call("aten::sum", {filled, c.b.none()},
                      withShape(c.grad(), {})));
  }
  return success();
}

LogicalResult addcmul(GradientContext &c) {
  REQUIRE(value, c.args.getFloat(3), "value");
  Value t1 = c.args.tensor(1), t2 = c.args.tensor(2);
  setSummed(c, 0, c.grad());
  if (c.needs(1))
    setSummed(c, 1, scaled(c, c.b.mul(c.grad(), t2), *value));
  if (c.needs(2))
    setSummed(c, 2, scaled(c, c.b.mul(c.grad(), t1), *value));
  return success();
}

//===----------------------------------------------------------------------===//
// Matrix products
//===----------------------------------------------------------------------===//

/// The strides eager gives `v`: a contiguous tensor's, through the
/// transposing views (t, transpose, permute, numpy_T, mT) and aliases (a
/// conversion to the type it has) that made it.
SmallVector<int64_t> eagerStrides(Value v) {
  ArrayRef<int64_t> shape = shapeOf(v);
  int64_t rank = shape.size();
  if (auto call = v.getDefiningOp<CallOp>()) {
    CallArgs a(call);
    Value in = a.size() ? a.tensor(0) : Value();
    StringRef name = call.getOpName();
    if (in && isa<RankedTensorType>(in.getType()) &&
        typeOf(in).getRank() == rank) {
      SmallVector<int64_t> perm(rank);
      std::iota(perm.begin(), perm.end(), 0);
      bool view = false;
      if (name == "aten::t" && rank == 2) {
        std::swap(perm[0], perm[1]);
        view = true;
      } else if (name == "aten::numpy_T") {
        std::reverse(perm.begin(), perm.end());
        view = true;
      } else if ((name == "aten::mT" || name == "aten::adjoint") && rank >= 2) {
        std::swap(perm[rank - 2], perm[rank - 1]);
        view = true;
      } else if (name == "aten::alias" ||
                 (name == "aten::to" && in.getType() == v.getType())) {
        // An alias; a conversion to the type it has returns its input.
        view = true;
      } else if (name == "aten::transpose" && rank > 0) {
        auto d0 = a.getInt(1), d1 = a.getInt(2);
        if (d0 && d1) {
          std::swap(perm[normDim(*d0, rank)], perm[normDim(*d1, rank)]);
          view = true;
        }
      } else if (name == "aten::permute") {
        if (auto dims = a.getInts(1); dims && (int64_t)dims->size() == rank) {
          for (int64_t i = 0; i < rank; ++i)
            perm[i] = normDim((*dims)[i], rank);
          view = true;
        }
      }
      if (view) {
        SmallVector<int64_t> inner = eagerStrides(in), strides(rank);
        for (int64_t i = 0; i < rank; ++i)
          strides[i] = inner[perm[i]];
        return strides;
      }
    }
  }
  SmallVector<int64_t> strides(rank, 1);
  for (int64_t i = rank - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * std::max<int64_t>(shape[i + 1], 1);
  return strides;
}

/// Whether eager holds `v` contiguous (as is_contiguous: dimensions of size
/// 1 have any stride).
bool eagerContiguous(Value v) {
  ArrayRef<int64_t> shape = shapeOf(v);
  SmallVector<int64_t> strides = eagerStrides(v);
  int64_t expected = 1;
  for (int64_t d = shape.size() - 1; d >= 0; --d) {
    if (shape[d] == 0)
      return true;
    if (shape[d] != 1 && strides[d] != expected)
      return false;
    expected *= shape[d];
  }
  return true;
}

/// Whether autograd's mm_mat1_backward / mm_mat2_backward see the matrix
/// `m` as column-major (strides [1, rows]): a transposed matrix.
bool columnMajor(Value m) {
  if (typeOf(m).getRank() != 2)
    return false;
  SmallVector<int64_t> strides = eagerStrides(m);
  return strides[0] == 1 && strides[1] == shapeOf(m)[0];
}

/// The gradient of mm's first operand `self` as autograd computes it: for a
/// column-major `self`, the transposed product (a column-major result, and
/// the BLAS call, so the rounding, eager's).
Value mmSelfGrad(ATenBuilder &b, Value grad, Value self, Value other) {
  if (columnMajor(self))
    return b.transpose(b.mm(other, b.transpose(grad, 0, 1)), 0, 1);
  return b.mm(grad, b.transpose(other, 0, 1));
}

/// The gradient of mm's second operand `other`, likewise.
Value mmOtherGrad(ATenBuilder &b, Value grad, Value self, Value other) {
  if (columnMajor(other))
    return b.transpose(b.mm(b.transpose(grad, 0, 1), self), 0, 1);
  return b.mm(b.transpose(self, 0, 1), grad);
}

LogicalResult linear(GradientContext &c) {
  Value input = c.args.tensor(0), weight = c.args.tensor(1);
  if (typeOf(weight).getRank() != 2 || typeOf(input).getRank() < 1)
    return c.autograd();
  int64_t out = shapeOf(weight)[0], in = shapeOf(weight)[1];
  // The rows ATen folds the input's leading dimensions into: their product.
  // (Not numel / in: for a zero-size weight, in = 0, that is 0 rows, and
  // the [rows, out] gradient cannot be reshaped to [0, out].)
  int64_t rows = ShapedType::getNumElements(shapeOf(input).drop_back());
  Value g2 = c.b.reshape(c.grad(), {rows, out});
  if (c.needs(0))
    c.set(0, typeOf(input).getRank() == 2 && columnMajor(input)
                 // ATen's mm(input, weight.t()) on a transposed input.
                 ? mmSelfGrad(c.b, g2, input, c.b.transpose(weight, 0, 1))
                 : c.b.reshape(c.b.mm(g2, weight), shapeOf(input)));
  if (c.needs(1))
    c.set(1, c.b.mm(c.b.transpose(g2, 0, 1), c.b.reshape(input, {rows, in})));
  if (c.needs(2)) {
    // ATen folds a contiguous input's leading dimensions into the rows of
    // one addmm, whose bias gradient sums those rows (the gradient reshaped,
    // a copy where it cannot be viewed so); otherwise it calls matmul and
    // adds the bias, whose gradient sums the gradient as it is laid out.
    bool folds = typeOf(input).getRank() == 2 || eagerContiguous(input);
    c.set(2, c.b.sumToShape(folds ? g2 : c.grad(), {out}));
  }
  return success();
}

LogicalResult mm(GradientContext &c) {
  Value self = c.args.tensor(0), other = c.args.tensor(1);
  if (c.needs(0))
    c.set(0, mmSelfGrad(c.b, c.grad(), self, other));
  if (c.needs(1))
    c.set(1, mmOtherGrad(c.b, c.grad(), self, other));
  return success();
}

LogicalResult bmm(GradientContext &c) {
  Value self = c.args.tensor(0), other = c.args.tensor(1);
  if (c.needs(0))
    c.set(0, c.b.bmm(c.grad(), c.b.transpose(other, 1, 2)));
  if (c.needs(1))
    c.set(1, c.b.bmm(c.b.transpose(self, 1, 2), c.grad()));
  return success();
}

/// addmm / baddbmm: beta * self + alpha * (mat1 @ mat2).
template <bool Batched>
LogicalResult addmmLike(GradientContext &c) {
  REQUIRE(beta, c.args.getFloat(3), "beta");
  REQUIRE(alpha, c.args.getFloat(4), "alpha");
  Value m1 = c.args.tensor(1), m2 = c.args.tensor(2);
  int64_t r = Batched ? 1 : 0;
  auto product = [&](Value a, Value b) {
    return Batched ? c.b.bmm(a, b) : c.b.mm(a, b);
  };
  if (c.needs(0))
    setSummed(c, 0, scaled(c, c.grad(), *beta));
  if (c.needs(1))
    c.set(1, scaled(c, Batched ? product(c.grad(), c.b.transpose(m2, r, r + 1))
                               : mmSelfGrad(c.b, c.grad(), m1, m2),
                    *alpha));
  if (c.needs(2))
    c.set(2, scaled(c, Batched ? product(c.b.transpose(m1, r, r + 1), c.grad())
                               : mmOtherGrad(c.b, c.grad(), m1, m2),
                    *alpha));
  return success();
}

LogicalResult matmul(GradientContext &c) {
  Value self = c.args.tensor(0), other = c.args.tensor(1);
  int64_t rs = typeOf(self).getRank(), ro = typeOf(other).getRank();
  if (rs == 1 && ro == 1)
    return c.autograd();
  // Vectors become matrices ([k] -> [1, k] on the left, [k, 1] on the
  // right), as matmul itself treats them; the gradient follows.
  Value a = rs == 1 ? c.b.reshape(self, {1, shapeOf(self)[0]}) : self;
  Value b = ro == 1 ? c.b.reshape(other, {shapeOf(other)[0], 1}) : other;
  SmallVector<int64_t> gshape(shapeOf(c.grad()));
  if (rs == 1)
    gshape.insert(gshape.end() - (ro == 1 ? 0 : 1), 1);
  if (ro == 1)
    gshape.push_back(1);
  Value g = c.b.reshape(c.grad(), gshape);
  if (rs >= 3 && ro == 2) {
    // ATen folds the batch into rows and calls mm: differentiate that mm
    // (the weight's gradient is one matrix product, not a batched one).
    int64_t k = shapeOf(self).back(), n = shapeOf(other)[1];
    // The batch folded into rows: the leading dimensions' product (not
    // numel / k, which is 0 for an empty inner dimension k = 0).
    int64_t rows = ShapedType::getNumElements(shapeOf(self).drop_back());
    Value g2 = c.b.reshape(c.grad(), {rows, n});
    if (c.needs(0))
      c.set(0, c.b.reshape(c.b.mm(g2, c.b.transpose(other, 0, 1)),
                           shapeOf(self)));
    if (c.needs(1))
      c.set(1, c.b.mm(c.b.transpose(c.b.reshape(self, {rows, k}), 0, 1), g2));
    return success();
  }
  if (rs >= 3 && ro >= 3) {
    // ATen expands both batch portions to their broadcast, reshapes them to
    // [batch, n, m] x [batch, m, p] and calls bmm: differentiate that bmm as
    // autograd does, on the same operands, so that the products round as
    // eager's (a BLAS may sum a transposed operand in another order).
    ArrayRef<int64_t> sa = shapeOf(self), so = shapeOf(other);
    std::optional<SmallVector<int64_t>> batch = broadcastShapes(
        sa.drop_back(2), so.drop_back(2));
    if (!batch)
      return c.autograd();
    int64_t count = ShapedType::getNumElements(*batch);
    int64_t n = sa[rs - 2], m = sa[rs - 1], p = so[ro - 1];
    SmallVector<int64_t> ea(*batch), eb(*batch);
    ea.append({n, m});
    eb.append({m, p});
    // Each side's operand only where the other side's gradient needs it.
    Value a3 = c.needs(1) ? c.b.reshape(c.b.expand(self, ea), {count, n, m})
                          : Value();
    Value b3 = c.needs(0) ? c.b.reshape(c.b.expand(other, eb), {count, m, p})
                          : Value();
    Value g3 = c.b.reshape(c.grad(), {count, n, p});
    if (c.needs(0))
      c.set(0, c.b.sumToShape(
                   c.b.reshape(c.b.bmm(g3, c.b.transpose(b3, 1, 2)), ea), sa));
    if (c.needs(1))
      c.set(1, c.b.sumToShape(
                   c.b.reshape(c.b.bmm(c.b.transpose(a3, 1, 2), g3), eb), so));
    return success();
  }
  if (rs == 2 && ro == 2) {
    // ATen calls mm: its gradients, as autograd takes them.
    if (c.needs(0))
      c.set(0, mmSelfGrad(c.b, g, self, other));
    if (c.needs(1))
      c.set(1, mmOtherGrad(c.b, g, self, other));
    return success();
  }
  if (c.needs(0)) {
    Value ga = c.b.matmul(g, c.b.transpose(b, -1, -2));
    c.set(0, c.b.reshape(c.b.sumToShape(ga, shapeOf(a)), shapeOf(self)));
  }
  if (c.needs(1)) {
    Value gb = c.b.matmul(c.b.transpose(a, -1, -2), g);
    c.set(1, c.b.reshape(c.b.sumToShape(gb, shapeOf(b)), shapeOf(other)));
  }
  return success();
}

LogicalResult tRule(GradientContext &c) {
  c.set(0, typeOf(c.grad()).getRank() < 2 ? c.grad()
                                         : c.b.transpose(c.grad(), 0, 1));
  return success();
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

/// A per-spatial-dimension list, a single value repeated as ATen does.
std::optional<SmallVector<int64_t>> spatialList(GradientContext &c,
                                                unsigned arg, int64_t n) {
  auto v = c.args.getInts(arg);
  if (!v)
    return std::nullopt;
  if (v->size() == 1)
    v->assign(n, (*v)[0]);
  if (static_cast<int64_t>(v->size()) != n)
    return std::nullopt;
  return v;
}

struct ConvArgs {
  unsigned stride, padding, dilation, groups;
  std::optional<unsigned> transposedArg, outputPadding;
  bool transposed = false; // when no argument says
};

LogicalResult convolution(GradientContext &c, const ConvArgs &a) {
  Value input = c.args.tensor(0), weight = c.args.tensor(1);
  int64_t spatial = typeOf(weight).getRank() - 2;
  if (typeOf(input).getRank() != spatial + 2)
    return c.autograd();
  bool transposed = a.transposed;
  if (a.transposedArg) {
    REQUIRE(t, c.args.getBool(*a.transposedArg), "transposed");
    transposed = *t;
  }
  REQUIRE(stride, spatialList(c, a.stride, spatial), "stride");
  REQUIRE(dilation, spatialList(c, a.dilation, spatial), "dilation");
  REQUIRE(groups, c.args.getInt(a.groups), "groups");
  SmallVector<int64_t> padding;
  if (auto mode = c.args.getString(a.padding)) {
    // conv2d.padding: "valid" is no padding; "same" pads (dilation *
    // (kernel - 1)) / 2 on each side when that is even.
    for (int64_t d = 0; d < spatial; ++d) {
      int64_t total = (*mode == "same")
                          ? (*dilation)[d] * (shapeOf(weight)[d + 2] - 1)
                          : 0;
      if (total % 2 != 0)
        return c.autograd(); // asymmetric padding
      padding.push_back(total / 2);
    }
  } else {
    REQUIRE(p, spatialList(c, a.padding, spatial), "padding");
    padding = *p;
  }
  SmallVector<int64_t> outputPadding(spatial, 0);
  if (a.outputPadding) {
    REQUIRE(op, spatialList(c, *a.outputPadding, spatial), "output_padding");
    outputPadding = *op;
  }
  int64_t outChannels = transposed ? shapeOf(weight)[1] * *groups
                                   : shapeOf(weight)[0];
  bool hasBias = c.args.tensor(2) != nullptr;
  SmallVector<bool> mask{c.needs(0), c.needs(1), hasBias && c.needs(2)};
  auto biasType = withShape(weight, {outChannels});
  CallOp back = c.b.create(
      "aten::convolution_backward",
      {c.grad(), input, weight,
       hasBias ? c.b.ints({outChannels}) : c.b.none(), c.b.ints(*stride),
       c.b.ints(padding), c.b.ints(*dilation), c.b.boolean(transposed),
       c.b.ints(outputPadding), c.b.i64(*groups), c.b.bools(mask)},
      {input.getType(), weight.getType(), biasType});
  c.set(0, back.getResult(0));
  c.set(1, back.getResult(1));
  c.set(2, back.getResult(2));
  return success();
}

LogicalResult convNd(GradientContext &c) {
  // conv{1,2,3}d(input, weight, bias, stride, padding, dilation, groups)
  return convolution(c, {3, 4, 5, 6, std::nullopt, std::nullopt});
}
LogicalResult convGeneral(GradientContext &c) {
  // convolution / _convolution(input, weight, bias, stride, padding,
  // dilation, transposed, output_padding, groups, ...)
  return convolution(c, {3, 4, 5, 8, 6u, 7u});
}
LogicalResult convTransposeNd(GradientContext &c) {
  // conv_transpose{1,2,3}d.input(input, weight, bias, stride, padding,
  // output_padding, groups, dilation)
  return convolution(c, {3, 4, 7, 6, std::nullopt, 5u, /*transposed=*/true});
}

//===----------------------------------------------------------------------===//
// Normalization, dropout, pooling (forward rewritten to keep saved values)
//===----------------------------------------------------------------------===//

LogicalResult prepareBatchNorm(ATenBuilder &b, CallOp op, const Target &) {
  // batch_norm(input, weight, bias, running_mean, running_var, training,
  // momentum, eps, cudnn_enabled) -> native_batch_norm, which also returns
  // the batch statistics its backward reads.
  CallArgs args(op);
  Value input = args.tensor(0);
  int64_t channels = shapeOf(input).size() > 1 ? shapeOf(input)[1] : 1;
  bool training = args.getBool(5).value_or(true);
  auto stat = withShape(input, {training ? channels : 0});
  SmallVector<Type> types{input.getType(), stat, stat};
  SmallVector<int64_t> mutates;
  if (auto m = op.getMutates())
    mutates.assign(m->begin(), m->end());
  for (int64_t arg : mutates)
    types.push_back(args.tensor(arg).getType());
  CallOp native = b.create(
      "aten::native_batch_norm",
      {input, args.tensor(1), args.tensor(2), args.tensor(3), args.tensor(4),
       args.attr(5), args.attr(6), args.attr(7)},
      types, mutates);
  SmallVector<Value> values{native.getResult(0)};
  for (size_t k = 0; k < mutates.size(); ++k)
    values.push_back(native.getResult(3 + k));
  replaceCall(op, values);
  return success();
}

LogicalResult nativeBatchNorm(GradientContext &c) {
  Value input = c.args.tensor(0), weight = c.args.tensor(1);
  REQUIRE(training, c.args.getBool(5), "training");
  int64_t channels = shapeOf(input)[1];
  auto stat = withShape(input, {channels});
  SmallVector<bool> mask{c.needs(0), weight && c.needs(1),
                         c.args.tensor(2) && c.needs(2)};
  CallOp back = c.b.create(
      "aten::native_batch_norm_backward",
      {c.grad(), input, weight, c.args.tensor(3), c.args.tensor(4),
       c.result(1), c.result(2), c.b.boolean(*training), c.args.attr(7),
       c.b.bools(mask)},
      {input.getType(), stat, stat});
  c.set(0, back.getResult(0));
  c.set(1, back.getResult(1));
  c.set(2, back.getResult(2));
  return success();
}

/// The shape of layer_norm's saved statistics: the leading dimensions, then
/// ones.
SmallVector<int64_t> layerNormStatShape(Value input, size_t normalized) {
  SmallVector<int64_t> shape(shapeOf(input));
  for (size_t i = shape.size() - normalized; i < shape.size(); ++i)
    shape[i] = 1;
  return shape;
}

LogicalResult prepareLayerNorm(ATenBuilder &b, CallOp op, const Target &) {
  // layer_norm(input, normalized_shape, weight, bias, eps, cudnn_enable)
  CallArgs args(op);
  Value input = args.tensor(0);
  auto normalized = args.getInts(1);
  if (!normalized)
    return op.emitOpError("cannot be differentiated: normalized_shape must be "
                          "a compile-time constant");
  auto stat = withShape(input, layerNormStatShape(input, normalized->size()));
  CallOp native = b.create("aten::native_layer_norm",
                           {input, args.attr(1), args.tensor(2), args.tensor(3),
                            args.attr(4)},
                           {input.getType(), stat, stat});
  replaceOutput(op, native.getResult(0));
  return success();
}

LogicalResult nativeLayerNorm(GradientContext &c) {
  Value input = c.args.tensor(0), weight = c.args.tensor(2),
        bias = c.args.tensor(3);
  REQUIRE(normalized, c.args.getInts(1), "normalized_shape");
  auto paramType = withShape(input, *normalized);
  SmallVector<bool> mask{c.needs(0), weight && c.needs(2), bias && c.needs(3)};
  CallOp back = c.b.create("aten::native_layer_norm_backward",
                           {c.grad(), input, c.args.attr(1), c.result(1),
                            c.result(2), weight, bias, c.b.bools(mask)},
                           {input.getType(), paramType, paramType});
  c.set(0, back.getResult(0));
  c.set(2, back.getResult(1));
  c.set(3, back.getResult(2));
  return success();
}

/// `v` contiguous (aten::contiguous, a view of it where it already is).
static Value contiguous(ATenBuilder &b, Value v) {
  return b.call("aten::contiguous", {v, b.i64(0)}, typeOf(v));
}

LogicalResult prepareGroupNorm(ATenBuilder &b, CallOp op, const Target &) {
  // group_norm(input, num_groups, weight, bias, eps, cudnn_enabled) ->
  // native_group_norm(input.contiguous(), weight, bias, N, C, HxW, group,
  // eps), as at::group_norm calls it: the kernels read the input as
  // contiguous. (On the CPU at::group_norm keeps a channels-last input
  // channels-last, suggest_memory_format; the plan makes it contiguous.)
  CallArgs args(op);
  Value input = args.tensor(0);
  auto groups = args.getInt(1);
  if (!groups || shapeOf(input).size() < 2)
    return op.emitOpError("cannot be differentiated: num_groups must be a "
                          "compile-time constant and the input batched");
  int64_t n = shapeOf(input)[0], ch = shapeOf(input)[1];
  // The spatial dimensions' product (not numel / (N * C), 0 for an empty
  // batch or channel dimension).
  int64_t hw = ShapedType::getNumElements(shapeOf(input).drop_front(2));
  auto stat = withShape(input, {n, *groups});
  CallOp native = b.create("aten::native_group_norm",
                           {contiguous(b, input), args.tensor(2),
                            args.tensor(3), b.i64(n),
                            b.i64(ch), b.i64(hw), b.i64(*groups), args.attr(4)},
                           {input.getType(), stat, stat});
  replaceOutput(op, native.getResult(0));
  return success();
}

LogicalResult nativeGroupNorm(GradientContext &c) {
  // native_group_norm(input, weight, bias, N, C, HxW, group, eps)
  Value input = c.args.tensor(0), weight = c.args.tensor(1);
  int64_t ch = shapeOf(input)[1];
  auto paramType = withShape(input, {ch});
  SmallVector<bool> mask{c.needs(0), weight && c.needs(1),
                         c.args.tensor(2) && c.needs(2)};
  // The kernel reads the gradient and the input as contiguous: a strided
  // gradient (a transpose after the norm) gives wrong values, so both are
  // made contiguous first, as derivatives.yaml's formula does.
  CallOp back = c.b.create("aten::native_group_norm_backward",
                           {contiguous(c.b, c.grad()), contiguous(c.b, input),
                            c.result(1), c.result(2), weight,
                            c.args.attr(3), c.args.attr(4), c.args.attr(5),
                            c.args.attr(6), c.b.bools(mask)},
                           {input.getType(), paramType, paramType});
  c.set(0, back.getResult(0));
  c.set(1, back.getResult(1));
  c.set(2, back.getResult(2));
  return success();
}

LogicalResult prepareDropout(ATenBuilder &b, CallOp op,
                             const Target &target) {
  // dropout(input, p, train): with p > 0 in training, what ATen's CPU
  // dropout computes (at::native::dropout, _dropout_impl): noise of the
  // input's dtype drawn with bernoulli_(1 - p), divided by 1 - p, times the
  // input; mul's gradient then reads the noise. Otherwise the identity it
  // is. On a GPU, ATen's dropout runs the fused native_dropout instead
  // (is_fused_kernel_acceptable), which draws its mask its own way: a step
  // compiled for one does too.
  CallArgs args(op);
  auto p = args.getFloat(1);
  auto train = args.getBool(2);
  if (!p || !train)
    return op.emitOpError("cannot be differentiated: p and train must be "
                          "compile-time constants");
  if (*p == 0.0 || !*train)
    return success();
  Value input = args.tensor(0);
  if (typeOf(input).getNumElements() == 0)
    return success();
  Value out;
  if (*p >= 1.0) {
    out = b.mulScalar(input, 0.0);
  } else if (target.cuda) {
    auto type = cast<RankedTensorType>(input.getType());
    auto mask = RankedTensorType::get(type.getShape(),
                                      b.builder().getI1Type());
    CallOp native = b.create("aten::native_dropout",
                             {input, b.f64(*p), b.boolean(true)},
                             {type, mask});
    out = native.getResult(0);
  } else {
    Value noise = b.call("aten::empty_like",
                         {input, b.none(), b.none(), b.none(), b.none(),
                          b.none()},
                         input.getType());
    noise = b.callInPlace("aten::bernoulli_.float",
                          {noise, b.f64(1.0 - *p), b.none()});
    noise = b.callInPlace("aten::div_.Scalar", {noise, b.f64(1.0 - *p)});
    out = b.mul(input, noise);
  }
  replaceOutput(op, out);
  return success();
}

LogicalResult dropout(GradientContext &c) {
  // Only reached when it is the identity (prepareDropout).
  return identity(c);
}

LogicalResult featureDropout(GradientContext &c) {
  auto p = c.args.getFloat(1);
  auto train = c.args.getBool(2);
  // In training, the mask is drawn inside the op: autograd replays it.
  if (!p || !train || (*p != 0.0 && *train))
    return c.autograd();
  return identity(c);
}

LogicalResult nativeDropout(GradientContext &c) {
  REQUIRE(p, c.args.getFloat(1), "p");
  double scale = *p >= 1.0 ? 0.0 : 1.0 / (1.0 - *p);
  c.set(0, c.b.call("aten::native_dropout_backward",
                    {c.grad(), c.result(1), c.b.f64(scale)},
                    c.grad().getType()));
  return success();
}

LogicalResult prepareMaxPool2d(ATenBuilder &b, CallOp op, const Target &) {
  // max_pool2d(self, kernel_size, stride, padding, dilation, ceil_mode) ->
  // max_pool2d_with_indices, which returns the indices its backward reads.
  CallArgs args(op);
  Type out = op.getResult(0).getType();
  auto indices = RankedTensorType::get(cast<RankedTensorType>(out).getShape(),
                                       b.builder().getIntegerType(64));
  CallOp native = b.create("aten::max_pool2d_with_indices",
                           {args.tensor(0), args.attr(1), args.attr(2),
                            args.attr(3), args.attr(4), args.attr(5)},
                           {out, indices});
  replaceOutput(op, native.getResult(0));
  return success();
}

LogicalResult maxPool2dWithIndices(GradientContext &c) {
  Value self = c.args.tensor(0);
  c.set(0, c.b.call("aten::max_pool2d_with_indices_backward",
                    {c.grad(), self, c.args.attr(1), c.args.attr(2),
                     c.args.attr(3), c.args.attr(4), c.args.attr(5),
                     c.result(1)},
                    self.getType()));
  return success();
}

LogicalResult avgPool2d(GradientContext &c) {
  Value self = c.args.tensor(0);
  c.set(0, c.b.call("aten::avg_pool2d_backward",
                    {c.grad(), self, c.args.attr(1), c.args.attr(2),
                     c.args.attr(3), c.args.attr(4), c.args.attr(5),
                     c.args.attr(6)},
                    self.getType()));
  return success();
}

LogicalResult adaptiveAvgPool2d(GradientContext &c) {
  Value self = c.args.tensor(0);
  // To a 1x1 output ATen computes the mean over H and W: its gradient is
  // the mean's (one division), not the pooling kernel's (two).
  if (c.op.getOpName() == "aten::adaptive_avg_pool2d" &&
      c.args.getInts(1) == SmallVector<int64_t>{1, 1}) {
    int64_t rank = typeOf(self).getRank();
    int64_t n = shapeOf(self)[rank - 1] * shapeOf(self)[rank - 2];
    c.set(0, c.b.divScalar(c.b.expand(c.grad(), shapeOf(self)), double(n)));
    return success();
  }
  c.set(0, c.b.call("aten::_adaptive_avg_pool2d_backward", {c.grad(), self},
                    self.getType()));
  return success();
}

LogicalResult adaptiveMaxPool2d(GradientContext &c) {
  Value self = c.args.tensor(0);
  c.set(0, c.b.call("aten::adaptive_max_pool2d_backward",
                    {c.grad(), self, c.result(1)}, self.getType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Softmax and losses
//===----------------------------------------------------------------------===//

template <bool Log>
LogicalResult softmax(GradientContext &c) {
  Value self = c.args.tensor(0);
  c.set(0, c.b.call(Log ? "aten::_log_softmax_backward_data"
                        : "aten::_softmax_backward_data",
                    {c.grad(), c.result(), c.args.attr(1),
                     c.b.dtype(typeOf(self).getElementType())},
                    c.grad().getType()));
  return success();
}

/// nll_loss_forward's results: the loss (0-dim unless reduction is none) and
/// the total weight.
SmallVector<Type> nllLossTypes(Value input, Value target, int64_t reduction) {
  SmallVector<int64_t> lossShape;
  if (reduction == 0)
    lossShape.assign(shapeOf(target).begin(), shapeOf(target).end());
  return {withShape(input, lossShape), withShape(input, {})};
}

LogicalResult prepareNllLoss(ATenBuilder &b, CallOp op, const Target &) {
  // nll_loss(self, target, weight, reduction, ignore_index) ->
  // nll_loss_forward, which returns the total weight its backward reads.
  CallArgs args(op);
  Value input = args.tensor(0), target = args.tensor(1);
  auto reduction = args.getInt(3);
  if (typeOf(input).getRank() > 2 || !reduction || !target)
    return op.emitOpError("cannot be differentiated: only (N, C) or (C) "
                          "inputs with a constant reduction are supported");
  CallOp forward = b.create("aten::nll_loss_forward",
                            {input, target, args.tensor(2), args.attr(3),
                             args.attr(4)},
                            nllLossTypes(input, target, *reduction));
  replaceOutput(op, forward.getResult(0));
  return success();
}

LogicalResult prepareCrossEntropy(ATenBuilder &b, CallOp op, const Target &) {
  // cross_entropy_loss(self, target, weight, reduction, ignore_index,
  // label_smoothing) with class indices: log_softmax + nll_loss_forward, as
  // ATen composes it.
  CallArgs args(op);
  Value input = args.tensor(0), target = args.tensor(1);
  auto reduction = args.getInt(3);
  auto smoothing = args.getFloat(5);
  if (typeOf(input).getRank() > 2 || !reduction || !target ||
      !typeOf(target).getElementType().isInteger(64) || smoothing != 0.0)
    return op.emitOpError("cannot be differentiated: only (N, C) or (C) "
                          "inputs with class indices, a constant reduction "
                          "and no label smoothing are supported");
  int64_t classDim = typeOf(input).getRank() == 1 ? 0 : 1;
  Value logp = b.call("aten::log_softmax.int",
                      {input, b.i64(classDim), b.none()}, input.getType());
  CallOp forward = b.create("aten::nll_loss_forward",
                            {logp, target, args.tensor(2), args.attr(3),
                             args.attr(4)},
                            nllLossTypes(input, target, *reduction));
  replaceOutput(op, forward.getResult(0));
  return success();
}

LogicalResult nllLossForward(GradientContext &c) {
  Value self = c.args.tensor(0);
  c.set(0, c.b.call("aten::nll_loss_backward",
                    {c.grad(), self, c.args.tensor(1), c.args.tensor(2),
                     c.args.attr(3), c.args.attr(4), c.result(1)},
                    self.getType()));
  return success();
}

LogicalResult mseLoss(GradientContext &c) {
  Value self = c.args.tensor(0), target = c.args.tensor(1);
  Value g = c.b.call("aten::mse_loss_backward",
                     {c.grad(), self, target, c.args.attr(2)}, self.getType());
  c.set(0, g);
  if (c.needs(1))
    c.set(1, c.b.neg(g));
  return success();
}

LogicalResult smoothL1Loss(GradientContext &c) {
  Value self = c.args.tensor(0), target = c.args.tensor(1);
  Value g = c.b.call("aten::smooth_l1_loss_backward",
                     {c.grad(), self, target, c.args.attr(2), c.args.attr(3)},
                     self.getType());
  c.set(0, g);
  if (c.needs(1))
    c.set(1, c.b.neg(g));
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// The gradient of a reduction over `dims` (all if empty), expanded back to
/// the input's shape; `keepdim` says whether the result kept them.
Value unreduce(GradientContext &c, Value g, Value self,
               ArrayRef<int64_t> dims, bool keepdim) {
  int64_t rank = typeOf(self).getRank();
  SmallVector<int64_t> kept(shapeOf(self));
  for (int64_t d = 0; d < rank; ++d)
    if (dims.empty() || llvm::is_contained(dims, d))
      kept[d] = 1;
  if (!keepdim)
    g = c.b.reshape(g, kept);
  return c.b.expand(g, shapeOf(self));
}

SmallVector<int64_t> normDims(ArrayRef<int64_t> dims, int64_t rank) {
  SmallVector<int64_t> out;
  for (int64_t d : dims)
    out.push_back(normDim(d, rank));
  return out;
}

int64_t reducedCount(Value self, ArrayRef<int64_t> dims) {
  if (dims.empty())
    return typeOf(self).getNumElements();
  int64_t n = 1;
  for (int64_t d : dims)
    n *= shapeOf(self)[d];
  return n;
}

LogicalResult sumAll(GradientContext &c) {
  c.set(0, unreduce(c, c.grad(), c.args.tensor(0), {}, true));
  return success();
}

LogicalResult sumDims(GradientContext &c) {
  Value self = c.args.tensor(0);
  REQUIRE(dims, c.args.getInts(1), "dim");
  REQUIRE(keepdim, c.args.getBool(2), "keepdim");
  c.set(0, unreduce(c, c.grad(), self, normDims(*dims, typeOf(self).getRank()),
                    *keepdim));
  return success();
}

// The mean's gradient is the sum's, divided: expanded first and then
// divided, as ATen's mean_backward does, so the division materializes it (a
// later kernel may take another path on a stride-0 view).
LogicalResult meanAll(GradientContext &c) {
  Value self = c.args.tensor(0);
  Value g = unreduce(c, c.grad(), self, {}, true);
  c.set(0, c.b.divScalar(g, double(typeOf(self).getNumElements())));
  return success();
}

LogicalResult meanDims(GradientContext &c) {
  Value self = c.args.tensor(0);
  REQUIRE(dims, c.args.getInts(1), "dim");
  REQUIRE(keepdim, c.args.getBool(2), "keepdim");
  SmallVector<int64_t> d = normDims(*dims, typeOf(self).getRank());
  Value g = unreduce(c, c.grad(), self, d, *keepdim);
  c.set(0, c.b.divScalar(g, double(reducedCount(self, d))));
  return success();
}

LogicalResult selectingReduction(GradientContext &c) {
  // max.dim / min.dim(self, dim, keepdim) -> (values, indices)
  Value self = c.args.tensor(0);
  c.set(0, c.b.call("aten::value_selecting_reduction_backward",
                    {c.grad(), c.args.attr(1), c.result(1),
                     c.b.ints(shapeOf(self)), c.args.attr(2)},
                    self.getType()));
  return success();
}

LogicalResult logsumexp(GradientContext &c) {
  Value self = c.args.tensor(0);
  REQUIRE(dims, c.args.getInts(1), "dim");
  REQUIRE(keepdim, c.args.getBool(2), "keepdim");
  SmallVector<int64_t> d = normDims(*dims, typeOf(self).getRank());
  Value g = unreduce(c, c.grad(), self, d, *keepdim);
  Value r = unreduce(c, c.result(), self, d, *keepdim);
  c.set(0, c.b.mul(g, c.b.unary("aten::exp", c.b.sub(self, r))));
  return success();
}

//===----------------------------------------------------------------------===//
// Shapes and indexing
//===----------------------------------------------------------------------===//

LogicalResult reshapeBack(GradientContext &c) {
  c.set(0, c.b.reshape(c.grad(), shapeOf(c.args.tensor(0))));
  return success();
}

LogicalResult sumBack(GradientContext &c) {
  setSummed(c, 0, c.grad());
  return success();
}

LogicalResult broadcastTensors(GradientContext &c) {
  SmallVector<Value> inputs = c.args.tensorList(0);
  for (auto [k, input] : llvm::enumerate(inputs))
    if (Value g = c.grad(k); g && c.needsListElement(0, k))
      c.setListElement(0, k, c.b.sumToShape(g, shapeOf(input)));
  return success();
}

LogicalResult repeat(GradientContext &c) {
  Value self = c.args.tensor(0);
  REQUIRE(repeats, c.args.getInts(1), "repeats");
  SmallVector<int64_t> shape(repeats->size() - shapeOf(self).size(), 1);
  shape.append(shapeOf(self).begin(), shapeOf(self).end());
  // Split each dimension into (repeat, size) and sum over the repeats.
  SmallVector<int64_t> split, dims;
  for (size_t i = 0; i < shape.size(); ++i) {
    dims.push_back(split.size());
    split.push_back((*repeats)[i]);
    split.push_back(shape[i]);
  }
  Value g = c.b.sumDims(c.b.reshape(c.grad(), split), dims, false);
  c.set(0, c.b.reshape(g, shapeOf(self)));
  return success();
}

LogicalResult permute(GradientContext &c) {
  REQUIRE(dims, c.args.getInts(1), "dims");
  int64_t rank = dims->size();
  SmallVector<int64_t> inverse(rank);
  for (int64_t i = 0; i < rank; ++i)
    inverse[normDim((*dims)[i], rank)] = i;
  c.set(0, c.b.permute(c.grad(), inverse));
  return success();
}

LogicalResult transpose(GradientContext &c) {
  REQUIRE(d0, c.args.getInt(1), "dim0");
  REQUIRE(d1, c.args.getInt(2), "dim1");
  c.set(0, c.b.transpose(c.grad(), *d0, *d1));
  return success();
}

LogicalResult select(GradientContext &c) {
  Value self = c.args.tensor(0);
  c.set(0, c.b.call("aten::select_backward",
                    {c.grad(), c.b.ints(shapeOf(self)), c.args.attr(1),
                     c.args.attr(2)},
                    self.getType()));
  return success();
}

/// select_scatter(self, src, dim, index) and slice_scatter(self, src, dim,
/// start?, end?, step) (what a write through a view becomes, `x[:, 0] =
/// v`): self's gradient is the incoming one with the scattered part zero,
/// src's that part. They only move values, so they hold for complex ones.
LogicalResult scatterView(GradientContext &c) {
  Value src = c.args.tensor(1);
  bool slice = c.op.getOverload() == "aten::slice_scatter";
  SmallVector<ArgValue> viewArgs{c.grad()};
  SmallVector<ArgValue> scatterArgs{c.grad(), c.b.splat(typeOf(src), 0.0)};
  for (unsigned i = 2; i < c.op.getArgs().size(); ++i) {
    viewArgs.push_back(c.args.attr(i));
    scatterArgs.push_back(c.args.attr(i));
  }
  if (c.needs(0))
    c.set(0, c.b.call(c.op.getOverload(), scatterArgs, c.args.tensor(0).getType()));
  if (c.needs(1))
    c.set(1, c.b.call(slice ? "aten::slice.Tensor" : "aten::select.int",
                      viewArgs, src.getType()));
  return success();
}

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

LogicalResult sliceRule(GradientContext &c) {
  // slice.Tensor(self, dim, start?, end?, step)
  Value self = c.args.tensor(0);
  int64_t start = c.args.isNone(2) ? 0 : c.args.getInt(2).value_or(0);
  int64_t end = c.args.isNone(3) ? kInt64Max : c.args.getInt(3).value_or(0);
  if ((!c.args.isNone(2) && !c.args.getInt(2)) ||
      (!c.args.isNone(3) && !c.args.getInt(3)))
    return c.fail("start and end must be compile-time constants");
  c.set(0, c.b.call("aten::slice_backward",
                    {c.grad(), c.b.ints(shapeOf(self)), c.args.attr(1),
                     c.b.i64(start), c.b.i64(end), c.args.attr(4)},
                    self.getType()));
  return success();
}

LogicalResult narrow(GradientContext &c) {
  // narrow(self, dim, start, length)
  Value self = c.args.tensor(0);
  REQUIRE(dim, c.args.getInt(1), "dim");
  REQUIRE(start, c.args.getInt(2), "start");
  REQUIRE(length, c.args.getInt(3), "length");
  int64_t d = normDim(*dim, typeOf(self).getRank());
  int64_t s = *start < 0 ? *start + shapeOf(self)[d] : *start;
  c.set(0, c.b.call("aten::slice_backward",
                    {c.grad(), c.b.ints(shapeOf(self)), c.b.i64(d), c.b.i64(s),
                     c.b.i64(s + *length), c.b.i64(1)},
                    self.getType()));
  return success();
}

/// split / chunk / unbind: the results are consecutive pieces of `self`
/// along `dim`; the gradient is their gradients concatenated (zeros for a
/// piece nothing used).
template <unsigned DimArg>
LogicalResult pieces(GradientContext &c) {
  Value self = c.args.tensor(0);
  REQUIRE(dim, c.args.getInt(DimArg), "dim");
  int64_t d = normDim(*dim, typeOf(self).getRank());
  SmallVector<Value> grads;
  for (unsigned k = 0; k < c.op.getNumResults(); ++k)
    grads.push_back(c.gradOrZeros(k));
  c.set(0, c.b.cat(grads, d));
  return success();
}

LogicalResult unbind(GradientContext &c) {
  Value self = c.args.tensor(0);
  REQUIRE(dim, c.args.getInt(1), "dim");
  int64_t d = normDim(*dim, typeOf(self).getRank());
  SmallVector<Value> grads;
  for (unsigned k = 0; k < c.op.getNumResults(); ++k) {
    SmallVector<int64_t> shape(shapeOf(self));
    shape[d] = 1;
    grads.push_back(c.b.reshape(c.gradOrZeros(k), shape));
  }
  c.set(0, c.b.cat(grads, d));
  return success();
}

LogicalResult catRule(GradientContext &c) {
  SmallVector<Value> inputs = c.args.tensorList(0);
  REQUIRE(dim, c.args.getInt(1), "dim");
  int64_t d = normDim(*dim, typeOf(c.grad()).getRank());
  int64_t offset = 0;
  for (auto [k, input] : llvm::enumerate(inputs)) {
    int64_t size = shapeOf(input).size() == shapeOf(c.grad()).size()
                       ? shapeOf(input)[d]
                       : 0; // a legacy empty 1-D input takes no part
    if (size > 0 && c.needsListElement(0, k))
      c.setListElement(0, k, c.b.slice(c.grad(), d, offset, offset + size));
    offset += size;
  }
  return success();
}

LogicalResult stack(GradientContext &c) {
  SmallVector<Value> inputs = c.args.tensorList(0);
  REQUIRE(dim, c.args.getInt(1), "dim");
  int64_t d = normDim(*dim, typeOf(c.grad()).getRank());
  for (unsigned k = 0; k < inputs.size(); ++k)
    if (c.needsListElement(0, k))
      c.setListElement(0, k, c.b.select(c.grad(), d, k));
  return success();
}

LogicalResult indexTensor(GradientContext &c) {
  // index.Tensor(self, indices): the gradient is scattered back, summing
  // where an element was picked more than once.
  Value self = c.args.tensor(0);
  Value zeros = c.b.zeros(c.grad(), typeOf(self));
  c.set(0, c.b.call("aten::index_put",
                    {zeros, ArgValue::optionalTensors(c.args.tensorList(1)),
                     c.grad(), c.b.boolean(true)},
                    self.getType()));
  return success();
}

LogicalResult indexSelect(GradientContext &c) {
  Value self = c.args.tensor(0);
  Value zeros = c.b.zeros(c.grad(), typeOf(self));
  c.set(0, c.b.call("aten::index_add",
                    {zeros, c.args.attr(1), c.args.tensor(2), c.grad(),
                     c.b.i64(1)},
                    self.getType()));
  return success();
}

LogicalResult gather(GradientContext &c) {
  Value self = c.args.tensor(0);
  Value zeros = c.b.zeros(c.grad(), typeOf(self));
  c.set(0, c.b.call("aten::scatter_add",
                    {zeros, c.args.attr(1), c.args.tensor(2), c.grad()},
                    self.getType()));
  return success();
}

LogicalResult embedding(GradientContext &c) {
  // embedding(weight, indices, padding_idx, scale_grad_by_freq, sparse)
  Value weight = c.args.tensor(0);
  c.set(0, c.b.call("aten::embedding_dense_backward",
                    {c.grad(), c.args.tensor(1), c.b.i64(shapeOf(weight)[0]),
                     c.args.attr(2), c.args.attr(3)},
                    weight.getType()));
  return success();
}

LogicalResult padBack(GradientContext &c) {
  // constant_pad_nd(self, pad, value) / pad(self, pad, mode, value)
  if (c.op.getOpName() == "aten::pad") {
    auto mode = c.args.getString(2);
    if (!mode || *mode != "constant")
      return c.autograd(); // reflect, replicate, circular
  }
  REQUIRE(pad, c.args.getInts(1), "pad");
  SmallVector<int64_t> negated;
  for (int64_t p : *pad)
    negated.push_back(-p);
  Value self = c.args.tensor(0);
  c.set(0, c.b.call("aten::constant_pad_nd",
                    {c.grad(), c.b.ints(negated), c.b.i64(0)},
                    self.getType()));
  return success();
}

LogicalResult roll(GradientContext &c) {
  REQUIRE(shifts, c.args.getInts(1), "shifts");
  SmallVector<int64_t> negated;
  for (int64_t s : *shifts)
    negated.push_back(-s);
  c.set(0, c.b.call("aten::roll", {c.grad(), c.b.ints(negated), c.args.attr(2)},
                    c.grad().getType()));
  return success();
}

LogicalResult flip(GradientContext &c) {
  c.set(0, c.b.call("aten::flip", {c.grad(), c.args.attr(1)},
                    c.grad().getType()));
  return success();
}

template <const char *Op>
LogicalResult triangle(GradientContext &c) {
  c.set(0, c.b.call(Op, {c.grad(), c.args.attr(1)}, c.grad().getType()));
  return success();
}
constexpr char kTril[] = "aten::tril";
constexpr char kTriu[] = "aten::triu";

LogicalResult copyInPlace(GradientContext &c) {
  // copy_(self, src, non_blocking): the new value is src, broadcast.
  setSummed(c, 1, c.grad());
  return success();
}

//===----------------------------------------------------------------------===//
// The registry
//===----------------------------------------------------------------------===//

const llvm::StringMap<Rule> &registry() {
  static const llvm::StringMap<Rule> rules = [] {
    llvm::StringMap<Rule> r;
    auto add = [&](std::initializer_list<const char *> names, Rule rule) {
      for (const char *name : names)
        r[name] = rule;
    };
    // Elementwise, with ATen's backward kernels where it has them.
    add({"aten::relu"}, {relu});
    add({"aten::relu6"}, {relu6});
    add({"aten::hardtanh"}, {hardtanh});
    add({"aten::gelu"}, {gelu});
    add({"aten::tanh"}, {kernelOfGrad<kTanhBackward, true>});
    add({"aten::sigmoid"}, {kernelOfGrad<kSigmoidBackward, true>});
    add({"aten::silu"}, {kernelOfGrad<kSiluBackward, false>});
    add({"aten::hardswish"}, {kernelOfGrad<kHardswishBackward, false>});
    add({"aten::hardsigmoid"}, {kernelOfGrad<kHardsigmoidBackward, false>});
    add({"aten::mish"}, {kernelOfGrad<kMishBackward, false>});
    add({"aten::leaky_relu"}, {leakyRelu});
    add({"aten::elu"}, {elu});
    add({"aten::softplus"}, {softplus});
    add({"aten::exp"}, {expRule});
    add({"aten::log"}, {logRule});
    add({"aten::sqrt"}, {sqrtRule});
    add({"aten::rsqrt"}, {rsqrtRule});
    add({"aten::neg"}, {negRule});
    add({"aten::abs"}, {absRule});
    add({"aten::sin"}, {sinRule});
    add({"aten::cos"}, {cosRule});
    add({"aten::pow.Tensor_Scalar"}, {powScalar});
    add({"aten::square"}, {square});
    add({"aten::reciprocal"}, {reciprocal});
    add({"aten::erf"}, {erfRule});
    add({"aten::clamp"}, {clamp});
    add({"aten::clamp_min"}, {clampMin});
    add({"aten::clamp_max"}, {clampMax});
    add({"aten::contiguous", "aten::clone", "aten::alias", "aten::lift_fresh",
         "aten::to.dtype", "aten::to.dtype_layout", "aten::to.device",
         "aten::to.other", "aten::to.prim_dtype", "aten::_to_copy",
         "aten::type_as"},
        {identity});
    // Arithmetic.
    add({"aten::add.Tensor"}, {addTensor});
    add({"aten::add.Scalar", "aten::sub.Scalar"}, {identity});
    add({"aten::sub.Tensor"}, {subTensor});
    add({"aten::rsub.Tensor"}, {rsubTensor});
    add({"aten::rsub.Scalar"}, {rsubScalar});
    add({"aten::mul.Tensor"}, {mulTensor});
    add({"aten::mul.Scalar"}, {mulScalar});
    add({"aten::div.Tensor", "aten::div.Tensor_mode"}, {divTensor});
    add({"aten::div.Scalar", "aten::div.Scalar_mode"}, {divScalar});
    add({"aten::maximum"}, {extremum<true>});
    add({"aten::minimum"}, {extremum<false>});
    add({"aten::where.self"}, {whereSelf});
    add({"aten::masked_fill.Scalar", "aten::masked_fill.Tensor"}, {maskedFill});
    add({"aten::addcmul"}, {addcmul});
    // Matrix products and convolutions.
    add({"aten::linear"}, {linear});
    add({"aten::matmul"}, {matmul});
    add({"aten::mm"}, {mm});
    add({"aten::bmm"}, {bmm});
    add({"aten::addmm"}, {addmmLike<false>});
    add({"aten::baddbmm"}, {addmmLike<true>});
    add({"aten::t"}, {tRule});
    add({"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv1d.padding",
         "aten::conv2d.padding", "aten::conv3d.padding", "aten::_convolution_mode"},
        {convNd});
    add({"aten::convolution", "aten::_convolution"}, {convGeneral});
    add({"aten::conv_transpose1d", "aten::conv_transpose2d.input",
         "aten::conv_transpose3d.input"},
        {convTransposeNd});
    // Normalization, dropout, pooling.
    add({"aten::batch_norm"}, {nullptr, prepareBatchNorm});
    add({"aten::native_batch_norm"}, {nativeBatchNorm});
    add({"aten::layer_norm"}, {nullptr, prepareLayerNorm});
    add({"aten::native_layer_norm"}, {nativeLayerNorm});
    add({"aten::group_norm"}, {nullptr, prepareGroupNorm});
    add({"aten::native_group_norm"}, {nativeGroupNorm});
    add({"aten::dropout"}, {dropout, prepareDropout});
    add({"aten::feature_dropout", "aten::alpha_dropout",
         "aten::feature_alpha_dropout"},
        {featureDropout});
    add({"aten::native_dropout"}, {nativeDropout});
    add({"aten::max_pool2d"}, {nullptr, prepareMaxPool2d});
    add({"aten::max_pool2d_with_indices"}, {maxPool2dWithIndices});
    add({"aten::avg_pool2d"}, {avgPool2d});
    add({"aten::adaptive_avg_pool2d", "aten::_adaptive_avg_pool2d"},
        {adaptiveAvgPool2d});
    add({"aten::adaptive_max_pool2d"}, {adaptiveMaxPool2d});
    // Softmax and losses.
    add({"aten::softmax.int", "aten::_softmax"}, {softmax<false>});
    add({"aten::log_softmax.int", "aten::_log_softmax"}, {softmax<true>});
    add({"aten::nll_loss", "aten::nll_loss_nd"}, {nullptr, prepareNllLoss});
    add({"aten::cross_entropy_loss"}, {nullptr, prepareCrossEntropy});
    add({"aten::nll_loss_forward"}, {nllLossForward});
    add({"aten::mse_loss"}, {mseLoss});
    add({"aten::smooth_l1_loss"}, {smoothL1Loss});
    // Reductions.
    add({"aten::sum"}, {sumAll});
    add({"aten::sum.dim_IntList"}, {sumDims});
    add({"aten::mean"}, {meanAll});
    add({"aten::mean.dim"}, {meanDims});
    add({"aten::max.dim", "aten::min.dim"}, {selectingReduction});
    add({"aten::logsumexp"}, {logsumexp});
    // Shapes and indexing.
    add({"aten::view", "aten::reshape", "aten::_unsafe_view",
         "aten::_reshape_alias", "aten::flatten.using_ints",
         "aten::unflatten.int", "aten::squeeze", "aten::squeeze.dim",
         "aten::squeeze.dims", "aten::unsqueeze", "aten::view_as",
         "aten::reshape_as"},
        {reshapeBack});
    add({"aten::expand", "aten::expand_as", "aten::broadcast_to"}, {sumBack});
    add({"aten::broadcast_tensors"}, {broadcastTensors});
    add({"aten::repeat"}, {repeat});
    add({"aten::permute"}, {permute});
    add({"aten::transpose.int"}, {transpose});
    add({"aten::select.int"}, {select});
    add({"aten::slice.Tensor"}, {sliceRule});
    add({"aten::select_scatter", "aten::slice_scatter"}, {scatterView});
    add({"aten::narrow"}, {narrow});
    add({"aten::split.Tensor", "aten::split.sizes", "aten::split_with_sizes",
         "aten::chunk", "aten::unsafe_split.Tensor",
         "aten::unsafe_split_with_sizes", "aten::unsafe_chunk"},
        {pieces<2>});
    add({"aten::unbind.int"}, {unbind});
    add({"aten::cat"}, {catRule});
    add({"aten::stack"}, {stack});
    add({"aten::index.Tensor"}, {indexTensor});
    add({"aten::index_select"}, {indexSelect});
    add({"aten::gather"}, {gather});
    add({"aten::embedding"}, {embedding});
    add({"aten::constant_pad_nd", "aten::pad"}, {padBack});
    add({"aten::roll"}, {roll});
    add({"aten::flip"}, {flip});
    add({"aten::tril"}, {triangle<kTril>});
    add({"aten::triu"}, {triangle<kTriu>});
    add({"aten::copy_"}, {copyInPlace});
    return r;
  }();
  return rules;
}

} // namespace

const GradientRule *fsdp::aten::lookupGradient(StringRef overload) {
  const llvm::StringMap<Rule> &rules = registry();
  auto it = rules.find(overload);
  if (it == rules.end()) {
    std::string functional = functionalForm(overload);
    if (!functional.empty())
      it = rules.find(functional);
  }
  return it == rules.end() ? nullptr : &it->second;
}

SmallVector<StringRef> fsdp::aten::gradientRuleNames() {
  SmallVector<StringRef> names;
  for (const auto &entry : registry())
    names.push_back(entry.getKey());
  llvm::sort(names);
  return names;
}
