//===- OperatorGuards.cpp - checks around a plan's operator calls ---------===//

#include "fsdp/runtime/OperatorGuards.h"
#include "fsdp/runtime/Plan.h"

#include <ATen/ATen.h>

#include <map>
#include <optional>

namespace fsdp::runtime {

bool withinStorage(const at::Tensor &t) {
  if (!t.defined() || !t.has_storage() || t.numel() == 0)
    return true;
  int64_t last = t.storage_offset();
  if (last < 0)
    return false;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.stride(d) < 0)
      return false;
    last += (t.size(d) - 1) * t.stride(d);
  }
  return (last + 1) * static_cast<int64_t>(t.element_size()) <=
         static_cast<int64_t>(t.storage().nbytes());
}

namespace {

using Stack = torch::jit::Stack;

std::string shapeText(at::IntArrayRef sizes) {
  std::string text = "[";
  for (size_t d = 0; d < sizes.size(); ++d)
    text += (d ? ", " : "") + std::to_string(sizes[d]);
  return text + "]";
}

/// A tensor argument; undefined for None.
at::Tensor tensorArg(const Stack &args, size_t i) {
  return args[i].isNone() ? at::Tensor() : args[i].toTensor();
}

/// Every value of the integer tensor `arg` (argument #i) in [lo, hi), or
/// `exempt`.
void checkRange(const Stack &args, size_t i, const char *arg, int64_t lo,
                int64_t hi, std::optional<int64_t> exempt,
                const std::string &bound, const std::string &where) {
  at::Tensor index = tensorArg(args, i);
  if (!index.defined() || index.numel() == 0)
    return;
  if (!at::isIntegralType(index.scalar_type(), /*includeBool=*/false))
    throw Error(where + ": '" + arg + "' is not an integer tensor");
  at::Tensor bad = index.lt(lo).logical_or(index.ge(hi));
  if (exempt)
    bad = bad.logical_and(index.ne(*exempt));
  std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) +
                      ") (" + bound + ")";
  if (index.is_cuda()) {
    at::_assert_async(bad.logical_not().all(),
                      where + ": '" + arg + "' holds a value outside " + range);
    return;
  }
  if (!bad.any().item<bool>())
    return;
  int64_t value = index.masked_select(bad).view(-1)[0].item<int64_t>();
  throw Error(where + ": '" + arg + "' holds " + std::to_string(value) +
              ", outside " + range);
}

/// Argument #i, when given, has `n` elements.
void checkNumel(const Stack &args, size_t i, const char *arg, int64_t n,
                const std::string &what, const std::string &where) {
  at::Tensor t = tensorArg(args, i);
  if (t.defined() && t.numel() != n)
    throw Error(where + ": '" + std::string(arg) + "' has " +
                std::to_string(t.numel()) + " elements, but " + what +
                " is " + std::to_string(n));
}

/// Argument #i has the sizes of argument #j.
void checkSameSizes(const Stack &args, size_t i, const char *arg, size_t j,
                    const char *other, const std::string &where) {
  at::Tensor a = tensorArg(args, i), b = tensorArg(args, j);
  if (a.defined() && b.defined() && a.sizes() != b.sizes())
    throw Error(where + ": '" + arg + "' is " + shapeText(a.sizes()) +
                ", but '" + other + "' is " + shapeText(b.sizes()));
}

/// The product of the last `n` sizes of argument #i (at least n dims).
int64_t trailing(const Stack &args, size_t i, int64_t n, const char *arg,
                 const std::string &where) {
  at::Tensor t = tensorArg(args, i);
  if (!t.defined() || t.dim() < n)
    throw Error(where + ": '" + arg + "' needs at least " + std::to_string(n) +
                " dimensions");
  int64_t p = 1;
  for (int64_t d = t.dim() - n; d < t.dim(); ++d)
    p *= t.size(d);
  return p;
}

void requireFalse(const Stack &args, size_t i, const char *arg,
                  const std::string &where) {
  if (args[i].toBool())
    throw Error(where + ": '" + arg + "' must be false in a plan (the "
                "kernel then skips its checks)");
}

// Embeddings: the backward kernels write a gradient row at each index.
void embeddingDenseBackward(const Stack &args, const std::string &where) {
  int64_t rows = args[2].toInt();
  checkRange(args, 1, "indices", 0, rows, args[3].toInt(), "num_weights",
             where);
}
void embeddingBackward(const Stack &args, const std::string &where) {
  requireFalse(args, 5, "sparse", where);
  embeddingDenseBackward(args, where);
}
void embeddingRenorm(const Stack &args, const std::string &where) {
  checkRange(args, 1, "indices", 0, tensorArg(args, 0).size(0),
             std::nullopt, "self's rows", where);
}
void embeddingBag(const Stack &args, const std::string &where) {
  at::Tensor weight = tensorArg(args, 0), indices = tensorArg(args, 1);
  checkRange(args, 1, "indices", 0, weight.size(0), std::nullopt,
             "weight's rows", where);
  checkNumel(args, 6, "per_sample_weights", indices.numel(),
             "the number of indices", where);
  at::Tensor offsets = tensorArg(args, 2);
  if (indices.dim() != 1 || !offsets.defined() || offsets.numel() == 0)
    return;
  // Bags begin at 0, in order, within the indices.
  at::Tensor bad = offsets.view(-1)[0].ne(0).logical_or(
      offsets.view(-1)[-1].gt(indices.numel()));
  if (offsets.numel() > 1)
    bad = bad.logical_or(
        offsets.view(-1).diff().lt(0).any());
  if (offsets.is_cuda()) {
    at::_assert_async(bad.logical_not(),
                      where + ": 'offsets' must begin at 0 and rise to at "
                      "most the number of indices");
    return;
  }
  if (bad.item<bool>())
    throw Error(where + ": 'offsets' must begin at 0 and rise to at most the "
                "number of indices (" + std::to_string(indices.numel()) + ")");
}

// Losses: the backward of nll_loss (reduction none) and the CTC and
// multilabel losses index by class without a check.
int64_t classes(const Stack &args, size_t self, int64_t dimOf1D) {
  at::Tensor t = tensorArg(args, self);
  return t.dim() <= 1 ? t.size(dimOf1D) : t.size(1);
}
void nllLossBackward(const Stack &args, const std::string &where) {
  int64_t c = classes(args, 1, 0);
  checkRange(args, 2, "target", 0, c, args[5].toInt(), "the classes", where);
  checkNumel(args, 3, "weight", c, "the number of classes", where);
}
void ctcLoss(const Stack &args, const std::string &where) {
  at::Tensor logProbs = tensorArg(args, 0);
  checkRange(args, 1, "targets", 0, logProbs.size(-1), std::nullopt,
             "the classes of log_probs", where);
}
void multilabelMarginLoss(const Stack &args, const std::string &where) {
  checkRange(args, 1, "target", -1, tensorArg(args, 0).size(-1), std::nullopt,
             "the classes, or -1", where);
  checkSameSizes(args, 1, "target", 0, "self", where);
}
void multilabelMarginLossBackward(const Stack &args, const std::string &where) {
  checkRange(args, 2, "target", -1, tensorArg(args, 1).size(-1), std::nullopt,
             "the classes, or -1", where);
  checkSameSizes(args, 2, "target", 1, "self", where);
  checkSameSizes(args, 4, "is_target", 1, "self", where);
}

// Pooling backward with indices: the gradient is added at each index.
template <int Dims, size_t Indices>
void poolBackward(const Stack &args, const std::string &where) {
  int64_t plane = trailing(args, 1, Dims, "self", where);
  checkRange(args, Indices, "indices", 0, plane, std::nullopt,
             "the input's plane", where);
  checkSameSizes(args, Indices, "indices", 0, "grad_output", where);
}

void indexPutImpl(const Stack &args, const std::string &where) {
  requireFalse(args, 4, "unsafe", where);
}

// Normalization: the kernels read (and write) their statistics and affine
// parameters by channel.
template <size_t First, size_t Last>
void batchNorm(const Stack &args, const std::string &where) {
  at::Tensor input = tensorArg(args, 0);
  if (input.dim() < 2)
    throw Error(where + ": 'input' needs a channel dimension");
  for (size_t i = First; i <= Last; ++i)
    checkNumel(args, i, "weight, bias or a statistic", input.size(1),
               "the input's channel count", where);
}
void batchNormNoStats(const Stack &args, const std::string &where) {
  batchNorm<1, 2>(args, where);
}
void batchNormBackward(const Stack &args, const std::string &where) {
  at::Tensor input = tensorArg(args, 1);
  if (input.dim() < 2)
    throw Error(where + ": 'input' needs a channel dimension");
  for (size_t i = 2; i <= 6; ++i)
    checkNumel(args, i, "weight or a statistic", input.size(1),
               "the input's channel count", where);
  checkSameSizes(args, 0, "grad_out", 1, "input", where);
}
void layerNormBackward(const Stack &args, const std::string &where) {
  at::Tensor input = tensorArg(args, 1);
  std::vector<int64_t> normalized = args[2].toIntVector();
  int64_t k = static_cast<int64_t>(normalized.size());
  if (input.dim() < k ||
      input.sizes().slice(input.dim() - k) != at::IntArrayRef(normalized))
    throw Error(where + ": 'input' " + shapeText(input.sizes()) +
                " does not end in normalized_shape " + shapeText(normalized));
  int64_t n = 1;
  for (int64_t s : normalized)
    n *= s;
  int64_t m = n == 0 ? 0 : input.numel() / n;
  checkNumel(args, 3, "mean", m, "the number of normalized rows", where);
  checkNumel(args, 4, "rstd", m, "the number of normalized rows", where);
  checkNumel(args, 5, "weight", n, "normalized_shape's size", where);
  checkNumel(args, 6, "bias", n, "normalized_shape's size", where);
  checkSameSizes(args, 0, "grad_out", 1, "input", where);
}

} // namespace

OperatorGuard operatorGuard(const std::string &overload) {
  static const std::map<std::string, OperatorGuard> guards = {
      {"aten::embedding_dense_backward", embeddingDenseBackward},
      {"aten::embedding_backward", embeddingBackward},
      {"aten::embedding_renorm", embeddingRenorm},
      {"aten::embedding_renorm_", embeddingRenorm},
      {"aten::embedding_bag", embeddingBag},
      {"aten::embedding_bag.padding_idx", embeddingBag},
      {"aten::_embedding_bag", embeddingBag},
      {"aten::_embedding_bag_forward_only", embeddingBag},
      {"aten::nll_loss_backward", nllLossBackward},
      {"aten::nll_loss2d_backward", nllLossBackward},
      {"aten::ctc_loss.IntList", ctcLoss},
      {"aten::ctc_loss.Tensor", ctcLoss},
      {"aten::_ctc_loss", ctcLoss},
      {"aten::_ctc_loss.Tensor", ctcLoss},
      {"aten::multilabel_margin_loss", multilabelMarginLoss},
      {"aten::multilabel_margin_loss_forward", multilabelMarginLoss},
      {"aten::multilabel_margin_loss_backward", multilabelMarginLossBackward},
      {"aten::max_pool2d_with_indices_backward", poolBackward<2, 7>},
      {"aten::max_pool3d_with_indices_backward", poolBackward<3, 7>},
      {"aten::adaptive_max_pool2d_backward", poolBackward<2, 2>},
      {"aten::adaptive_max_pool3d_backward", poolBackward<3, 2>},
      {"aten::_index_put_impl", indexPutImpl},
      {"aten::_index_put_impl_", indexPutImpl},
      {"aten::native_batch_norm", batchNorm<1, 4>},
      {"aten::_native_batch_norm_legit", batchNorm<1, 4>},
      {"aten::_native_batch_norm_legit_functional", batchNorm<1, 4>},
      {"aten::_native_batch_norm_legit_no_training", batchNorm<1, 4>},
      {"aten::_native_batch_norm_legit.no_stats", batchNormNoStats},
      {"aten::native_batch_norm_backward", batchNormBackward},
      {"aten::native_layer_norm_backward", layerNormBackward},
  };
  auto found = guards.find(overload);
  return found == guards.end() ? nullptr : found->second;
}

} // namespace fsdp::runtime
