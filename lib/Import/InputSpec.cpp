//===- InputSpec.cpp - `--input` specs and file recognition ----------------===//

#include "fsdp/Import/InputSpec.h"
#include "fsdp/Target/Plan/PlanTypes.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>

using namespace fsdp;

/// The dtypes an input spec may name (plan dtypes, as the data holds them).
static constexpr llvm::StringLiteral kDtypes[] = {"f32", "f16", "bf16", "f64",
                                                  "i64", "i32", "i1"};

mlir::Type InputSpec::elementType(mlir::MLIRContext *context) const {
  return elementTypeNamed(dtype, context);
}

std::string InputSpec::str() const {
  std::string text = name + ":";
  for (int64_t dim : shape)
    text += std::to_string(dim) + "x";
  return text + dtype;
}

bool fsdp::parseInputSpec(llvm::StringRef text, InputSpec &spec,
                          std::string &error) {
  auto fail = [&](const llvm::Twine &why) {
    error = ("bad input spec '" + text + "': " + why +
             " (expected NAME:DIMSxDTYPE such as x:8x3x32x32xf32; dtypes: "
             "f32 f16 bf16 f64 i64 i32 i1)")
                .str();
    return false;
  };
  auto [name, type] = text.split(':');
  if (name.empty() || type.empty() || !text.contains(':'))
    return fail("missing NAME or type");
  if (!llvm::all_of(name, [](char c) { return llvm::isAlnum(c) || c == '_'; }))
    return fail("NAME '" + name + "' is not an identifier");
  llvm::SmallVector<llvm::StringRef> parts;
  type.split(parts, 'x');
  llvm::StringRef dtype = parts.pop_back_val();
  if (!llvm::is_contained(kDtypes, dtype))
    return fail("unknown dtype '" + dtype + "'");
  spec.name = name.str();
  spec.dtype = dtype.str();
  spec.shape.clear();
  for (llvm::StringRef dim : parts) {
    int64_t size;
    if (dim.getAsInteger(10, size) || size < 0)
      return fail("dimension '" + dim + "' is not a non-negative integer");
    spec.shape.push_back(size);
  }
  return true;
}

InputFileKind fsdp::classifyInputFile(llvm::StringRef path) {
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                          /*RequiresNullTerminator=*/false);
  if (!file)
    return InputFileKind::Other;
  llvm::StringRef data = (*file)->getBuffer();
  if (!data.starts_with(llvm::StringRef("PK\x03\x04", 4)))
    return InputFileKind::Other;
  // The zip's central directory, at its end, names every entry (about 100
  // bytes each: 8 MiB covers tens of thousands of tensors).
  llvm::StringRef tail = data.take_back(std::min<size_t>(data.size(), 8 << 20));
  // End of central directory record.
  if (!tail.contains(llvm::StringRef("PK\x05\x06", 4)))
    return InputFileKind::CorruptZip;
  if (tail.contains("/constants.pkl") && tail.contains("/data.pkl"))
    return InputFileKind::TorchScript;
  if (tail.contains("/archive_format") && tail.contains("/models/"))
    return InputFileKind::ExportedProgram;
  return InputFileKind::OtherZip;
}
