//===- Device.h - the device a rank runs on, and its backend ----*- C++ -*-===//
//
// `fsdp-run --device cuda|cpu` and `--backend nccl|gloo`, resolved for one
// rank; and what the runtime asks of a GPU through CUDA-free declarations
// (Cuda.cpp holds the CUDA code, compiled where the CUDA headers are), so
// that fsdp-run builds and runs where there is no GPU driver.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_DEVICE_H
#define FSDP_RUNTIME_DEVICE_H

#include "fsdp/runtime/Communicator.h"

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>

namespace fsdp::runtime {

enum class Backend { Gloo, Nccl };
const char *backendName(Backend backend);

/// CUDA devices this process sees (0 without a driver or a GPU).
int visibleCudaDevices();

/// The device rank `info` runs on. `requested` is "cpu", "cuda" or "" (cuda
/// when a GPU is visible, else cpu). On cuda the rank takes
/// cuda:LOCAL_RANK, which must be visible; FSDP_RUN_SHARE_GPUS=1 puts the
/// ranks on the visible devices round-robin instead (a test of two ranks
/// on one GPU). Throws an Error saying what is missing.
c10::Device rankDevice(const std::string &requested, const RankInfo &info);

/// The backend for `device`: `requested` is "gloo", "nccl" or "" (nccl on
/// cuda, gloo on cpu). Throws an Error for nccl on cpu, or for nccl in an
/// fsdp-run built without NCCL's headers.
Backend runBackend(const std::string &requested, c10::Device device);

/// The NCCL this fsdp-run was built with ("2.28.9"), or "" where it was
/// built without NCCL's headers (GPU ranks then cannot talk).
std::string ncclVersion();
/// Whether this fsdp-run was built with Gloo's headers (CPU ranks can talk).
bool glooBuilt();

/// The communicator for the rank: one rank needs none; several talk over
/// `backend`, in groups of `shardGroupSize` consecutive ranks.
std::unique_ptr<Communicator> createCommunicator(Backend backend,
                                                 const RankInfo &info,
                                                 int shardGroupSize,
                                                 c10::Device device);

/// What the CUDA caching allocator holds on one device.
struct DeviceMemory {
  int64_t allocated = 0;     // torch.cuda.memory_allocated
  int64_t allocatedPeak = 0; // torch.cuda.max_memory_allocated
  int64_t reserved = 0;      // torch.cuda.memory_reserved
  int64_t reservedPeak = 0;  // torch.cuda.max_memory_reserved
};

namespace cuda {
/// Whether this process has the runtime's CUDA half (Cuda.cpp, Nccl.cpp),
/// provided or beside fsdp-run to load: without it (or before it is
/// loaded) every call below throws an Error.
bool built();
/// Makes `device` the thread's current CUDA device.
void setDevice(c10::Device device);
DeviceMemory memory(c10::Device device);
/// Starts new peaks from what is allocated and reserved now.
void resetPeaks(c10::Device device);
/// Waits until `device` has finished what was queued on it.
void synchronize(c10::Device device);

/// CPU offload's copies on a GPU, on a stream of their own: each starts
/// after what the compute stream has queued, so it overlaps the work queued
/// before it. A copy to the device is waited for by the compute stream (no
/// host synchronisation); a copy to the (page-locked) host is waited for
/// by the host in waitForHost, before the host computes with it, and keeps
/// its source alive until then.
class Copier {
public:
  virtual ~Copier() = default;
  virtual at::Tensor toDevice(const at::Tensor &host) = 0;
  virtual at::Tensor toHost(const at::Tensor &onDevice) = 0;
  /// Blocks until every copy to the host has landed.
  virtual void waitForHost() = 0;
};
std::unique_ptr<Copier> makeCopier(c10::Device device);

/// A CUDA graph (at::cuda::CUDAGraph): what is enqueued on `device`
/// between begin() and end() is captured (on a stream of its own, made
/// current meanwhile; other threads stay free to query events), and
/// replay() runs it again on the current stream.
class Graph {
public:
  virtual ~Graph() = default;
  virtual void begin() = 0;
  virtual void end() = 0;
  virtual void replay() = 0;
};
std::unique_ptr<Graph> makeGraph(c10::Device device);

/// The CUDA half: linked into the Python module (whose torch has loaded
/// CUDA already), and a library of its own beside fsdp-run, loaded only for
/// a GPU run, so that a CPU rank does not carry CUDA's libraries (a third
/// of its memory).
constexpr const char *kHalfLibrary = "libfsdp_runtime_cuda.so";
/// Its entry: `extern "C" const Half *fsdp_runtime_cuda_half()`.
constexpr const char *kHalfEntry = "fsdp_runtime_cuda_half";

/// fsdp-run's start: loads the CUDA half for `requestedDevice` ("cuda";
/// or "" where CUDA's driver sees a GPU; never for "cpu"), before anything
/// asks ATen about CUDA (ATen decides once, at the first question, whether
/// CUDA is there). Never throws: rankDevice says what failed.
void loadFor(const std::string &requestedDevice);
/// Whether the half is here (provided, or loaded).
bool loaded();
/// Why loading the half failed ("" if it did not, or was not tried).
std::string whyNotLoaded();
/// A binary with the half linked in gives it here, before any rank starts.
struct Half;
void provide(const Half *half);

/// What the CUDA half provides: the calls above, and NCCL's communicator.
struct Half {
  void (*setDevice)(c10::Device);
  DeviceMemory (*memory)(c10::Device);
  void (*resetPeaks)(c10::Device);
  void (*synchronize)(c10::Device);
  std::unique_ptr<Copier> (*copier)(c10::Device);
  std::unique_ptr<Graph> (*graph)(c10::Device);
  /// "2.28.9", or "" where the half was built without NCCL's headers.
  std::string (*ncclVersion)();
  /// createNcclCommunicator's work (an Error without NCCL's headers).
  std::unique_ptr<Communicator> (*nccl)(const RankInfo &, int shardGroupSize,
                                        c10::Device);
};
} // namespace cuda

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_DEVICE_H
