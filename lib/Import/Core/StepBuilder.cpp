//===- StepBuilder.cpp - what every importer front end shares -------------===//
//
// See StepBuilder.h.
//
//===----------------------------------------------------------------------===//

#include "StepBuilder.h"

#include "fsdp/Dialect/ATen/IR/ATenBuilder.h"
#include "fsdp/Support/JSON.h"
#include "fsdp/Target/Plan/PlanTypes.h"
#include "fsdp/runtime/Plan.h"
#include "fsdp/runtime/PlanOperators.h"

#include "llvm/Support/JSON.h"

#include <torch/csrc/jit/runtime/interpreter.h>
#include <torch/csrc/jit/runtime/symbolic_shape_registry.h>

#include <functional>
#include <limits>

using namespace mlir;
using namespace fsdp;
using namespace fsdp::import;
namespace jit = torch::jit;

using fsdp::runtime::firstLine;

bool fsdp::import::holdsTensor(const AbsValue &abs,
                               llvm::function_ref<bool(Value)> pred) {
  if (abs.isTensor())
    return pred(abs.tensor);
  return llvm::any_of(abs.elements,
                      [&](const AbsValue &e) { return holdsTensor(e, pred); });
}

bool fsdp::import::holdsConstantAliasing(const AbsValue &abs,
                                         const at::Tensor &t) {
  std::function<bool(const c10::IValue &)> aliases =
      [&](const c10::IValue &v) -> bool {
    if (v.isTensor())
      return v.toTensor().defined() && v.toTensor().is_alias_of(t);
    if (v.isList())
      return llvm::any_of(v.toListRef(), aliases);
    if (v.isTuple())
      return llvm::any_of(v.toTupleRef().elements(), aliases);
    return false;
  };
  if (abs.isConstant())
    return aliases(abs.constant);
  return llvm::any_of(abs.elements, [&](const AbsValue &e) {
    return holdsConstantAliasing(e, t);
  });
}

void fsdp::import::replaceTensor(AbsValue &abs, Value old, Value updated) {
  if (abs.isTensor() && abs.tensor == old)
    abs.tensor = updated;
  for (AbsValue &e : abs.elements)
    replaceTensor(e, old, updated);
}

StepBuilder::StepBuilder(MLIRContext *context, llvm::StringRef path)
    : context(context), builder(context), path(path.str()) {}

StepBuilder::~StepBuilder() = default;

void StepBuilder::fail(Location loc, const llvm::Twine &message) {
  InFlightDiagnostic diag = emitError(loc) << message;
  if (auto name = dyn_cast<NameLoc>(loc)) {
    std::string path = name.getName().str();
    diag << " [in module '" << path << "'";
    auto cls = moduleClasses.find(path);
    if (cls != moduleClasses.end())
      diag << " (" << cls->second << ")";
    diag << "]";
  }
  throw ImportFailure{};
}

//===----------------------------------------------------------------------===//
// Types and values
//===----------------------------------------------------------------------===//

/// Through the plan's dtype table (PlanSchema.h): a tensor the importer
/// types is one a plan can hold.
Type StepBuilder::elementType(at::ScalarType dtype, Location loc) {
  if (std::optional<plan::DType> d = fsdp::runtime::planDType(dtype))
    return fsdp::elementType(*d, context);
  fail(loc, llvm::Twine("tensors of dtype ") + c10::toString(dtype) +
                " are not supported");
}

at::ScalarType StepBuilder::scalarType(Type type, Location loc) {
  if (std::optional<plan::DType> d = planDType(type))
    return fsdp::runtime::scalarType(*d);
  std::string name;
  llvm::raw_string_ostream os(name);
  os << type;
  fail(loc, "element type " + name + " has no ATen dtype");
}

RankedTensorType StepBuilder::tensorType(const at::Tensor &t, Location loc) {
  return RankedTensorType::get(t.sizes().vec(),
                               elementType(t.scalar_type(), loc));
}

at::Tensor StepBuilder::metaTensor(RankedTensorType type, Location loc) {
  return at::empty(type.getShape().vec(),
                   at::TensorOptions()
                       .dtype(scalarType(type.getElementType(), loc))
                       .device(at::kMeta));
}

void StepBuilder::checkConstantSize(llvm::ArrayRef<int64_t> shape,
                                    at::ScalarType dtype, Location loc) {
  int64_t bytes = int64_t(c10::elementSize(dtype));
  for (int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(bytes, d, &bytes))
      bytes = std::numeric_limits<int64_t>::max();
  if (bytes <= kMaxConstantBytes)
    return;
  std::string type;
  llvm::raw_string_ostream os(type);
  os << RankedTensorType::get(shape, elementType(dtype, loc));
  fail(loc, "a constant of the step, " + type + ", holds " +
                std::to_string(bytes >> 20) + " MiB; a plan keeps constants "
                "of at most " + std::to_string(kMaxConstantBytes >> 20) +
                " MiB: register a tensor that large as a buffer of the model");
}

Value StepBuilder::materialize(const at::Tensor &constant, Location loc) {
  // Checked before anything is copied: a stride-0 record declared large
  // holds a few bytes and would expand to its whole size here.
  checkConstantSize(constant.sizes(), constant.scalar_type(), loc);
  at::Tensor t = constant.contiguous().cpu();
  RankedTensorType type = tensorType(t, loc);
  DenseElementsAttr value;
  if (t.scalar_type() == at::kBool) {
    auto data = t.data_ptr<bool>();
    value = DenseElementsAttr::get(
        type, llvm::ArrayRef<bool>(data, data + t.numel()));
  } else {
    llvm::ArrayRef<char> raw(static_cast<const char *>(t.data_ptr()),
                             t.numel() * t.element_size());
    value = DenseElementsAttr::getFromRawBuffer(type, raw);
  }
  return aten::ConstantOp::create(builder, loc, type, value);
}

Value StepBuilder::tensorValue(const AbsValue &abs, Location loc) {
  if (abs.isTensor())
    return abs.tensor;
  if (abs.isConstant() && abs.constant.isTensor())
    return materialize(abs.constant.toTensor(), loc);
  return Value();
}

AbsValue StepBuilder::writable(AbsValue abs, Location loc) {
  if (!abs.isConstant() || !abs.constant.isTensor())
    return abs;
  const at::Tensor &t = abs.constant.toTensor();
  // Its memory its own: not a view of a larger constant, and no other
  // value the walk holds shares it.
  bool own = t.defined() && t.storage_offset() == 0 && t.is_contiguous() &&
             t.nbytes() == t.storage().nbytes();
  if (!own || constantShared(t))
    return abs;
  return AbsValue::ofTensor(materialize(t, loc));
}

std::vector<size_t>
StepBuilder::writtenArguments(const c10::FunctionSchema &schema) {
  std::vector<size_t> written;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const c10::AliasInfo *alias = schema.arguments()[i].alias_info();
    if (alias && alias->isWrite())
      written.push_back(i);
  }
  return written;
}

std::optional<size_t>
StepBuilder::aliasedArgument(const c10::FunctionSchema &schema, size_t i) {
  if (i >= schema.returns().size())
    return std::nullopt;
  const c10::AliasInfo *info = schema.returns()[i].alias_info();
  if (!info)
    return std::nullopt;
  for (size_t j = 0; j < schema.arguments().size(); ++j) {
    const c10::AliasInfo *arg = schema.arguments()[j].alias_info();
    if (arg && arg->isWrite() == info->isWrite() &&
        arg->beforeSets() == info->beforeSets())
      return j;
  }
  return std::nullopt;
}


Attribute StepBuilder::constantAttr(const c10::IValue &value,
                                 const c10::Argument *arg, Location loc,
                                 const std::string &what) {
  if (value.isNone())
    return aten::NoneAttr::get(context);
  bool isDtype = arg && arg->real_type()->kind() == c10::TypeKind::ScalarTypeType;
  if (!isDtype && arg)
    if (auto opt = arg->real_type()->cast<c10::OptionalType>())
      isDtype = opt->getElementType()->kind() == c10::TypeKind::ScalarTypeType;
  if (value.isInt() && isDtype)
    return TypeAttr::get(elementType(
        static_cast<at::ScalarType>(value.toInt()), loc));
  if (value.isBool())
    return builder.getBoolAttr(value.toBool());
  if (value.isInt())
    return builder.getI64IntegerAttr(value.toInt());
  if (value.isDouble())
    return builder.getF64FloatAttr(value.toDouble());
  if (value.isComplexDouble()) {
    c10::complex<double> z = value.toComplexDouble();
    return aten::ComplexAttr::get(context, builder.getF64FloatAttr(z.real()),
                                  builder.getF64FloatAttr(z.imag()));
  }
  if (value.isString())
    return builder.getStringAttr(value.toStringRef());
  if (value.isDevice())
    return builder.getStringAttr(value.toDevice().str());
  if (value.isList()) {
    SmallVector<Attribute> elements;
    for (const c10::IValue &e : value.toListRef())
      elements.push_back(constantAttr(e, nullptr, loc, what));
    return builder.getArrayAttr(elements);
  }
  if (value.isTuple()) {
    SmallVector<Attribute> elements;
    for (const c10::IValue &e : value.toTupleRef().elements())
      elements.push_back(constantAttr(e, nullptr, loc, what));
    return builder.getArrayAttr(elements);
  }
  fail(loc, what + " of type " + value.tagKind() +
                " cannot be kept as an attribute");
}


AbsValue StepBuilder::fromIValue(const c10::IValue &value) {
  return AbsValue::ofConstant(value);
}

c10::IValue StepBuilder::toIValue(const AbsValue &abs, const c10::TypePtr &type,
                               bool meta, Location loc) {
  switch (abs.kind) {
  case AbsValue::Kind::Constant:
    if (meta && abs.constant.isTensor())
      return abs.constant.toTensor().to(at::kMeta);
    return abs.constant;
  case AbsValue::Kind::Tensor:
    if (!meta)
      fail(loc, "internal: a runtime tensor has no constant value");
    return metaTensor(cast<RankedTensorType>(abs.tensor.getType()), loc);
  case AbsValue::Kind::Module:
    return abs.module;
  case AbsValue::Kind::Sequence: {
    if (abs.isDict)
      fail(loc, "a dict is passed to an operator, which fsdp-opt cannot "
                "import: pass its entries");
    if (abs.isTuple) {
      std::vector<c10::IValue> elems;
      auto tupleType = type ? type->cast<c10::TupleType>() : nullptr;
      for (size_t i = 0; i < abs.elements.size(); ++i)
        elems.push_back(toIValue(abs.elements[i],
                                 tupleType ? tupleType->elements()[i] : nullptr,
                                 meta, loc));
      return c10::ivalue::Tuple::create(std::move(elems));
    }
    c10::TypePtr elemType = c10::AnyType::get();
    if (type)
      if (auto listType = type->cast<c10::ListType>())
        elemType = listType->getElementType();
    c10::impl::GenericList list(elemType);
    for (const AbsValue &e : abs.elements)
      list.push_back(toIValue(e, elemType, meta, loc));
    return list;
  }
  case AbsValue::Kind::Unknown:
    break;
  }
  fail(loc, "a value the importer could not determine is used here");
}

//===----------------------------------------------------------------------===//
// Model state
//===----------------------------------------------------------------------===//

void StepBuilder::declareStateSymbol(const std::string &fqn,
                                     const std::string &modulePath,
                                     const std::string &cls,
                                     const at::Tensor &t, bool isParam,
                                     bool persistent, Location loc) {
  StateInfo info;
  info.fqn = fqn;
  info.isParam = isParam;
  info.type = tensorType(t, loc);
  if (isParam && isa<ComplexType>(info.type.getElementType()))
    fail(loc, "parameter '" + fqn + "' is complex (" +
                  c10::toString(t.scalar_type()) +
                  "): fsdp-opt shards real parameters only; hold it as "
                  "real pairs (torch.view_as_real(w), a [..., 2] "
                  "parameter) and take torch.view_as_complex of it in "
                  "forward");
  if (isParam && !isa<FloatType>(info.type.getElementType()))
    fail(loc, "parameter '" + fqn + "' is not floating point");
  info.readType = info.type;
  if (Type compute = isParam ? paramDtype : bufferDtype;
      compute && isa<FloatType>(info.type.getElementType()))
    info.readType = RankedTensorType::get(info.type.getShape(), compute);
  states[fqn] = info;
  stateOrder.push_back(fqn);
  Operation *op;
  if (isParam)
    op = ParamOp::create(builder, loc, fqn, info.type, modulePath, cls,
                         ArrayAttr());
  else
    op = BufferOp::create(builder, loc, fqn, info.type, modulePath, cls,
                          ArrayAttr(), !persistent);
  symbols[fqn] = op;
}

void StepBuilder::aliasStateSymbol(const std::string &canonical,
                                   const std::string &alias) {
  states[alias] = states.lookup(canonical);
  Operation *symbol = symbols.lookup(canonical);
  auto addAlias = [&](auto op) {
    SmallVector<Attribute> aliases;
    if (auto existing = op.getAliases())
      aliases.append(existing->begin(), existing->end());
    aliases.push_back(builder.getStringAttr(alias));
    op.setAliasesAttr(builder.getArrayAttr(aliases));
  };
  if (auto param = dyn_cast<ParamOp>(symbol))
    addAlias(param);
  else
    addAlias(cast<BufferOp>(symbol));
}

Value StepBuilder::stateValue(const std::string &fqn, Location loc) {
  const StateInfo &info = states.find(fqn)->second;
  Value &value = current[info.fqn];
  if (!value) {
    // Read each symbol once, at the start of the step.
    OpBuilder::InsertionGuard guard(builder);
    if (lastRead)
      builder.setInsertionPointAfter(lastRead);
    else
      builder.setInsertionPointToStart(&func.getBody().front());
    auto read = GetOp::create(builder, loc, info.readType,
                              FlatSymbolRefAttr::get(context, info.fqn));
    lastRead = read;
    value = read;
    initial[info.fqn] = value;
    stateOf[value] = info.fqn;
  }
  return value;
}

//===----------------------------------------------------------------------===//
// Typing an op that has no meta kernel
//===----------------------------------------------------------------------===//

/// What the importer may allocate to type one op without a meta kernel.
constexpr int64_t kCpuTypingBudget = int64_t(256) << 20;
/// Results up to this size are computed whole even when a shape function
/// knows them (which checks the shape function against the op); larger ones
/// take one sample.
constexpr int64_t kWholeRunBytes = int64_t(16) << 20;

/// Byte counts that saturate at INT64_MAX instead of overflowing.
static int64_t saturatingMul(int64_t a, int64_t b) {
  constexpr int64_t max = std::numeric_limits<int64_t>::max();
  return a != 0 && b > max / a ? max : a * b;
}
static int64_t saturatingAdd(int64_t a, int64_t b) {
  constexpr int64_t max = std::numeric_limits<int64_t>::max();
  return b > max - a ? max : a + b;
}
static int64_t numelOf(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n = saturatingMul(n, std::max<int64_t>(d, 0));
  return n;
}

/// The result shapes of `schema` from ATen's own shape function (the JIT's
/// symbolic shape registry), given the arguments with runtime tensors as
/// meta tensors; none if it has no shape function or one that does not run
/// on these arguments.
static std::optional<std::vector<std::vector<int64_t>>>
shapesFromShapeFunction(const c10::FunctionSchema &schema,
                        const jit::Stack &args) {
  c10::optional<std::shared_ptr<jit::Graph>> graph =
      jit::shapeComputeGraphForSchema(schema);
  // What torch.jit.trace records for a convolution has no shape function of
  // its own; aten::convolution's takes its leading arguments.
  if (!graph && schema.name() == "aten::_convolution")
    if (auto handle = c10::Dispatcher::singleton().findSchema(
            {"aten::convolution", ""}))
      graph = jit::shapeComputeGraphForSchema(handle->schema());
  if (!graph || (*graph)->inputs().size() > args.size())
    return std::nullopt;
  jit::Stack stack;
  for (size_t i = 0; i < (*graph)->inputs().size(); ++i) {
    const c10::IValue &v = args[i];
    if (v.isTensor())
      stack.push_back(c10::List<int64_t>(v.toTensor().sizes().vec()));
    else if (v.isList() &&
             llvm::any_of(v.toListRef(),
                          [](const c10::IValue &e) { return e.isTensor(); }))
      return std::nullopt; // shape functions take no tensor lists
    else
      stack.push_back(v);
  }
  try {
    jit::Code code(*graph, "shape");
    jit::InterpreterState(code).run(stack);
  } catch (const std::exception &) {
    return std::nullopt;
  }
  if (stack.size() != 1)
    return std::nullopt;
  std::vector<c10::IValue> results;
  if (stack[0].isTuple())
    results = stack[0].toTupleRef().elements().vec();
  else
    results.push_back(stack[0]);
  std::vector<std::vector<int64_t>> shapes;
  for (const c10::IValue &r : results) {
    if (!r.isIntList())
      return std::nullopt;
    shapes.push_back(r.toIntVector());
  }
  return shapes;
}

/// Bytes of the runtime tensors (meta tensors here) an op would be given.
static int64_t runtimeTensorBytes(const c10::IValue &x) {
  if (x.isTensor() && x.toTensor().is_meta())
    return saturatingMul(numelOf(x.toTensor().sizes()),
                         static_cast<int64_t>(x.toTensor().element_size()));
  int64_t bytes = 0;
  if (x.isList())
    for (const c10::IValue &e : x.toListRef())
      bytes = saturatingAdd(bytes, runtimeTensorBytes(e));
  return bytes;
}

/// How runOnCpu shrinks the inputs: `batch` > 0, inputs whose first
/// dimension is `batch` get one sample; kAllOnes, every dimension of every
/// input is 1; kAllButLast, every one but the last (0 stays 0).
constexpr int64_t kAllOnes = -1, kAllButLast = -2;

/// `x` on the CPU, filled with `fill`, shrunk as `batch` says (runOnCpu);
/// an argument the op writes gets memory of its own, and so does every
/// input of a whole run (batch 0): contiguous, as the meta call has them,
/// so that the kernel lays its results out as it will in the step.
static c10::IValue cpuValue(const c10::IValue &x, double fill, int64_t batch,
                            bool written) {
  if (x.isTensor() && x.toTensor().is_meta()) {
    const at::Tensor &t = x.toTensor();
    std::vector<int64_t> sizes = t.sizes().vec();
    if (batch > 0 && !sizes.empty() && sizes[0] == batch)
      sizes[0] = 1;
    if (batch == kAllOnes || batch == kAllButLast)
      for (size_t d = 0; d + (batch == kAllButLast) < sizes.size(); ++d)
        sizes[d] = std::min<int64_t>(sizes[d], 1);
    at::TensorOptions options = t.options().device(at::kCPU);
    if (written || batch == 0)
      return at::full(sizes, fill, options);
    return at::full({}, fill, options).expand(sizes);
  }
  if (x.isList()) {
    c10::impl::GenericList list(x.toList().elementType());
    for (const c10::IValue &e : x.toListRef())
      list.push_back(cpuValue(e, fill, batch, written));
    return list;
  }
  return x;
}

/// Runs the op on the CPU on inputs filled with `fill` and shrunk as `batch`
/// says (kAllOnes). Sets `error` to the error's first line on failure.
static std::optional<jit::Stack> runOnCpu(const MetalessTyping &t, double fill,
                                          int64_t batch, std::string &error) {
  jit::Stack cpuStack;
  for (size_t i = 0; i < t.args.size(); ++i)
    cpuStack.push_back(
        cpuValue(t.args[i], fill, batch,
                 t.site.schema.is_mutable({c10::SchemaArgType::input, i})));
  try {
    t.site.run(cpuStack);
  } catch (const c10::Error &e) {
    error = firstLine(e.what_without_backtrace());
    return std::nullopt;
  }
  return cpuStack;
}

/// runOnCpu on zeros, or on ones where the kernel refuses zeros (istft's
/// window must not vanish). `error` is the zeros' error where both fail.
static std::optional<jit::Stack> runOnCpuFilled(const MetalessTyping &t,
                                                int64_t batch,
                                                std::string &error,
                                                double *fill = nullptr) {
  if (std::optional<jit::Stack> ran = runOnCpu(t, 0.0, batch, error)) {
    if (fill)
      *fill = 0.0;
    return ran;
  }
  std::string onZeros = error;
  if (std::optional<jit::Stack> ran = runOnCpu(t, 1.0, batch, error)) {
    if (fill)
      *fill = 1.0;
    return ran;
  }
  error = onZeros;
  return std::nullopt;
}

/// The tensor results of a run.
static std::vector<at::Tensor> tensorsOf(const jit::Stack &ran) {
  std::vector<at::Tensor> results;
  for (const c10::IValue &r : ran)
    if (r.isTensor())
      results.push_back(r.toTensor());
  return results;
}

/// Meta tensors of the dtypes of `results` with the shape function's shapes.
static jit::Stack withShapes(const MetalessTyping &t,
                             const std::vector<at::Tensor> &results) {
  jit::Stack typed;
  for (size_t i = 0; i < results.size(); ++i)
    typed.push_back(
        at::empty((*t.shapes)[i], results[i].options().device(at::kMeta)));
  return typed;
}

/// Result types of an op that has no meta kernel, without allocating more
/// than kCpuTypingBudget however large the step's tensors are:
///  - the op itself runs on the CPU on inputs that hold one value each
///    (zeros, then ones: a result whose shape differs depends on tensor
///    data), when its inputs fit the budget and its results (from ATen's
///    shape function, where it has one) are small;
///  - larger: shapes from the shape function and dtypes from the op run on
///    one sample (the first dimension of the inputs that have the batch,
///    narrowed to 1), or, where there is no sample to take or it is too
///    large, on inputs with every dimension (but the last) 1, or whole;
///  - otherwise an error that says so.
jit::Stack StepBuilder::typeWithoutMeta(const CallSite &site,
                                        const std::string &metaError,
                                        bool &kernelLayouts) {
  MetalessTyping t{site, metaError};
  kernelLayouts = false;
  // The arguments as the meta call had them: runtime tensors as meta
  // tensors, constants with their values.
  for (size_t i = 0; i < site.schema.arguments().size(); ++i) {
    const AbsValue &a = *site.args[i];
    t.args.push_back(toIValue(a, site.argTypes[i],
                              /*meta=*/!a.isFullyConstant(), site.loc));
  }
  t.shapes = shapesFromShapeFunction(site.schema, t.args);
  for (const c10::IValue &arg : t.args)
    t.inputBytes = saturatingAdd(t.inputBytes, runtimeTensorBytes(arg));
  if (t.shapes)
    for (const std::vector<int64_t> &shape : *t.shapes)
      t.resultBytes =
          saturatingAdd(t.resultBytes, saturatingMul(numelOf(shape), 8));

  // Kernels may copy their expanded inputs whole (.contiguous()), so the
  // inputs count too.
  if (t.inputBytes <= kCpuTypingBudget &&
      (!t.shapes || t.resultBytes <= kWholeRunBytes)) {
    kernelLayouts = true; // the results are the kernel's own
    return typeByWholeRun(t);
  }
  if (!t.shapes)
    typingTooLarge(t, "no shape function either; its inputs hold " +
                          std::to_string(t.inputBytes >> 20) + " MiB");
  return typeBySample(t);
}

/// The op run whole, on zeros and on ones (ones and twos where it refuses
/// zeros): results whose shapes differ depend on tensor data.
jit::Stack StepBuilder::typeByWholeRun(const MetalessTyping &t) {
  std::string error;
  double fill = 0.0;
  std::optional<jit::Stack> zeros = runOnCpuFilled(t, 0, error, &fill);
  std::optional<jit::Stack> ones =
      zeros ? runOnCpu(t, fill + 1.0, 0, error) : std::nullopt;
  if (!zeros || !ones)
    fail(t.site.loc, "cannot infer the result types of " + t.site.overload + ": " +
                    error + " (model inputs: " + inputSummary + ")");
  for (size_t i = 0; i < zeros->size() && i < ones->size(); ++i) {
    const c10::IValue &z = (*zeros)[i], &o = (*ones)[i];
    bool same = true;
    if (z.isTensor() && o.isTensor())
      same = z.toTensor().sizes() == o.toTensor().sizes();
    else if (z.isTensorList() && o.isTensorList()) {
      auto a = z.toTensorList().vec(), b = o.toTensorList().vec();
      same = a.size() == b.size();
      for (size_t j = 0; same && j < a.size(); ++j)
        same = a[j].sizes() == b[j].sizes();
    }
    if (!same)
      fail(t.site.loc, t.site.overload + " returns a tensor whose shape depends on "
                               "tensor data; a static training step needs "
                               "static shapes");
  }
  return std::move(*zeros);
}

void StepBuilder::typingTooLarge(const MetalessTyping &t, const std::string &why) {
  // A meta kernel that refused the arguments has said what is wrong.
  if (!t.metaError.empty())
    fail(t.site.loc, t.site.overload + ": " + t.metaError + " (model inputs: " +
                    inputSummary + ")");
  fail(t.site.loc, "cannot infer the result types of " + t.site.overload +
                  " without allocating its tensors: this libtorch has no "
                  "meta kernel for it, and " + why + " (model inputs: " +
                  inputSummary + ")");
}

/// Shapes from the shape function, dtypes from the op run on one sample:
/// the batch is the first dimension of the first result.
jit::Stack StepBuilder::typeBySample(const MetalessTyping &t) {
  const std::vector<std::vector<int64_t>> &shapes = *t.shapes;
  int64_t batch = !shapes.empty() && !shapes[0].empty() ? shapes[0][0] : 0;
  int64_t sampleBytes = 0;
  for (const std::vector<int64_t> &shape : shapes)
    sampleBytes = saturatingAdd(
        sampleBytes,
        saturatingMul(numelOf(shape), 8) /
            (batch > 1 && !shape.empty() && shape[0] == batch ? batch : 1));
  if (batch <= 1 || sampleBytes > kCpuTypingBudget ||
      t.inputBytes / batch > kCpuTypingBudget)
    return typeByProbes(t, sampleBytes);
  std::string error;
  std::optional<jit::Stack> sample = runOnCpuFilled(t, batch, error);
  if (!sample)
    typingTooLarge(t, "it does not run on one sample of its inputs (" + error +
                          ")");
  // The sample's results must be the shape function's, one sample smaller.
  std::vector<at::Tensor> results = tensorsOf(*sample);
  bool agree = results.size() == shapes.size();
  for (size_t i = 0; agree && i < results.size(); ++i) {
    std::vector<int64_t> expected = shapes[i];
    if (!expected.empty() && expected[0] == batch)
      expected[0] = 1;
    agree = results[i].sizes().vec() == expected;
  }
  if (!agree)
    typingTooLarge(t, "its results on one sample do not match its shape "
                      "function");
  return withShapes(t, results);
}

/// No sample to take (a batch of one) or too large a one: the shapes are the
/// shape function's, and the dtypes those of the op run on inputs with every
/// dimension 1, or every one but the last (a layer norm's), where the op
/// takes such inputs: a result's dtype does not depend on shapes. Otherwise
/// the op runs whole if that fits the budget.
jit::Stack StepBuilder::typeByProbes(const MetalessTyping &t,
                                  int64_t sampleBytes) {
  for (int64_t probe : {kAllOnes, kAllButLast}) {
    std::string ignored;
    std::optional<jit::Stack> ran = runOnCpuFilled(t, probe, ignored);
    if (!ran)
      continue;
    std::vector<at::Tensor> results = tensorsOf(*ran);
    if (results.size() == t.shapes->size())
      return withShapes(t, results);
  }
  std::string error;
  if (t.inputBytes <= kCpuTypingBudget && t.resultBytes <= kCpuTypingBudget)
    if (std::optional<jit::Stack> whole = runOnCpuFilled(t, 0, error))
      return std::move(*whole);
  typingTooLarge(t, "one sample of its results alone holds " +
                        std::to_string(sampleBytes >> 20) + " MiB");
}

//===----------------------------------------------------------------------===//
// Op calls
//===----------------------------------------------------------------------===//

namespace {
/// Operators whose schema does not say that they write an argument, but do:
/// batch_norm updates the running statistics in training mode.
struct HiddenMutation {
  const char *name;
  std::vector<int64_t> args;
  int64_t trainingArg; // the argument that says whether it writes, or -1
};
const HiddenMutation kHiddenMutations[] = {
    {"aten::batch_norm", {3, 4}, 5},
    {"aten::instance_norm", {3, 4}, 5},
};
} // namespace

/// `name.overload`, as the aten dialect spells an op.
std::string fsdp::import::overloadName(const c10::FunctionSchema &schema) {
  std::string overload = schema.name();
  if (!schema.overload_name().empty())
    overload += "." + schema.overload_name();
  return overload;
}

/// The most ATen calls a model's forward may unroll to (loops on constants
/// are unrolled): well above the largest models' (a 48-layer GPT has about
/// 3,000; an LSTM unrolled over 512 steps, 20,000), and what compiles, with
/// the backward, in a few GB.
constexpr int64_t kMaxCalls = 50000;

/// A `Device` or `Device?` argument.
static bool isDeviceType(const c10::TypePtr &type) {
  if (auto optional = type->cast<c10::OptionalType>())
    return optional->getElementType()->kind() == c10::TypeKind::DeviceObjType;
  return type->kind() == c10::TypeKind::DeviceObjType;
}

bool StepBuilder::mayFold(const c10::FunctionSchema &schema) {
  if (aten::hasFact(schema.name(), aten::OpFact::Uninitialized) ||
      aten::hasFact(schema.name(), aten::OpFact::Random))
    return false;
  for (const c10::Argument &r : schema.returns())
    if (r.type()->isSubtypeOf(*c10::TensorType::get()) ||
        r.type()->isSubtypeOf(*c10::ListType::ofTensors()) ||
        r.type()->isSubtypeOf(*c10::OptionalType::ofTensor()))
      // TorchScript's torch.tensor(values) makes a tensor from Python
      // numbers alone: no plan calls it, and it touches nothing else.
      return fsdp::runtime::isPlanOperator(overloadName(schema)) ||
             schema.name() == "aten::tensor" ||
             schema.name() == "aten::as_tensor";
  return true;
}

bool StepBuilder::foldFits(const c10::FunctionSchema &schema,
                           const Stack &stack,
                           const std::function<void(Stack &)> &run) {
  bool makesTensors = llvm::any_of(schema.returns(), [](const c10::Argument &r) {
    return r.type()->kind() != c10::TypeKind::IntType &&
           r.type()->kind() != c10::TypeKind::FloatType &&
           r.type()->kind() != c10::TypeKind::BoolType &&
           r.type()->kind() != c10::TypeKind::NumberType;
  });
  if (!makesTensors)
    return true;
  // The same call on meta tensors, made on the meta device.
  Stack meta;
  auto toMeta = [](const c10::IValue &v) -> c10::IValue {
    if (v.isTensor())
      return at::empty_strided(v.toTensor().sizes(), v.toTensor().strides(),
                               v.toTensor().options().device(at::kMeta));
    return v;
  };
  for (size_t i = 0; i < stack.size(); ++i) {
    const c10::IValue &v = stack[i];
    if (i < schema.arguments().size() &&
        isDeviceType(schema.arguments()[i].real_type())) {
      meta.push_back(c10::Device(at::kMeta));
    } else if (v.isTensorList()) {
      std::vector<at::Tensor> list;
      for (const at::Tensor &t : v.toTensorVector())
        list.push_back(toMeta(t).toTensor());
      meta.push_back(c10::List<at::Tensor>(list));
    } else {
      meta.push_back(toMeta(v));
    }
  }
  auto small = [](const c10::IValue &r) {
    if (r.isTensor())
      return r.toTensor().numel() <= kMaxFoldElements;
    if (r.isTensorList())
      return llvm::all_of(r.toTensorVector(), [](const at::Tensor &t) {
        return t.numel() <= kMaxFoldElements;
      });
    return true;
  };
  try {
    run(meta);
    return llvm::all_of(meta, small);
  } catch (const std::exception &) {
  }
  // No meta kernel (floor_divide has none in C++): ATen's shape function
  // says, where there is one; else small tensor inputs make small results
  // (an op without tensor inputs, a factory, is not run).
  if (auto shapes = shapesFromShapeFunction(schema, stack))
    return llvm::all_of(*shapes, [](const std::vector<int64_t> &shape) {
      return numelOf(shape) <= kMaxFoldElements;
    });
  bool anyTensor = false;
  for (const c10::IValue &v : stack) {
    anyTensor |= v.isTensor() || v.isTensorList();
    if (!small(v))
      return false;
  }
  return anyTensor;
}

at::Tensor StepBuilder::typeOnlyInput(RankedTensorType type, Location loc) {
  return at::zeros({}, at::TensorOptions().dtype(
                           scalarType(type.getElementType(), loc)))
      .expand(type.getShape().vec());
}

std::vector<AbsValue> StepBuilder::emitCall(CallSite &site) {
  const c10::FunctionSchema &schema = site.schema;
  // Only what a plan may call is typed (run on meta tensors) and emitted.
  if (!fsdp::runtime::isPlanOperator(site.overload))
    fail(site.loc, site.overload + " is not an operator fsdp-run runs from a "
                   "plan (its kernel trusts its arguments, reads or writes "
                   "files, or is not an ATen operator): rewrite the model "
                   "without it");
  if (++callsEmitted > kMaxCalls)
    fail(site.loc, "the step unrolls to more than " + std::to_string(kMaxCalls) +
                       " ATen calls (a loop with a constant trip count is "
                       "unrolled): fsdp-opt compiles steps up to that size");
  site.mutated = mutatedArguments(site);
  // The shape of these results depends on tensor data.
  if (aten::hasFact(schema.name(), aten::OpFact::DataDependentShape))
    fail(site.loc, site.overload + " returns a tensor whose shape depends on "
                                   "tensor data; a static training step "
                                   "needs static shapes: compute on the "
                                   "whole tensor instead (mask by "
                                   "multiplying or with torch.where), and "
                                   "for a Hugging Face model whose loss "
                                   "selects labels by value, set the "
                                   "config's problem_type (e.g. "
                                   "\"single_label_classification\")");
  if (schema.is_vararg() || site.args.size() != schema.arguments().size())
    fail(site.loc, site.overload + " has a variable argument list");

  CallArguments arguments = callArguments(site);
  // Types from the meta call; ops without a meta kernel are typed by
  // typeWithoutMeta.
  std::string metaError;
  bool typed = typeByMeta(site, arguments.stack, metaError);
  bool kernelLayouts = typed;
  if (!typed)
    arguments.stack = typeWithoutMeta(site, metaError, kernelLayouts);
  CallResults results = callResults(site, arguments.stack, kernelLayouts);
  site.numSchemaResults = results.types.size();
  // The new values of mutated arguments follow the schema's results.
  for (int64_t arg : site.mutated) {
    const AbsValue &a = *site.args[arg];
    // A constant written with the step's data is a value of the step
    // (writable) unless others share its memory.
    if (a.isConstant() && a.constant.isTensor())
      fail(site.loc, site.overload + " writes argument '" +
                         schema.arguments()[arg].name() +
                         "', a constant whose memory other values share (its "
                         "base, a view of it or a list holding it), which "
                         "fsdp-opt cannot follow: write through slices and "
                         "selects of the tensor itself");
    if (!a.isTensor())
      fail(site.loc, site.overload + " writes argument '" +
                         schema.arguments()[arg].name() +
                         "', which is not a tensor of the step");
    results.types.push_back(a.tensor.getType());
    site.mutatedOperands.push_back(a.tensor);
  }
  checkWritesThroughAliases(site);

  auto call = aten::CallOp::create(
      builder, site.loc, results.types, builder.getStringAttr(site.overload),
      builder.getArrayAttr(arguments.args), arguments.operands,
      site.mutated.empty() ? DenseI64ArrayAttr()
                           : builder.getDenseI64ArrayAttr(site.mutated),
      results.list ? builder.getUnitAttr() : UnitAttr());
  if (results.anyStrided)
    call->setAttr("aten.result_strides", builder.getArrayAttr(results.strides));
  if (!results.internalViews.empty())
    call->setAttr("aten.internal_views",
                  builder.getDenseI64ArrayAttr(results.internalViews));
  std::vector<AbsValue> outputs = bindResults(site, call, results);
  rebindWritten(site, call);
  scatterIntoBases(site, call);
  return outputs;
}

/// Which arguments the op writes: those its schema says, and those a
/// HiddenMutation says in training mode.
std::vector<int64_t> StepBuilder::mutatedArguments(const CallSite &site) {
  const c10::FunctionSchema &schema = site.schema;
  std::vector<int64_t> mutated;
  for (size_t i : writtenArguments(schema))
    mutated.push_back(i);
  for (const HiddenMutation &hidden : kHiddenMutations) {
    if (schema.name() != hidden.name)
      continue;
    const AbsValue &training = *site.args[hidden.trainingArg];
    if (!training.isConstant() || !training.constant.isBool())
      fail(site.loc,
           std::string(hidden.name) + ": `training` is not a constant");
    if (!training.constant.toBool())
      continue;
    for (int64_t arg : hidden.args)
      if (site.args[arg]->isTensor())
        mutated.push_back(arg);
  }
  return mutated;
}

/// Arguments in schema order, and the meta-tensor call that types results.
CallArguments StepBuilder::callArguments(const CallSite &site) {
  CallArguments out;
  for (size_t i = 0; i < site.schema.arguments().size(); ++i) {
    const c10::Argument &arg = site.schema.arguments()[i];
    const c10::TypePtr &type = site.argTypes[i];
    const AbsValue &a = *site.args[i];
    out.stack.push_back(toIValue(a, type, /*meta=*/true, site.loc));
    // A factory is typed on the meta device too (its tensor is not made).
    if (isDeviceType(arg.real_type()))
      out.stack.back() = c10::Device(at::kMeta);
    std::string what = "argument '" + arg.name() + "' of " + site.overload;
    if (Value tensor = tensorValue(a, site.loc)) {
      out.operands.push_back(tensor);
      out.args.push_back(aten::TensorArgAttr::get(context));
    } else if (a.kind == AbsValue::Kind::Sequence &&
               type->isSubtypeOf(*c10::ListType::ofTensors())) {
      addTensorList(out, a, what, site.loc);
    } else if (a.kind == AbsValue::Kind::Sequence &&
               type->isSubtypeOf(*c10::ListType::create(
                   c10::OptionalType::create(c10::TensorType::get())))) {
      addOptionalTensorList(out, a, what, site.loc);
    } else if (a.isFullyConstant()) {
      c10::IValue value = toIValue(a, type, /*meta=*/false, site.loc);
      bool holdsTensors =
          value.isTensorList() ||
          (value.isList() &&
           llvm::any_of(value.toListRef(),
                        [](const c10::IValue &e) { return e.isTensor(); }));
      if (holdsTensors)
        addConstantTensorList(out, value.toList(), site.loc);
      else
        out.args.push_back(constantAttr(value, &arg, site.loc, what));
    } else {
      fail(site.loc,
           what + " is neither a tensor nor a compile-time constant");
    }
  }
  return out;
}

/// A Tensor[]: its tensors' operands.
void StepBuilder::addTensorList(CallArguments &out, const AbsValue &list,
                             const std::string &what, Location loc) {
  for (const AbsValue &e : list.elements) {
    Value tensor = tensorValue(e, loc);
    if (!tensor)
      fail(loc, what + " holds a value that is not a tensor");
    out.operands.push_back(tensor);
  }
  out.args.push_back(
      aten::TensorListArgAttr::get(context, list.elements.size()));
}

/// A Tensor?[] (the indices of aten::index): operands and None in place.
void StepBuilder::addOptionalTensorList(CallArguments &out, const AbsValue &list,
                                     const std::string &what, Location loc) {
  SmallVector<Attribute> elements;
  for (const AbsValue &e : list.elements) {
    if (Value tensor = tensorValue(e, loc)) {
      out.operands.push_back(tensor);
      elements.push_back(aten::TensorArgAttr::get(context));
    } else if (e.isConstant() && e.constant.isNone()) {
      elements.push_back(aten::NoneAttr::get(context));
    } else {
      fail(loc, what + " holds a value that is neither a tensor nor None");
    }
  }
  // Without a None it is written (and read back) as a plain tensor list.
  if (!elements.empty() &&
      llvm::all_of(elements, llvm::IsaPred<aten::TensorArgAttr>))
    out.args.push_back(
        aten::TensorListArgAttr::get(context, elements.size()));
  else
    out.args.push_back(builder.getArrayAttr(elements));
}

/// A constant Tensor[], or a Tensor?[] (constant indices, None for the
/// dimensions they skip).
void StepBuilder::addConstantTensorList(CallArguments &out,
                                     c10::List<c10::IValue> list,
                                     Location loc) {
  SmallVector<Attribute> elements;
  for (const c10::IValue &e : list) {
    if (e.isNone()) {
      elements.push_back(aten::NoneAttr::get(context));
      continue;
    }
    out.operands.push_back(materialize(e.toTensor(), loc));
    elements.push_back(aten::TensorArgAttr::get(context));
  }
  if (llvm::all_of(elements, llvm::IsaPred<aten::TensorArgAttr>))
    out.args.push_back(aten::TensorListArgAttr::get(context, list.size()));
  else
    out.args.push_back(builder.getArrayAttr(elements));
}

/// Types `stack` by the op's meta kernel; false where it has none
/// (remembered, since a failed attempt costs an exception with a backtrace)
/// or it refuses these arguments.
bool StepBuilder::typeByMeta(const CallSite &site, jit::Stack &stack,
                          std::string &metaError) {
  if (noMetaKernel.contains(site.overload))
    return false;
  try {
    site.run(stack);
    return true;
  } catch (const c10::NotImplementedError &) {
    noMetaKernel.insert(site.overload);
  } catch (const c10::Error &e) {
    // A meta kernel that refuses these arguments, or a composite op that
    // reads tensor data: the CPU says which.
    metaError = firstLine(e.what_without_backtrace());
  }
  return false;
}

/// The types of the schema's results, from the typed stack; their strides
/// where the stack holds the kernel's own results (`kernelLayouts`).
CallResults StepBuilder::callResults(const CallSite &site, const jit::Stack &stack,
                                  bool kernelLayouts) {
  CallResults out;
  for (size_t i = 0; i < site.numOutputs; ++i) {
    const c10::IValue &result = stack[i];
    std::vector<Type> types;
    if (result.isTensor()) {
      types.push_back(tensorType(result.toTensor(), site.loc));
      const c10::AliasInfo *info = i < site.schema.returns().size()
                                       ? site.schema.returns()[i].alias_info()
                                       : nullptr;
      Attribute strides =
          resultStridesAttr(result.toTensor(), kernelLayouts && !info);
      out.anyStrided |= isa<DenseI64ArrayAttr>(strides);
      if (kernelLayouts && !info && result.toTensor().is_view())
        out.internalViews.push_back(static_cast<int64_t>(out.strides.size()));
      out.strides.push_back(strides);
    } else if (result.isTensorList()) {
      if (site.numOutputs != 1)
        fail(site.loc,
             site.overload + " returns a Tensor[] among other results");
      out.list = true;
      for (const at::Tensor &t : result.toTensorList().vec()) {
        types.push_back(tensorType(t, site.loc));
        out.strides.push_back(builder.getUnitAttr());
      }
    } else if (!result.isNone()) {
      fail(site.loc, site.overload + " returns a " + result.tagKind() +
                         " computed from tensor data");
    }
    out.types.append(types.begin(), types.end());
    out.ofOutput.push_back(types);
  }
  return out;
}

/// A kernel result laid out dense but not contiguous by the meta kernel or
/// the CPU kernel of a whole run (an einsum's permuted product, a
/// batch_first LSTM's output, stft's transposed frames): its strides, for
/// the memory model (`aten.result_strides`); a unit where the result is
/// contiguous or not the kernel's own (`ownResult` false: a view).
Attribute StepBuilder::resultStridesAttr(const at::Tensor &t, bool ownResult) {
  if (!ownResult || !t.defined() || t.is_contiguous() ||
      !t.is_non_overlapping_and_dense())
    return builder.getUnitAttr();
  return builder.getDenseI64ArrayAttr(
      llvm::ArrayRef<int64_t>(t.strides().data(), t.strides().size()));
}

/// The views from `target` up to `root` if each is a slice or a select of
/// the one before (what a write through them scatters back through: `x[:,
/// :m] = v`, `x[..., 0] = 0`), innermost first; empty otherwise.
static SmallVector<aten::CallOp> scatterableViews(Value target, Value root) {
  SmallVector<aten::CallOp> views;
  for (Value v = target; v != root;) {
    auto view = v.getDefiningOp<aten::CallOp>();
    if (!view || view.getNumOperands() != 1 || view.getNumResults() != 1 ||
        (view.getOverload() != "aten::slice.Tensor" &&
         view.getOverload() != "aten::select.int"))
      return {};
    views.push_back(view);
    v = view.getOperand(0);
  }
  return views;
}

/// Writing through an alias changes the other tensors of its alias class
/// (the base and its views) too. The functional rebinding (rebindWritten)
/// is exact if none of them is read afterwards; a write through slices and
/// selects of a base also gives the base a new value, the written one
/// scattered back (scatterIntoBases), so the base may be read afterwards
/// too. A buffer is never written through a view.
void StepBuilder::checkWritesThroughAliases(CallSite &site) {
  for (auto [k, target] : llvm::enumerate(site.mutatedOperands)) {
    Value root = viewBase.lookup(target);
    if (!root)
      root = target;
    if (root != target && stateOf.count(root))
      fail(site.loc, site.overload + " writes in place into a view of '" +
                         stateOf.lookup(root) +
                         "', which is not supported; assign the whole tensor");
    SmallVector<aten::CallOp> views;
    if (root != target)
      views = scatterableViews(target, root);
    auto aliases = [&](Value v) {
      if (v == target || (!views.empty() && v == root))
        return false;
      return v == root || viewBase.lookup(v) == root;
    };
    if (!views.empty())
      site.scatters.push_back({k, views, root});
    if (readAfter(site, aliases))
      fail(site.loc, site.overload +
                         " writes in place into a tensor that shares "
                         "memory with another one read later (a view "
                         "or its base), which is not supported; use "
                         "the out-of-place op or .clone()");
  }
}

/// The input a result aliases (a view: `Tensor(a)` in the schema), if any.
Value StepBuilder::aliasedInput(const CallSite &site,
                             const c10::AliasInfo *info) {
  if (!info || info->isWrite())
    return Value();
  for (size_t j = 0; j < site.schema.arguments().size(); ++j) {
    const c10::AliasInfo *argInfo = site.schema.arguments()[j].alias_info();
    if (argInfo && !argInfo->isWrite() &&
        argInfo->beforeSets() == info->beforeSets() &&
        site.args[j]->isTensor())
      return site.args[j]->tensor;
  }
  return Value();
}

void StepBuilder::recordView(Value result, Value base) {
  Value root = viewBase.lookup(base);
  viewBase[result] = root ? root : base;
}

/// The new value of the argument a `Tensor(a!)` return writes, if any: an
/// in-place op returns the tensor it wrote.
Value StepBuilder::writtenResult(const CallSite &site, aten::CallOp call,
                              const c10::AliasInfo *info) {
  if (!info || !info->isWrite())
    return Value();
  for (auto [k, arg] : llvm::enumerate(site.mutated)) {
    const c10::AliasInfo *argInfo = site.schema.arguments()[arg].alias_info();
    if (argInfo && argInfo->beforeSets() == info->beforeSets())
      return call.getResult(site.numSchemaResults + k);
  }
  return Value();
}

/// What the call's outputs bind to: its results.
std::vector<AbsValue> StepBuilder::bindResults(const CallSite &site,
                                               aten::CallOp call,
                                               const CallResults &results) {
  std::vector<AbsValue> outputs;
  unsigned next = 0;
  for (size_t i = 0; i < site.numOutputs; ++i) {
    const std::vector<Type> &types = results.ofOutput[i];
    const c10::AliasInfo *info = i < site.schema.returns().size()
                                     ? site.schema.returns()[i].alias_info()
                                     : nullptr;
    if (results.list) {
      // `Tensor(a)[]`: every element is a view of the input.
      if (info && !info->containedTypes().empty())
        info = &info->containedTypes()[0];
      Value base = aliasedInput(site, info);
      std::vector<AbsValue> elements;
      for (size_t j = 0; j < types.size(); ++j) {
        Value element = call.getResult(next++);
        if (base)
          recordView(element, base);
        elements.push_back(AbsValue::ofTensor(element));
      }
      outputs.push_back(AbsValue::ofSequence(elements, false));
    } else if (types.empty()) {
      outputs.push_back(fromIValue(c10::IValue()));
    } else {
      Value result = call.getResult(next++);
      if (Value base = aliasedInput(site, info))
        recordView(result, base);
      if (Value written = writtenResult(site, call, info))
        result = written;
      outputs.push_back(AbsValue::ofTensor(result));
    }
  }
  return outputs;
}

/// Rebinds every name of a written tensor to its new value; a written buffer
/// gets a state update.
void StepBuilder::rebindWritten(const CallSite &site, aten::CallOp call) {
  for (auto [k, old] : llvm::enumerate(site.mutatedOperands)) {
    Value updated = call.getResult(site.numSchemaResults + k);
    replaceEverywhere(old, updated);
    auto state = stateOf.find(old);
    if (state != stateOf.end()) {
      std::string fqn = state->second;
      if (states.lookup(fqn).isParam)
        fail(site.loc, site.overload + " writes parameter '" + fqn +
                           "' in place inside the forward");
      current[fqn] = updated;
      stateOf[updated] = fqn;
    }
  }
}

/// A write through slices and selects of a base (site.scatters): the base's
/// new value is the written tensor scattered back through each view
/// (slice_scatter, select_scatter), which every name of the base now holds.
void StepBuilder::scatterIntoBases(const CallSite &site, aten::CallOp call) {
  for (const CallSite::Scatter &s : site.scatters) {
    Value value = call.getResult(site.numSchemaResults + s.written);
    for (aten::CallOp view : s.views) {
      Value parent = view.getOperand(0);
      bool slice = view.getOverload() == "aten::slice.Tensor";
      // A slice as large as its input (x[:, ...]'s `:`) is all of it.
      if (slice && view.getResult(0).getType() == parent.getType())
        continue;
      // slice_scatter(self, src, dim, start, end, step) and
      // select_scatter(self, src, dim, index): the view's own arguments.
      SmallVector<Attribute> args{aten::TensorArgAttr::get(context),
                                  aten::TensorArgAttr::get(context)};
      args.append(view.getArgs().begin() + 1, view.getArgs().end());
      value = aten::CallOp::create(
                  builder, site.loc, TypeRange{parent.getType()},
                  builder.getStringAttr(slice ? "aten::slice_scatter"
                                              : "aten::select_scatter"),
                  builder.getArrayAttr(args), ValueRange{parent, value},
                  DenseI64ArrayAttr(), UnitAttr())
                  .getResult(0);
    }
    replaceEverywhere(s.base, value);
  }
}
/// Erases computations nothing reads. The IR is functional (every write is
/// a new value), so an op without a used result, a state update or a
/// written argument someone reads is dead.
static void removeDeadOps(func::FuncOp func) {
  Block &body = func.getBody().front();
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body))) {
    if (!isa<aten::CallOp, aten::ConstantOp, GetOp>(op))
      continue;
    if (llvm::all_of(op.getResults(), [](Value r) { return r.use_empty(); }))
      op.erase();
  }
}

//===----------------------------------------------------------------------===//
// The step's frame
//===----------------------------------------------------------------------===//

/// Mixed precision's compute types (bf16 or f16; null: the model's own).
LogicalResult StepBuilder::setComputeTypes(const ImportOptions &options,
                                           Location fileLoc) {
  auto computeType = [&](const std::string &name) -> Type {
    if (name != "bf16" && name != "f16")
      return Type();
    return elementTypeNamed(name, context);
  };
  paramDtype = computeType(options.paramDtype);
  bufferDtype = computeType(options.bufferDtype);
  for (const std::string *name : {&options.paramDtype, &options.bufferDtype})
    if (!name->empty() && !computeType(*name)) {
      emitError(fileLoc) << "mixed precision dtype '" << *name
                         << "': expected bf16 or f16";
      return failure();
    }
  return success();
}

StepBuilder::StoredMetadata
StepBuilder::readStoredMetadata(const std::string &text, Location fileLoc) {
  StoredMetadata stored;
  auto json = parseJSON(text);
  if (!json)
    fail(fileLoc, std::string("malformed ") + kMetadataExtraFile + " in '" +
                      path + "': " + llvm::toString(json.takeError()));
  const llvm::json::Array *inputs = nullptr;
  if (json)
    if (auto *object = json->getAsObject()) {
      inputs = object->getArray("inputs");
      // Loss targets are not forward inputs: the training step reads
      // them from the module (`fsdp.targets`).
      if (const llvm::json::Array *targets = object->getArray("targets"))
        for (const llvm::json::Value &t : *targets)
          if (auto name = t.getAsString())
            stored.targets.push_back(name->str());
      if (const llvm::json::Array *names =
              object->getArray("non_persistent_buffers"))
        for (const llvm::json::Value &n : *names)
          if (auto name = n.getAsString())
            stored.nonPersistent.push_back(name->str());
    }
  if (!inputs)
    fail(fileLoc, std::string("malformed ") + kMetadataExtraFile + " in '" +
                      path + "'");
  for (const llvm::json::Value &v : *inputs) {
    InputSpec spec;
    std::string error;
    auto spelled = v.getAsString();
    if (!spelled || !parseInputSpec(*spelled, spec, error))
      fail(fileLoc, std::string(kMetadataExtraFile) + ": " +
                        (spelled ? error : "input is not a string"));
    stored.inputs.push_back(spec);
  }
  return stored;
}

std::vector<InputSpec>
StepBuilder::withOverrides(std::vector<InputSpec> stored,
                           const std::vector<InputSpec> &overrides) {
  for (const InputSpec &spec : overrides) {
    auto it = llvm::find_if(
        stored, [&](const InputSpec &s) { return s.name == spec.name; });
    if (it != stored.end())
      *it = spec;
    else
      stored.push_back(spec);
  }
  return stored;
}

/// The input specs, for messages about shapes that do not fit the model.
void StepBuilder::summarizeInputs(const std::vector<InputSpec> &specs) {
  for (const InputSpec &spec : specs)
    inputSummary += (inputSummary.empty() ? "" : ", ") + spec.str();
  // Mixed precision types the step in other dtypes: say which.
  auto dtypeText = [](Type t) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << t;
    return s;
  };
  if (paramDtype)
    inputSummary += "; mixed precision: parameters and floating-point "
                    "inputs in " + dtypeText(paramDtype);
  if (paramDtype || bufferDtype)
    inputSummary += std::string(paramDtype ? "," : "; mixed precision:") +
                    " floating-point buffers in " +
                    (bufferDtype ? dtypeText(bufferDtype)
                                 : std::string("their own dtype"));
}

void StepBuilder::createModule(Location fileLoc,
                               const std::vector<std::string> &targets) {
  module = ModuleOp::create(fileLoc);
  if (!targets.empty()) {
    SmallVector<Attribute> attrs;
    for (const std::string &t : targets)
      attrs.push_back(builder.getStringAttr(t));
    module->setAttr(kTargetsAttr, builder.getArrayAttr(attrs));
  }
  builder.setInsertionPointToEnd(module.getBody());
}

func::FuncOp StepBuilder::createFunction(Location fileLoc,
                                         llvm::ArrayRef<Type> types,
                                         llvm::ArrayRef<std::string> names) {
  func = func::FuncOp::create(builder, fileLoc, "forward",
                              builder.getFunctionType(types, {}));
  Block *entry = func.addEntryBlock();
  for (size_t i = 0; i < names.size(); ++i)
    func.setArgAttr(i, kNameAttr, builder.getStringAttr(names[i]));
  builder.setInsertionPointToEnd(entry);
  return func;
}

Value StepBuilder::castInput(Value arg) {
  if (paramDtype &&
      isa<FloatType>(cast<RankedTensorType>(arg.getType()).getElementType()))
    return aten::ATenBuilder(builder, arg.getLoc()).cast(arg, paramDtype);
  return arg;
}

void StepBuilder::finishFunction(llvm::ArrayRef<Type> inputTypes,
                                 llvm::ArrayRef<Value> results,
                                 Location fileLoc) {
  // Buffers the step changed keep their new value.
  for (const std::string &fqn : stateOrder) {
    Value now = current.lookup(fqn);
    if (now && now != initial.lookup(fqn))
      UpdateOp::create(builder, now.getLoc(),
                       FlatSymbolRefAttr::get(context, fqn), now);
  }
  func::ReturnOp::create(builder, fileLoc, results);
  func.setType(
      builder.getFunctionType(inputTypes, ValueRange(results).getTypes()));
  removeDeadOps(func);
  // What the compiler read of the archive's tensor values (for
  // --fsdp-report): module tensors used as constants.
  SmallVector<Attribute> read;
  for (const auto &[name, bytes] : valuesRead)
    read.push_back(builder.getArrayAttr(
        {builder.getStringAttr(name), builder.getI64IntegerAttr(bytes)}));
  module->setAttr(kValuesReadAttr, builder.getArrayAttr(read));
}

const AbsValue &StepBuilder::computeDtypeArgument(
    const c10::FunctionSchema &schema, size_t i, const AbsValue &a,
    Location loc) {
  // Mixed precision: a traced model records `dtype=x.dtype` as the dtype
  // the tracer saw, float32. A factory that fills a new float32 tensor
  // (nn.LSTM's initial state, stochastic depth's noise) creates the compute
  // dtype instead, as the model's code does in eager on bf16 tensors.
  // Ranges (`arange`, `linspace`) keep their dtype: bf16 would round their
  // integers.
  if (!paramDtype || i >= schema.arguments().size() ||
      schema.arguments()[i].name() != "dtype" ||
      !aten::hasFact(schema.name(), aten::OpFact::FillingFactory) ||
      !a.isConstant() || !a.constant.isInt() ||
      a.constant.toInt() != static_cast<int64_t>(at::kFloat))
    return a;
  if (computeDtype.kind != AbsValue::Kind::Constant)
    computeDtype = fromIValue(
        c10::IValue(static_cast<int64_t>(scalarType(paramDtype, loc))));
  return computeDtype;
}
