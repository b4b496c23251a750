//===- Cuda.cpp - what the runtime asks of a GPU --------------------------===//
//
// The one place besides Nccl.cpp that includes CUDA headers: compiled with
// FSDP_RUNTIME_CUDA where the build found the CUDA toolkit's headers and
// the wheel's libc10_cuda; without it, fsdp-run is CPU-only and says so.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/Device.h"

#ifdef FSDP_RUNTIME_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>

#include <optional>
#endif

namespace fsdp::runtime::cuda {

#ifdef FSDP_RUNTIME_CUDA

bool built() { return true; }

void setDevice(c10::Device device) { c10::cuda::set_device(device.index()); }

DeviceMemory memory(c10::Device device) {
  c10::CachingDeviceAllocator::DeviceStats stats =
      c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  const auto aggregate =
      static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  DeviceMemory m;
  m.allocated = stats.allocated_bytes[aggregate].current;
  m.allocatedPeak = stats.allocated_bytes[aggregate].peak;
  m.reserved = stats.reserved_bytes[aggregate].current;
  m.reservedPeak = stats.reserved_bytes[aggregate].peak;
  return m;
}

void resetPeaks(c10::Device device) {
  c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
}

void synchronize(c10::Device device) {
  c10::cuda::CUDAGuard guard(device.index());
  c10::cuda::device_synchronize();
}

struct Graph::Impl {
  explicit Impl(c10::Device device)
      : stream(c10::cuda::getStreamFromPool(/*isHighPriority=*/false,
                                            device.index())) {}
  at::cuda::CUDAGraph graph;
  c10::cuda::CUDAStream stream;
  std::optional<c10::cuda::CUDAStreamGuard> capturing;
};

Graph::Graph(c10::Device device) : impl(std::make_unique<Impl>(device)) {}
Graph::~Graph() = default;

void Graph::begin() {
  // The capture stream waits for what the current stream has queued (the
  // batch's copy, the state's last update).
  c10::cuda::CUDAStream current =
      c10::cuda::getCurrentCUDAStream(impl->stream.device_index());
  at::cuda::CUDAEvent queued;
  queued.record(current);
  queued.block(impl->stream);
  impl->capturing.emplace(impl->stream);
  impl->graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
}

void Graph::end() {
  impl->graph.capture_end();
  impl->capturing.reset();
}

void Graph::replay() { impl->graph.replay(); }

#else

bool built() { return false; }

[[noreturn]] static void unavailable() {
  throw Error("this fsdp-run was built without CUDA");
}
void setDevice(c10::Device) { unavailable(); }
DeviceMemory memory(c10::Device) { unavailable(); }
void resetPeaks(c10::Device) { unavailable(); }
void synchronize(c10::Device) { unavailable(); }

struct Graph::Impl {};
Graph::Graph(c10::Device) { unavailable(); }
Graph::~Graph() = default;
void Graph::begin() { unavailable(); }
void Graph::end() { unavailable(); }
void Graph::replay() { unavailable(); }

#endif

} // namespace fsdp::runtime::cuda
