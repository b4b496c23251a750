//===- Cuda.cpp - what the runtime asks of a GPU --------------------------===//
//
// The runtime's CUDA half, with Nccl.cpp: the only files that include CUDA
// headers, built only where the build found the CUDA toolkit's headers and
// the wheel's libc10_cuda (without them, fsdp-run is CPU-only and says so).
// The rest of the runtime reaches it through cuda::Half (Device.h).
//
//===----------------------------------------------------------------------===//

#include "CudaHalf.h"

#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <ATen/cuda/CUDAEvent.h>
#include <ATen/cuda/CUDAGraph.h>

#include <optional>
#include <utility>
#include <vector>

namespace fsdp::runtime::cuda {
namespace {

void setCudaDevice(c10::Device device) {
  c10::cuda::set_device(device.index());
}

DeviceMemory cudaMemory(c10::Device device) {
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

void resetCudaPeaks(c10::Device device) {
  c10::cuda::CUDACachingAllocator::resetPeakStats(device.index());
}

void synchronizeCuda(c10::Device device) {
  c10::cuda::CUDAGuard guard(device.index());
  c10::cuda::device_synchronize();
}

class CudaCopier final : public Copier {
public:
  explicit CudaCopier(c10::Device device)
      : device(device),
        stream(c10::cuda::getStreamFromPool(/*isHighPriority=*/false,
                                            device.index())) {}

  at::Tensor toDevice(const at::Tensor &host) override {
    // Allocated for the compute stream, which waits for the copy before it
    // uses (or frees) it.
    at::Tensor out = at::empty_like(host, host.options().device(device));
    c10::cuda::CUDAStream compute = after();
    {
      c10::cuda::CUDAStreamGuard copying(stream);
      out.copy_(host, /*non_blocking=*/true);
    }
    at::cuda::CUDAEvent copied;
    copied.record(stream);
    copied.block(compute);
    return out;
  }

  at::Tensor toHost(const at::Tensor &onDevice) override {
    at::Tensor out = at::empty_like(
        onDevice, onDevice.options().device(c10::kCPU).pinned_memory(true));
    after();
    {
      c10::cuda::CUDAStreamGuard copying(stream);
      out.copy_(onDevice, /*non_blocking=*/true);
    }
    auto copied = std::make_shared<at::cuda::CUDAEvent>();
    copied->record(stream);
    // The source stays allocated until the copy has read it.
    inFlight.emplace_back(std::move(copied), onDevice);
    return out;
  }

  void waitForHost() override {
    for (auto &[copied, source] : inFlight)
      copied->synchronize();
    inFlight.clear();
  }

private:
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
      inFlight;
};

class CudaGraph final : public Graph {
public:
  explicit CudaGraph(c10::Device device)
      : stream(c10::cuda::getStreamFromPool(/*isHighPriority=*/false,
                                            device.index())) {}

  void begin() override {
    // The capture stream waits for what the current stream has queued (the
    // batch's copy, the state's last update).
    c10::cuda::CUDAStream current =
        c10::cuda::getCurrentCUDAStream(stream.device_index());
    at::cuda::CUDAEvent queued;
    queued.record(current);
    queued.block(stream);
    capturing.emplace(stream);
    graph.capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
  }

  void end() override {
    graph.capture_end();
    capturing.reset();
  }

  void replay() override { graph.replay(); }

private:
  at::cuda::CUDAGraph graph;
  c10::cuda::CUDAStream stream;
  std::optional<c10::cuda::CUDAStreamGuard> capturing;
};

std::unique_ptr<Copier> cudaCopier(c10::Device device) {
  return std::make_unique<CudaCopier>(device);
}

std::unique_ptr<Graph> cudaGraph(c10::Device device) {
  return std::make_unique<CudaGraph>(device);
}

const Half theHalf = {setCudaDevice,   cudaMemory,  resetCudaPeaks,
                      synchronizeCuda, cudaCopier,  cudaGraph,
                      ncclBuiltVersion, ncclCommunicator};

} // namespace

const Half *linkedHalf() { return &theHalf; }

} // namespace fsdp::runtime::cuda

/// The entry fsdp-run looks up when it loads this half (cuda::kHalfEntry).
extern "C" __attribute__((visibility("default"))) const fsdp::runtime::cuda::Half *
fsdp_runtime_cuda_half() {
  return fsdp::runtime::cuda::linkedHalf();
}
