#!/usr/bin/env python3
"""Writes runtime/include/fsdp/runtime/PlanOperators.def, the operators a plan
may call, from this torch build's schemas.

    .venv/bin/python scripts/plan_operators.py OUT_DIR

classifies every aten:: schema (OUT_DIR/ops.tsv: name, category, reason; and
OUT_DIR/index_ops.md, the research table of index-taking ops), then writes
OUT_DIR/PlanOperators.def: the ALLOW and reviewed REVIEW operators, less
those whose kernels trust an index or size argument and that fsdp-run does
not guard (runtime/lib/OperatorGuards.cpp). Compare it with the committed
file after a torch upgrade.

Categories
  ALLOW  public op, no excluded family; memory safe given runtime guard (a) (result/mutated
         extent within storage) plus, where the reason says "GUARD:", guard (b) on index values.
  REVIEW leading underscore, *_backward helpers, explicit stride/storage_offset, index-taking
         ops whose kernels trust their indices, trusted-aux-tensor ops.  Not unsafe per se:
         each needs a decision (reason says why; GUARD: gives the guard if promoted).
  DENY   not callable by the runtime (JIT-only builtins), out= variants, list writes,
         Storage/Stream/Dict args, excluded families (set_, files, resize, sparse,
         quantized, mkldnn/cudnn/miopen/mps/vulkan, nested, _fused_*, _foreach in-place,
         _unsafe_*, _local_scalar_dense/item, process-global state).

Research evidence for the per-op notes is in INDEX below (CPU: empirical probes in
/tmp/z1/cpu_results*.txt on torch 2.11.0+cu130, git 70d99e9; CUDA: ATen source).
"""
import re
import sys
import torch

OUT_DIR = sys.argv[1] if len(sys.argv) > 1 else "."
OUT = OUT_DIR + "/ops.tsv"
MD = OUT_DIR + "/index_ops.md"

GUARDED = {  # guards fsdp-run implements (runtime/lib/OperatorGuards.cpp)
 "aten::embedding_dense_backward","aten::embedding_backward","aten::embedding_renorm","aten::embedding_renorm_",
 "aten::embedding_bag","aten::embedding_bag.padding_idx","aten::_embedding_bag","aten::_embedding_bag_forward_only",
 "aten::nll_loss_backward","aten::nll_loss2d_backward","aten::max_pool2d_with_indices_backward",
 "aten::max_pool3d_with_indices_backward","aten::adaptive_max_pool2d_backward","aten::adaptive_max_pool3d_backward",
 "aten::multilabel_margin_loss","aten::multilabel_margin_loss_forward","aten::multilabel_margin_loss_backward",
 "aten::ctc_loss.IntList","aten::ctc_loss.Tensor","aten::_ctc_loss","aten::_ctc_loss.Tensor",
 "aten::_index_put_impl","aten::_index_put_impl_","aten::native_batch_norm","aten::_native_batch_norm_legit",
 "aten::_native_batch_norm_legit.no_stats","aten::_native_batch_norm_legit_functional",
 "aten::_native_batch_norm_legit_no_training","aten::native_batch_norm_backward","aten::native_layer_norm_backward"}
EXCLUDE = re.compile(r"^aten::(_foreach|_test_|_foobar|_print|_version|_pin_memory|_to_cpu|_propagate_xla_data|_make_dep_token|_assert|_functional_|_backward$|_fw_primal|_make_dual|_unpack_dual|_add_batch_dim|_remove_batch_dim|_copy_from|_has_|_nnpack|_debug_|_is_zerotensor|_efficientzerotensor|_fake_quantize|fake_quantize|_weight_int|_convert_weight|_dyn_quant|_int_mm|_mixed_dtypes|_sobol|_histogramdd|_rowwise_prune|_amp_|batch_norm_gather|batch_norm_backward_reduce|batch_norm_backward_elemt|batch_norm_elemt|batch_norm_stats|batch_norm_update_stats|_reshape_alias|_grouped_mm|_scaled_grouped_mm|_scaled_mm|segment_reduce|_segment_reduce|_embedding_bag_backward|_embedding_bag_dense_backward|_embedding_bag_sparse_backward|_embedding_bag_per_sample|_efficient_attention|_flash_attention|_scaled_dot_product_flash_attention\.quantized|_pack_padded_sequence|_pad_packed_sequence|gru\.data|lstm\.data|rnn_tanh\.data|rnn_relu\.data|_cummax_helper|_cummin_helper|lu_solve|lu_unpack|linalg_lu_solve|linalg_ldl_solve|_lazy_clone|_cast_|_autocast_|_transform_bias_rescale_qkv|_triton|_native_multi_head_attention|_transformer_encoder_layer_fwd)")
def selected(rows):
    keep = []
    for name, cat, reason in rows:
        if cat == 'DENY':
            continue
        if 'GUARD' in reason and name not in GUARDED:
            continue
        if EXCLUDE.match(name) and name not in GUARDED:
            continue
        keep.append(name)
    return sorted(set(keep))


# ---------------------------------------------------------------- research table
# base name -> (cpu, cuda, guard, evidence).  cpu/cuda: "checked" | "UNCHECKED" |
# "safe" (by construction) | "partial" | "unverified".  guard: None or text.
INDEX = {
 "embedding": ("checked", "checked", None,
   "CPU: Embedding.cpp embedding -> index_select (IndexError 'index out of range in self' for 5, 2^40, -6). "
   "CUDA: Indexing.cu indexSelectSmall/LargeIndex CUDA_KERNEL_ASSERT(srcIndex < srcSelectDimSize)."),
 "embedding_dense_backward": ("UNCHECKED", "UNCHECKED", "indices in [0, num_weights) (== padding_idx exempt)",
   "CPU: Embedding.cpp embedding_dense_backward_cpu: scale_grad_by_freq=True writes counts[indices[i]] unchecked "
   "(idx=2^40 -> SIGSEGV); with sgbf=False out-of-range rows are skipped (k>=start&&k<end). "
   "CUDA: Embedding.cu embedding_backward_feature_kernel grad_weight[dst_row*stride+f] +=, "
   "EmbeddingBackwardKernel.cu sum_and_scatter gradWeight[target_row*stride+f]=...; no assert."),
 "embedding_backward": ("UNCHECKED", "UNCHECKED", "indices in [0, num_weights); require sparse=False",
   "Composite: sparse=False -> embedding_dense_backward (see there); sparse=True -> embedding_sparse_backward "
   "(builds _sparse_coo_tensor_unsafe with unchecked indices; observed indices=[[5]] size (5,3))."),
 "embedding_renorm": ("checked", "UNCHECKED", "indices in [0, self.size(0))",
   "CPU: Embedding.cpp embedding_renorm_cpu_ uses self[idx] (select(): index 5 out of range). "
   "CUDA: Embedding.cu renorm_kernel weights[indices[blockIdx.x]*stride0 + ...] *= factor; no assert."),
 "embedding_bag": ("checked", "partial",
   "indices in [0, weight.size(0)); offsets non-decreasing, offsets[0]==0, offsets[-1] <= indices.numel(); "
   "per_sample_weights.numel()==indices.numel()",
   "CPU: EmbeddingBag.cpp ('Index 1 of input takes value 5 which is not in the valid range [0, 5)', "
   "'Expected idx >= 0 && idx < num_embeddings', 'offsets[0] has to be 0', 'offsets[-1] can not be greater than "
   "input's length'); decreasing offsets accepted (no crash seen). CUDA: EmbeddingBag.cu "
   "EmbeddingBag_updateOutputKernel_{max,sum_mean}: CUDA_KERNEL_ASSERT(input[emb] < numRows) (no lower bound), "
   "CUDA_KERNEL_ASSERT(end >= begin); middle offsets not bounded by numIndices (reads input[emb], writes "
   "offset2bag[emb])."),
 "_embedding_bag_backward": ("UNCHECKED", "UNCHECKED",
   "indices in [0,num_weights); offset2bag in [0, grad.size(0)); bag_size.numel()==grad.size(0); "
   "maximum_indices in [-1,num_weights); offsets as embedding_bag -- better: do not allow (use autograd)",
   "CPU: _embedding_bag_backward with indices==num_weights -> SIGSEGV; _embedding_bag_dense_backward "
   "offset2bag=2^40 -> SIGSEGV, bag_size forged -> garbage; _embedding_bag_per_sample_weights_backward "
   "offset2bag/indices 2^40 -> SIGSEGV. CUDA: EmbeddingBackwardKernel.cu compute_grad_weight_bags reads "
   "offset2bag/bag_size, sum_and_scatter writes target_row unchecked; EmbeddingBag_accGradParametersKernel_max "
   "checks only word_idx >= 0."),
 "index_select": ("checked", "checked", None,
   "CPU: TensorAdvancedIndexing.cpp index_select_out_cpu_ ('index out of range in self'). "
   "CUDA: Indexing.cu indexSelect*Index CUDA_KERNEL_ASSERT(srcIndex < srcSelectDimSize)."),
 "index_add": ("checked", "checked", None,
   "CPU: 'index 5 is out of bounds for dimension 0 with size 5'. CUDA: Indexing.cu indexFuncSmallIndex/"
   "LargeIndex CUDA_KERNEL_ASSERT(dstIndex < dstAddDimSize) (unsigned IndexType, so negatives trip too); "
   "fast path delegates to scatter_add (asserts); deterministic path -> index_put_ (checked)."),
 "index_reduce": ("checked", "checked", None,
   "CPU: 'index out of range in self'. CUDA: same indexFunc*Index kernels as index_add (assert); "
   "include_self=False pre-fills via index_fill_ (assert)."),
 "index_copy": ("checked", "checked", None,
   "CPU: 'index_copy_(): index 5 is out of bounds'. CUDA: IndexKernel.cu index_copy_kernel_impl "
   "CUDA_KERNEL_ASSERT(idx >= 0 && idx < self_dim_size)."),
 "index_fill": ("checked", "checked", None,
   "CPU: 'index 5 is out of bounds for dimension 0'. CUDA: IndexKernel.cu index_fill_kernel_impl "
   "CUDA_KERNEL_ASSERT(idx >= -self_dim_size && idx < self_dim_size)."),
 "index": ("checked", "checked", None,
   "CPU: cpu/IndexKernelUtils.h Indexer TORCH_CHECK_INDEX(value >= -size && value < size) (2.11 header l.42). "
   "CUDA: IndexKernel.cu gpu_index_kernel CUDA_KERNEL_ASSERT(-sizes[i] <= index && index < sizes[i])."),
 "index_put": ("checked", "checked", None,
   "CPU: same Indexer check (accumulate F/T). CUDA accumulate=False: gpu_index_kernel assert; "
   "accumulate=True / deterministic: Indexing.cu index_put_with_sort_kernel -> makeLinearIndex(check_range=!unsafe) "
   "-> wrapIndexOnce: _assert_async(max<dim_size), _assert_async(min>=-dim_size), then index.remainder(dim_size)."),
 "_index_put_impl": ("checked", "partial", "require unsafe=False (constant)",
   "CPU: checked even with unsafe=True (tested). CUDA: unsafe=True skips the _assert_async range check; "
   "indices are still wrapped by remainder(dim_size) (in range unless dim_size==0)."),
 "gather": ("checked", "checked", None,
   "CPU: cpu/ScatterGatherKernel.cpp 'index 5 is out of bounds for dimension 0 with size 5'. "
   "CUDA: ScatterGatherKernel.cu CUDA_KERNEL_ASSERT(idx_dim >= 0 && idx_dim < index_size)."),
 "scatter": ("checked", "checked", None, "as gather (all overloads .src/.value/.reduce/.value_reduce)."),
 "scatter_add": ("checked", "checked", None, "as gather."),
 "scatter_reduce": ("checked", "checked", None, "as gather."),
 "take": ("checked", "checked", None,
   "CPU: 'out of range: tried to access index 15 on a tensor of 15 elements'. CUDA: IndexKernel.cu "
   "cuda_take_put_kernel CUDA_KERNEL_ASSERT(idx < numel && idx >= -numel)."),
 "put": ("checked", "checked", None, "as take (put/put_, accumulate F/T)."),
 "take_along_dim": ("safe", "checked", None,
   "dim given: indices are wrapped into [0,size) before gather (observed: index 7 on size 5 returns row 2; "
   "2^40 no error); dim=None -> flattened take ('index 17 is out of bounds'). CUDA: gather assert."),
 "nll_loss_forward": ("checked", "checked", None,
   "CPU: LossNLL.cpp TORCH_CHECK_INDEX 'Target 5 is out of bounds.' (all reductions). CUDA: Loss.cu "
   "CHECK_INDEX_IN_CLASS -> CUDA_KERNEL_ASSERT(INDEX >= 0 && INDEX < N_CLASSES)."),
 "nll_loss": ("checked", "checked", None, "composite -> nll_loss_forward / nll_loss2d_forward."),
 "nll_loss_nd": ("checked", "checked", None, "composite -> nll_loss / nll_loss2d."),
 "cross_entropy_loss": ("checked", "checked", None,
   "composite; label_smoothing path also 'Target 5 is out of bounds' (CPU)."),
 "nll_loss_backward": ("UNCHECKED", "checked", "target in [0, self.size(-1)) or == ignore_index",
   "CPU: reduction=mean/sum checked; reduction=none (0) unchecked: target=2^40 -> SIGSEGV, target=5 silent. "
   "CUDA: Loss.cu nll_loss_backward_{no_reduce,reduce_1d,reduce_2d} CHECK_INDEX_IN_CLASS."),
 "nll_loss2d_forward": ("checked", "checked", None,
   "CPU: LossNLL2d.cpp 'Target 5 is out of bounds.'. CUDA: NLLLoss2d.cu CUDA_KERNEL_ASSERT(cur_target >= 0 && "
   "cur_target < n_classes) (not re-read for this report)."),
 "nll_loss2d": ("checked", "checked", None, "composite -> nll_loss2d_forward."),
 "nll_loss2d_backward": ("UNCHECKED", "checked", "target in [0, self.size(1)) or == ignore_index",
   "CPU: reduction=none unchecked (target=2^40 -> SIGSEGV). CUDA: NLLLoss2d.cu kernel assert (not re-read)."),
 "max_pool2d_with_indices_backward": ("UNCHECKED", "safe", "indices in [0, H_in*W_in) (CPU)",
   "CPU: indices=2^40 -> SIGSEGV, small OOB silent. CUDA: DilatedMaxPool2d.cu max_pool_backward_nchw/nhwc loop "
   "over input pixels and compare top_mask==h*width+w; no address is formed from an index."),
 "max_pool3d_with_indices_backward": ("UNCHECKED", "UNCHECKED", "indices in [0, T_in*H_in*W_in)",
   "CPU: 2^40 -> SIGSEGV. CUDA: DilatedMaxPool3d.cu max_pool3d_with_indices_backward_single_out_frame "
   "gpuAtomicAddNoReturn(&gradInputData[slice*itime*iheight*iwidth + maxIndex]) with only maxIndex != -1."),
 "adaptive_max_pool2d_backward": ("UNCHECKED", "UNCHECKED", "indices in [0, H_in*W_in)",
   "CPU: 2^40 -> SIGSEGV. CUDA: AdaptiveMaxPooling2d.cu atomic_adaptivemaxgradinput "
   "gpuAtomicAddNoReturn(&gradInput[argmax], z), no check."),
 "adaptive_max_pool3d_backward": ("UNCHECKED", "UNCHECKED", "indices in [0, T_in*H_in*W_in)",
   "CPU: 2^40 -> SIGSEGV. CUDA: AdaptiveMaxPooling3d.cu same atomic gradInput[argmax] pattern (not re-read)."),
 "fractional_max_pool2d_backward": ("checked", "checked", None,
   "CPU: FractionalMaxPool2d.cpp:240 INTERNAL ASSERT 'index >= 0 && index < inputW*inputH'. CUDA: "
   "FractionalMaxPool2d.cu CUDA_KERNEL_ASSERT(index >= 0), CUDA_KERNEL_ASSERT(inputH < gradInput.size(2))."),
 "fractional_max_pool3d_backward": ("checked", "checked", None,
   "CPU: FractionalMaxPool3d.cpp:280 INTERNAL ASSERT. CUDA: FractionalMaxPool3d.cu asserts (same pattern)."),
 "fractional_max_pool2d": ("safe", "unverified", None,
   "random_samples outside [0,1) (2.0,-1,1e7,1e12,inf,nan): no crash, outputs stay inside input, indices in range."),
 "fractional_max_pool3d": ("safe", "unverified", None, "as fractional_max_pool2d (CPU probes)."),
 "max_unpool2d": ("checked", "checked", None,
   "CPU: 'Found an invalid max index: 4 (output volumes are of size 2x2)'. CUDA: MaxUnpooling.cu "
   "CUDA_KERNEL_ASSERT(maxind >= 0 && maxind < outputImageSize)."),
 "max_unpool3d": ("checked", "checked", None,
   "CPU: 'Found an invalid max index'. CUDA: MaxUnpooling.cu max_unpooling3d_forward_kernel "
   "CUDA_KERNEL_ASSERT(index >= 0 && index < outputImageSize)."),
 "value_selecting_reduction_backward": ("checked", "checked", None,
   "composite zeros(sizes).scatter_(dim, indices, grad): CPU 'index 5 is out of bounds'; CUDA scatter assert."),
 "cummaxmin_backward": ("checked", "checked", None, "composite scatter_add_: CPU raises; CUDA scatter assert."),
 "gather_backward": ("checked", "checked", None, "composite scatter_add: CPU raises; CUDA scatter assert."),
 "index_select_backward": ("checked", "checked", None,
   "2.11 composite zeros(self_sizes).index_add_(dim,index,grad): CPU raises; CUDA index_add assert "
   "(upstream HEAD has a new dedicated CUDA kernel; re-check when upgrading)."),
 "select_backward": ("checked", "checked", None,
   "composite zeros(input_sizes).select(dim,index).copy_(grad): host check 'select(): index 5 out of range'."),
 "slice_backward": ("safe", "safe", None,
   "composite zeros(input_sizes).slice(...).copy_(grad): slice clamps, copy_ checks shapes (mismatch raised)."),
 "diagonal_backward": ("safe", "safe", None, "composite diagonal view + copy_ (shape mismatch raised)."),
 "unfold_backward": ("safe", "unverified", None,
   "CPU probes with grad_in larger/smaller than input_sizes implies: no crash, sums bounded (window count "
   "taken from grad_in)."),
 "one_hot": ("checked", "checked", None,
   "CPU: Onehot.cpp host min/max ('Class values must be smaller than num_classes', 'must be non-negative'). "
   "CUDA: relies on scatter_ device assert (Onehot.cpp comment 'rely on device asserts from scatter')."),
 "bincount": ("safe", "safe", None,
   "output sized from max(self)+1; negatives rejected ('bincount only supports 1-d non-negative integral inputs'); "
   "CUDA computes min/max on host (SummaryOps.cu)."),
 "masked_scatter": ("checked", "checked", None,
   "CPU: 'Number of elements of source < number of ones in mask'. CUDA: IndexKernel.cu masked_scatter_size_check "
   "CUDA_KERNEL_ASSERT(totalElements <= srcSize) launched before the scatter."),
 "repeat_interleave": ("checked", "checked", None,
   "CPU: Repeat.h 'allocated size does not match required size', 'repeats can not be negative'. CUDA: Repeat.cu "
   "compute_cuda_kernel CUDA_KERNEL_ASSERT(result_size == cumsum[size-1]), CUDA_KERNEL_ASSERT(repeat >= 0)."),
 "multi_margin_loss": ("checked", "checked", None,
   "CPU: LossMultiMargin.cpp 'target out of range'. CUDA: MultiMarginLoss.cu CUDA_KERNEL_ASSERT(target_k >= 0 && "
   "target_k < dim)."),
 "multi_margin_loss_backward": ("checked", "checked", None, "as multi_margin_loss (CPU raised; CUDA assert)."),
 "multilabel_margin_loss": ("checked", "UNCHECKED", "target in [-1, self.size(-1))",
   "CPU: LossMultiLabelMargin.cpp \"argument #2 'target' is out of range\". CUDA: MultiLabelMarginCriterion.cu "
   "multilabel_margin_loss_forward_kernel: 'if (target_idx < 0) break; is_target_k[target_idx] = 1' -- upper "
   "bound not checked, no assert in stored source."),
 "multilabel_margin_loss_forward": ("checked", "UNCHECKED", "target in [-1, self.size(-1))", "as multilabel_margin_loss."),
 "multilabel_margin_loss_backward": ("checked", "UNCHECKED",
   "target in [-1, self.size(-1)); is_target same shape as self", "as multilabel_margin_loss (CPU: argument #3)."),
 "ctc_loss": ("UNCHECKED", "UNCHECKED", "targets in [0, log_probs.size(-1)) (lengths/blank already checked)",
   "LossCTC.cpp and cuda/LossCTC.cu get_target_prime: 'note that no bound-checking is done'. CPU: target 2^40 -> "
   "SIGSEGV, target 3 (C=3) silent read; input_lengths/target_lengths/blank ranges are checked "
   "('blank must be in label range', 'Expected input_lengths to have value at most 4')."),
 "_ctc_loss": ("UNCHECKED", "UNCHECKED", "targets in [0, log_probs.size(-1))", "as ctc_loss."),
 "_ctc_loss_backward": ("UNCHECKED", "UNCHECKED",
   "targets in [0,C); log_alpha/neg_log_likelihood shapes as _ctc_loss output -- better: do not allow",
   "CPU: targets 2^40 -> SIGSEGV; forged log_alpha (1,1,1) -> heap corruption 'free(): invalid next size'."),
 "grid_sampler": ("safe", "safe", None,
   "CPU: GridSampler.h within_bounds_2d/3d + clip; probes grid in {nan,+-inf,+-1e30,3e9} x 3 paddings x 3 modes: "
   "no crash. CUDA: cuda/GridSampler.cuh safe_downgrade_to_int_range + within_bounds (2.11 header)."),
 "grid_sampler_2d": ("safe", "safe", None, "as grid_sampler."),
 "grid_sampler_3d": ("safe", "safe", None, "as grid_sampler."),
 "grid_sampler_2d_backward": ("safe", "safe", None, "as grid_sampler (backward probed with nan/inf/huge grids)."),
 "grid_sampler_3d_backward": ("safe", "safe", None, "as grid_sampler."),
 "searchsorted": ("checked", "checked", None,
   "sorter: BucketizationUtils.h host check aminmax().item() 'torch.searchsorted(): sorter index out of range' "
   "(2.11 header l.138-142), device independent."),
 "segment_reduce": ("UNCHECKED", "UNCHECKED",
   "require unsafe=False; offsets: offsets[0]>=0, non-decreasing, offsets[-1] <= data.size(axis); "
   "lengths >= 0 summing to data.size(axis)",
   "SegmentReduce.cpp: lengths validated only when unsafe=False; offsets never bounded: offsets [0,2,2^30] "
   "-> SIGSEGV even with unsafe=False, [0,2,9] returns garbage (6e17). unsafe=True lengths 2^40 -> SIGSEGV."),
 "_segment_reduce_backward": ("UNCHECKED", "UNCHECKED", "as segment_reduce -- better: do not allow",
   "CPU: lengths 2^40 -> SIGSEGV."),
 "linalg_lu_solve": ("checked", "UNCHECKED", "pivots in [1, LU.size(-2)]",
   "CPU: BatchLinearAlgebraKernel.cpp lu_solve_kernel 'Lapack will write into unrelated memory if pivots are not "
   "in the right range so we do some simple sanity checks here for the CPU version'. CUDA: no such check "
   "(cuBLAS/cuSOLVER/MAGMA getrs consume pivots)."),
 "lu_solve": ("checked", "UNCHECKED", "LU_pivots in [1, LU_data.size(-2)]", "-> linalg_lu_solve."),
 "lu_unpack": ("checked", "UNCHECKED", "LU_pivots in [1, LU_data.size(-2)]",
   "CPU: 'pivots passed to lu_unpack must be between 1 and LU.size(-2) inclusive'. CUDA: LinearAlgebra.cu "
   "unpack_pivots_cuda_kernel thrust::swap(perm_data[i], perm_data[pivots_data[i]-1]), no assert."),
 "linalg_ldl_solve": ("UNCHECKED", "unverified", "1 <= |pivots| <= LD.size(-1)",
   "CPU: pivots 2^30 or -2^30 -> SIGSEGV (LAPACK sytrs); n+1 silently accepted."),
 "linalg_lu_factor_ex": ("safe", "safe", None, "produces pivots; no index input."),
 "_unsafe_index": ("checked", "unverified", None, "CPU raised like index; family DENY."),
 "_unsafe_index_put": ("checked", "unverified", None, "CPU raised like index_put; family DENY."),
 "_unsafe_masked_index": ("safe", "unverified", None, "indices clamped (2^40 no crash); family DENY."),
 "_unsafe_masked_index_put_accumulate": ("safe", "unverified", None, "indices clamped; family DENY."),
 "embedding_sparse_backward": ("UNCHECKED", "UNCHECKED", None,
   "returns sparse COO with out-of-range indices (observed [[5]] for size 5); sparse family DENY."),
 "_pad_packed_sequence": ("checked", "n/a", None, "CPU-only; forged batch_sizes raised shape errors."),
 "_pack_padded_sequence_backward": ("checked", "n/a", None, "CPU-only; forged batch_sizes raised shape errors."),
}
# ops whose kernels trust the *sizes* of auxiliary tensors (not index values) -- found while probing
AUX = {
 "native_batch_norm": ("UNCHECKED", "unverified",
   "weight/bias/running_mean/running_var numel == input.size(1); NOTE: mutates running_mean/var although the "
   "schema has no (a!) annotation",
   "CPU: training=True with running_mean of 1 element and C=4M -> SIGSEGV (OOB write); weight of 1 element -> NaN "
   "(OOB read); eval with 1-element running stats -> NaN. Composite batch_norm checks ('running_mean should "
   "contain 64 elements not 1')."),
 "_native_batch_norm_legit": ("UNCHECKED", "unverified", "as native_batch_norm", "CPU: running_mean too small -> SIGSEGV."),
 "_native_batch_norm_legit_functional": ("UNCHECKED", "unverified", "as native_batch_norm", "same kernel as _native_batch_norm_legit."),
 "_native_batch_norm_legit_no_training": ("UNCHECKED", "unverified", "as native_batch_norm", "same kernel."),
 "native_batch_norm_backward": ("UNCHECKED", "unverified",
   "weight/running_*/save_mean/save_invstd numel == input.size(1)",
   "CPU: save_mean/save_invstd of 1 element with C=4M -> SIGSEGV."),
 "native_layer_norm_backward": ("UNCHECKED", "unverified",
   "mean.numel()==rstd.numel()==prod(input.shape[:input.dim()-len(normalized_shape)])",
   "CPU: mean or rstd of 1 element with M=4M -> SIGSEGV (weight/bias shapes are checked)."),
 "batch_norm": ("checked", "unverified", None,
   "composite _batch_norm_impl_index checks running stat sizes; mutates running_mean/var without (a!)."),
 "_batch_norm_impl_index": ("checked", "unverified", None, "as batch_norm; mutates running stats without (a!)."),
 "native_group_norm": ("checked", "unverified", None, "'Expected X.numel() == N * C * HxW'; weight shape checked."),
 "native_group_norm_backward": ("checked", "unverified", None,
   "'Expected mean.numel() == N * group', 'Expected dY.numel() == N * C * HxW'."),
 "native_layer_norm": ("checked", "unverified", None, "'Expected weight to be of same shape as normalized_shape'."),
}

# ---------------------------------------------------------------- families
DENY_EXACT = {
    "set_": "set_ family: rebinds/grows a tensor's storage (set_.source_Tensor_storage_offset grew a 16-byte "
            "storage to 400 bytes instead of failing)",
    "set": "set family (functional set_.*)",
    "set_data": "set family: swaps the TensorImpl's data",
    "from_file": "reads a file by name",
    "_local_scalar_dense": "host sync returning a Scalar; no tensor result",
    "item": "-> _local_scalar_dense (host sync, Scalar result)",
    "resize_": "grows/reallocates a storage shared by other slots (observed: resize_ of a view grew the "
               "shared storage 16 -> 4000 bytes)",
    "resize_as_": "as resize_", "resize": "resize family", "resize_as": "resize family",
    "_resize_output_": "resize family", "_resize_output": "resize family",
    "record_stream": "Stream argument; allocator/stream bookkeeping",
    "_cufft_set_plan_cache_max_size": "process-global state", "_cufft_clear_plan_cache": "process-global state",
    "_cufft_get_plan_cache_max_size": "process-global state", "_cufft_get_plan_cache_size": "process-global state",
    "get_gradients": "distributed-autograd context (Dict result)",
    "is_vulkan_available": "backend probe (vulkan)",
    "embedding_sparse_backward": "produces a sparse COO tensor with unchecked indices",
    "_ctc_loss_backward": "trusts log_alpha/neg_log_likelihood shapes (heap corruption on CPU with a forged log_alpha)",
    "_embedding_bag_backward": "trusts offset2bag/bag_size/maximum_indices/indices (SIGSEGV on CPU); use autograd",
    "_embedding_bag_dense_backward": "as _embedding_bag_backward",
    "_embedding_bag_sparse_backward": "as _embedding_bag_backward (+sparse)",
    "_embedding_bag_per_sample_weights_backward": "as _embedding_bag_backward",
    "_segment_reduce_backward": "trusts lengths/offsets (SIGSEGV on CPU)",
}
SPARSE_EXACT = {"coalesce", "_coalesce", "_coalesced", "_coalesced_", "is_coalesced", "indices", "_indices",
                "values", "_values", "crow_indices", "col_indices", "ccol_indices", "row_indices",
                "indices_copy", "values_copy", "crow_indices_copy", "col_indices_copy", "ccol_indices_copy",
                "row_indices_copy", "_indices_copy", "_values_copy", "sparse_dim", "dense_dim", "_nnz",
                "_dimI", "_dimV", "to_dense", "_to_dense", "to_dense_backward", "smm", "hspmm", "sspaddmm",
                "_spdiags", "copy_sparse_to_sparse", "copy_sparse_to_sparse_", "_spsolve",
                "_convert_indices_from_coo_to_csr", "_convert_indices_from_csr_to_coo"}
QUANT_EXACT = {"dequantize", "int_repr", "qscheme", "empty_quantized", "choose_qparams_optimized",
               "_choose_qparams_per_tensor", "_saturate_weight_to_fp16", "_empty_affine_quantized",
               "_empty_per_channel_affine_quantized", "_make_per_tensor_quantized_tensor",
               "_make_per_channel_quantized_tensor", "q_scale", "q_zero_point", "q_per_channel_scales",
               "q_per_channel_zero_points", "q_per_channel_axis", "quantize_per_tensor",
               "quantize_per_channel", "quantize_per_tensor_dynamic", "_quantized_max_pool1d"}


def family_deny(base):
    """Reason if `base` (name without aten::) is in an excluded family, else None."""
    b = base
    if b in DENY_EXACT:
        return DENY_EXACT[b]
    if b in SPARSE_EXACT or "sparse" in b or b.startswith("to_sparse") or b.startswith("_to_sparse") \
            or b.startswith("_validate_") and ("sparse" in b or "compressed" in b) or b.startswith("_cslt") \
            or b.startswith("_sparse_semi_structured"):
        return "sparse family (sparse tensors carry unchecked index tensors; _sparse_*_unsafe builders)"
    if b in QUANT_EXACT or b.startswith("q_") or b.startswith("quantize") or b.startswith("quantized_") \
            or b.startswith("_quantized") or b.startswith("_make_per_") or b.startswith("fbgemm_") \
            or b.startswith("_fbgemm") or "_quantized" in b:
        return "quantized / fbgemm family"
    if "mkldnn" in b or b.startswith("to_mkldnn") or "onednn" in b:
        return "mkldnn family"
    if "cudnn" in b:
        return "cudnn family (backend-specific entry points)"
    if "miopen" in b:
        return "miopen family"
    if "mps" in b.split("_") or b.startswith("_mps") or b.startswith("mps_"):
        return "mps backend family"
    if "nested" in b or "jagged" in b or b == "to_padded_tensor":
        return "nested/jagged family (offsets/size metadata tensors trusted)"
    if b.startswith("_fused_") or b.startswith("fused_") and b != "fused_moving_avg_obs_fake_quant":
        return "_fused_* optimizer/fused kernels (tensor lists, in-place)"
    if b.startswith("_unsafe_"):
        if b == "_unsafe_view":
            return None
        return "_unsafe_* family (intended to skip checks)"
    return None


INDEX_ARG_NAMES = {"index", "indices", "targets", "offsets", "lengths", "offset2bag", "bag_size",
                   "maximum_indices", "max_indices", "sorter", "pivots", "LU_pivots", "batch_sizes",
                   "input_lengths", "target_lengths", "repeats", "is_target", "cum_seq_q", "cum_seq_k",
                   "cu_seqlens_q", "cu_seqlens_k", "seqused_k", "offs", "idx", "crow_indices", "col_indices",
                   "ccol_indices", "row_indices", "compressed_indices", "plain_indices", "min_indices",
                   "random_samples", "tensor_indices_or_sections", "counts", "segment_ids"}
TRUSTED_SIZE_NAMES = {"stride", "storage_offset"}


def base_of(name):
    b = name[len("aten::"):]
    return b


def lookup(table, base):
    if base in table:
        return table[base]
    if base.endswith("_") and base[:-1] in table:
        return table[base[:-1]]
    return None


def tensorish(t):
    s = str(t)
    return "Tensor" in s


def main():
    in_dispatcher = set(n for n in torch._C._dispatch_get_all_op_names() if n.startswith("aten::"))
    rows = []
    for s in torch._C._jit_get_all_schemas():
        if not s.name.startswith("aten::"):
            continue
        qual = s.name + ("." + s.overload_name if s.overload_name else "")
        base = base_of(s.name)
        ov = s.overload_name
        reasons = []
        cat = None

        if qual not in in_dispatcher:
            cat = "DENY"
            reasons.append("JIT-only builtin: not registered in the c10 dispatcher, so the runtime's "
                           "Dispatcher::findSchema cannot resolve it")
        # out= variants: a keyword-only argument the op writes
        kw_writes = [a.name for a in s.arguments if a.kwarg_only and a.alias_info is not None
                     and a.alias_info.is_write]
        if cat is None and (kw_writes or ov == "out" or ov.endswith("_out") or ov.startswith("out_")):
            cat = "DENY"
            reasons.append("out= variant (writes/resizes caller tensor(s) %s)" % ",".join(kw_writes or ["out"]))
        list_writes = [a.name for a in s.arguments if a.alias_info is not None and a.alias_info.is_write
                       and str(a.type).startswith("List")]
        if cat is None and list_writes:
            cat = "DENY"
            reasons.append("writes a tensor list (%s), which a plan cannot declare" % ",".join(list_writes))
        bad_types = [str(a.type) for a in s.arguments
                     if any(k in str(a.type) for k in ("Storage", "Stream", "Dict", "Any", "Future",
                                                       "__torch__", "Capsule", "Generator("))]
        if cat is None and bad_types:
            cat = "DENY"
            reasons.append("argument type a plan must not supply: " + ",".join(sorted(set(bad_types))))
        if cat is None and any(a.name == "filename" for a in s.arguments):
            cat = "DENY"
            reasons.append("names a file")
        if cat is None:
            fam = family_deny(base)
            if fam:
                cat = "DENY"
                reasons.append(fam)
        if cat is None and base.startswith("_foreach_"):
            cat = "REVIEW"
            reasons.append("_foreach_* out-of-place (lists in/out; check_foreach_api_restrictions checks list "
                           "lengths/shapes; safe candidate)")
        if cat is None and base.startswith("_amp_"):
            cat = "REVIEW"
            reasons.append("AMP helper (in-place scale state)")

        # research notes
        idx = lookup(INDEX, base)
        aux = lookup(AUX, base)
        note = None
        guard = None
        for tbl in (idx, aux):
            if tbl:
                cpu, cuda, g, ev = tbl
                note = "CPU %s / CUDA %s" % (cpu, cuda)
                if g:
                    guard = g

        idx_args = [a.name for a in s.arguments if a.name in INDEX_ARG_NAMES and tensorish(a.type)]
        argn = {a.name for a in s.arguments}
        # a layout stride (not a conv/pool hyper-parameter): storage_offset, or size+stride together
        layout_args = [n for n in ("size", "stride", "storage_offset") if n in argn] \
            if ("storage_offset" in argn or {"size", "stride"} <= argn) else []

        if cat is None:
            if base.startswith("_"):
                cat = "REVIEW"
                if base == "_unsafe_view":
                    reasons.append("underscore; numel-checked like view (view_impl: \"shape '[100]' is invalid "
                                   "for input of size 4\"); used by project plans")
                else:
                    reasons.append("underscore (internal) op")
            if "backward" in base:
                cat = "REVIEW"
                reasons.append("*_backward helper: trusts saved tensors/sizes from the forward")
            if layout_args:
                cat = "REVIEW"
                reasons.append("explicit %s (tensor layout): result geometry chosen by the plan (see as_strided notes; guard (a))"
                               % "/".join(layout_args))
            tags = []
            try:
                pk = getattr(getattr(torch.ops.aten, base), ov or "default")
                tags = [str(t) for t in pk.tags]
            except Exception:
                pass
            if cat == "REVIEW" and any(t.endswith("pointwise") for t in tags) and not idx_args:
                reasons.append("pointwise TensorIterator op (operand shapes broadcast-checked, e.g. gelu_backward "
                               "size mismatch raised): safe to promote")
            if any("inplace_view" in t for t in tags) and base not in ("as_strided_",):
                reasons.append("inplace_view (changes a slot's metadata in place)")
            if idx_args and not (idx or aux):
                if cat is None:
                    cat = "REVIEW"
                reasons.append("index-like tensor arg(s) %s not researched" % ",".join(idx_args))
            if cat is None:
                cat = "ALLOW"
                if not reasons:
                    reasons.append("public op")
        # judgement overrides (see module docstring / report)
        if cat != "DENY":
            if base.startswith("fake_quantize") or base.startswith("_fake_quantize") \
                    or base == "fused_moving_avg_obs_fake_quant":
                cat = "REVIEW"
                reasons.append("quantization-simulation family (per-channel scale/zero_point sized by axis; "
                               "fused_moving_avg_obs_fake_quant mutates observer state)")
            if base.startswith("batch_norm_") and base not in ("batch_norm",):
                cat = "REVIEW"
                reasons.append("SyncBN helper: trusts mean/invstd/count tensor sizes (not probed)")
            if base == "segment_reduce":
                cat = "REVIEW"
                reasons.append("guard is multi-part (unsafe flag, lengths, offsets); prefer not to allow")
            if base in ("empty_strided", "new_empty_strided"):
                cat = "ALLOW"
                reasons.append("safe by construction: allocates a storage sized by computeStorageNbytes "
                               "(probe: stride 2^20 -> 4194308-byte storage; negative/overflowing strides rejected)")
        if note:
            reasons.append(note)
        if guard and cat != "DENY":
            reasons.append("GUARD: " + guard)
        if base in ("native_batch_norm", "batch_norm", "_batch_norm_impl_index", "instance_norm",
                    "batch_norm_update_stats", "cudnn_batch_norm", "miopen_batch_norm"):
            reasons.append("mutates running_mean/running_var without a (a!) schema annotation "
                           "(runtime 'mutates' check does not see it)")
        if base == "_reshape_alias":
            reasons.append("NO storage-bounds check (alias_with_sizes_and_strides): size [100] over a 16-byte "
                           "storage accepted; guard (a) must catch it, or rewrite to view")
        if base in ("as_strided", "as_strided_", "as_strided_copy", "as_strided_scatter", "slice_inverse"):
            reasons.append("bounds-checked against the storage (setStrided/checkInBoundsForStorage); offset is "
                           "storage-relative, so it may address any byte of a shared storage")
        rows.append((qual, cat, "; ".join(reasons).replace("\t", " ")))

    rows.sort()
    with open(OUT, "w") as f:
        f.write("qualified_name\tcategory\treason\n")
        for r in rows:
            f.write("\t".join(r) + "\n")
    from collections import Counter
    c = Counter(r[1] for r in rows)
    print("wrote", OUT, len(rows), "rows:", dict(c))
    # markdown table of researched ops
    with open(MD, "w") as f:
        f.write("| op | CPU checks? | CUDA checks? | guard needed | evidence |\n|---|---|---|---|---|\n")
        for tbl in (INDEX, AUX):
            for k, (cpu, cuda, g, ev) in tbl.items():
                f.write("| %s | %s | %s | %s | %s |\n" % (k, cpu, cuda, g or "-", ev.replace("|", "/")))
    print("wrote", MD)
    header = open(__file__.replace("scripts/plan_operators.py",
                                   "runtime/include/fsdp/runtime/PlanOperators.def")).read()
    header = header[:header.index('FSDP_PLAN_OPERATOR("')]
    with open(OUT_DIR + "/PlanOperators.def", "w") as f:
        f.write(header + "\n".join('FSDP_PLAN_OPERATOR("%s")' % n for n in selected(rows))
                + "\n\n#undef FSDP_PLAN_OPERATOR\n")
    print("wrote", OUT_DIR + "/PlanOperators.def")


if __name__ == "__main__":
    main()
