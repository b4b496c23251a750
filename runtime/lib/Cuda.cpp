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
#include <utility>
#include <vector>
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

struct Copier::Impl {
  explicit Impl(c10::Device device)
      : device(device),
        stream(c10::cuda::getStreamFromPool(/*isHighPriority=*/false,
                                            device.index())) {}
  /// The copy stream waits for what the compute stream has queued.
  c10::cuda::CUDAStream after() {
    c10::cuda::CUDAStream compute =
        c10::cuda::getCurrentCUDAStream(device.index());
    at::cuda::CUDAEvent queued;
    queued.record(compute);
    queued.block(stream);
    return compute;
  }
  c10::Device device;
  c10::cuda::CUDAStream stream;
  // Copies to the host in flight: their events and sources.
  std::vector<std::pair<std::shared_ptr<at::cuda::CUDAEvent>, at::Tensor>>
      toHost;
};

Copier::Copier(c10::Device device) : impl(std::make_unique<Impl>(device)) {}
Copier::~Copier() = default;

at::Tensor Copier::toDevice(const at::Tensor &host) {
  // Allocated for the compute stream, which waits for the copy before it
  // uses (or frees) it.
  at::Tensor out = at::empty_like(host, host.options().device(impl->device));
  c10::cuda::CUDAStream compute = impl->after();
  {
    c10::cuda::CUDAStreamGuard copying(impl->stream);
    out.copy_(host, /*non_blocking=*/true);
  }
  at::cuda::CUDAEvent copied;
  copied.record(impl->stream);
  copied.block(compute);
  return out;
}

at::Tensor Copier::toHost(const at::Tensor &onDevice) {
  at::Tensor out = at::empty_like(
      onDevice, onDevice.options().device(c10::kCPU).pinned_memory(true));
  impl->after();
  {
    c10::cuda::CUDAStreamGuard copying(impl->stream);
    out.copy_(onDevice, /*non_blocking=*/true);
  }
  auto copied = std::make_shared<at::cuda::CUDAEvent>();
  copied->record(impl->stream);
  // The source stays allocated until the copy has read it.
  impl->toHost.emplace_back(std::move(copied), onDevice);
  return out;
}

void Copier::waitForHost() {
  for (auto &[copied, source] : impl->toHost)
    copied->synchronize();
  impl->toHost.clear();
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

struct Copier::Impl {};
Copier::Copier(c10::Device) { unavailable(); }
Copier::~Copier() = default;
at::Tensor Copier::toDevice(const at::Tensor &) { unavailable(); }
at::Tensor Copier::toHost(const at::Tensor &) { unavailable(); }
void Copier::waitForHost() { unavailable(); }

struct Graph::Impl {};
Graph::Graph(c10::Device) { unavailable(); }
Graph::~Graph() = default;
void Graph::begin() { unavailable(); }
void Graph::end() { unavailable(); }
void Graph::replay() { unavailable(); }

#endif

} // namespace fsdp::runtime::cuda
