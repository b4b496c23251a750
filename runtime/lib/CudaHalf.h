//===- CudaHalf.h - the runtime's CUDA half, inside -------------*- C++ -*-===//
//
// What Cuda.cpp and Nccl.cpp share, and the half they make: private to the
// runtime (the rest of it sees cuda::Half in Device.h only).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_LIB_CUDAHALF_H
#define FSDP_RUNTIME_LIB_CUDAHALF_H

#include "fsdp/runtime/Device.h"

namespace fsdp::runtime::cuda {

/// The half, as Cuda.cpp makes it.
const Half *linkedHalf();

/// Nccl.cpp: the NCCL this half was built with ("" without NCCL's
/// headers), and its communicator (an Error without them).
std::string ncclBuiltVersion();
std::unique_ptr<Communicator> ncclCommunicator(const RankInfo &info,
                                               int shardGroupSize,
                                               c10::Device device);

} // namespace fsdp::runtime::cuda

#endif // FSDP_RUNTIME_LIB_CUDAHALF_H
