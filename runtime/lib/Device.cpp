//===- Device.cpp - the device a rank runs on, and its backend ------------===//

#include "fsdp/runtime/Device.h"
#include "fsdp/runtime/Files.h"

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <unistd.h>

namespace fsdp::runtime {

namespace cuda {
namespace {

/// The CUDA half: provided by the binary it is linked into, or loaded.
const Half *theHalf = nullptr;
/// Why loading it failed ("" where it did not, or was not tried).
std::string loadFailure;

const Half &half() {
  if (theHalf)
    return *theHalf;
  throw Error("this fsdp-run was built without CUDA");
}

/// Where fsdp-run's CUDA half would be: lib/ beside bin/ (a build
/// directory, or a copy of bin/ and lib/), else beside the executable.
std::string halfPath() {
  std::string dir = selfPath();
  dir = dir.substr(0, dir.rfind('/') + 1);
  for (const std::string &candidate :
       {dir + "../lib/" + kHalfLibrary, dir + kHalfLibrary})
    if (::access(candidate.c_str(), R_OK) == 0)
      return candidate;
  return "";
}

/// Whether CUDA's driver sees a GPU, asked without loading CUDA's
/// libraries (the driver's own library, which a machine without a GPU
/// driver does not have).
bool driverSeesDevice() {
  void *driver = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver)
    return false;
  using Init = int (*)(unsigned);
  using Count = int (*)(int *);
  auto init = reinterpret_cast<Init>(::dlsym(driver, "cuInit"));
  auto count = reinterpret_cast<Count>(::dlsym(driver, "cuDeviceGetCount"));
  int devices = 0;
  bool seen = init && count && init(0) == 0 && count(&devices) == 0 &&
              devices > 0;
  if (!seen)
    ::dlclose(driver);
  return seen;
}

} // namespace

void provide(const Half *half) { theHalf = half; }

void loadFor(const std::string &requestedDevice) {
  if (theHalf || requestedDevice == "cpu")
    return;
  if (requestedDevice.empty() && !driverSeesDevice())
    return;
  std::string path = halfPath();
  if (path.empty())
    return; // built without CUDA: rankDevice says so
  // Before anything asks ATen about CUDA: it decides once, at the first
  // question, whether CUDA's half of torch (loaded with ours) is there.
  void *library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char *why = ::dlerror();
    loadFailure = path + ": " + (why ? why : "dlopen failed");
    return;
  }
  using Entry = const Half *(*)();
  auto entry = reinterpret_cast<Entry>(::dlsym(library, kHalfEntry));
  if (!entry) {
    loadFailure = path + ": no " + kHalfEntry;
    return;
  }
  // ATen, asked about CUDA before this load, would have settled on none:
  // the half's GPU calls would then fail far from the cause.
  if (!at::detail::getCUDAHooks().hasCUDART()) {
    loadFailure = path + ": loaded after ATen was asked about CUDA (fsdp-run "
                         "must load it first)";
    return;
  }
  theHalf = entry();
}

bool loaded() { return theHalf != nullptr; }
std::string whyNotLoaded() { return loadFailure; }

bool built() { return loaded() || !halfPath().empty(); }
void setDevice(c10::Device device) { half().setDevice(device); }
DeviceMemory memory(c10::Device device) { return half().memory(device); }
void resetPeaks(c10::Device device) { half().resetPeaks(device); }
void synchronize(c10::Device device) { half().synchronize(device); }
std::unique_ptr<Copier> makeCopier(c10::Device device) {
  return half().copier(device);
}
std::unique_ptr<Graph> makeGraph(c10::Device device) {
  return half().graph(device);
}

} // namespace cuda

std::string ncclVersion() {
  return cuda::loaded() ? cuda::half().ncclVersion() : "";
}

std::unique_ptr<Communicator> createNcclCommunicator(const RankInfo &info,
                                                     int shardGroupSize,
                                                     c10::Device device) {
  if (!cuda::loaded())
    throw Error("this fsdp-run was built without NCCL's headers: --backend "
                "nccl is unavailable (use --backend gloo)");
  return cuda::half().nccl(info, shardGroupSize, device);
}

const char *backendName(Backend backend) {
  return backend == Backend::Nccl ? "nccl" : "gloo";
}

int visibleCudaDevices() {
  // Without the CUDA half, ATen is not asked: it would decide for good
  // that there is no CUDA (loadFor must come first).
  if (!cuda::loaded() || !at::hasCUDA())
    return 0;
  return static_cast<int>(at::detail::getCUDAHooks().deviceCount());
}

c10::Device rankDevice(const std::string &requested, const RankInfo &info) {
  int visible = visibleCudaDevices();
  if (requested == "cpu" || (requested.empty() && visible == 0))
    return c10::Device(c10::kCPU);
  if (!cuda::built())
    throw Error("--device cuda: this fsdp-run was built without CUDA "
                "(no CUDA toolkit headers at build time); use --device cpu");
  if (!cuda::loaded())
    throw Error("--device cuda: fsdp-run's CUDA half did not load (" +
                (cuda::whyNotLoaded().empty()
                     ? std::string("not loaded before the rank started")
                     : cuda::whyNotLoaded()) +
                "); use --device cpu");
  if (visible == 0)
    throw Error("--device cuda: no CUDA device is visible to this process "
                "(no NVIDIA driver, no GPU, or CUDA_VISIBLE_DEVICES hides "
                "them); use --device cpu");
  const char *share = std::getenv("FSDP_RUN_SHARE_GPUS");
  bool shared = share && std::strcmp(share, "1") == 0;
  if (info.localRank >= visible && !shared)
    throw Error("--device cuda: local rank " + std::to_string(info.localRank) +
                " would use cuda:" + std::to_string(info.localRank) +
                ", but " + std::to_string(visible) + " CUDA device" +
                (visible == 1 ? " is" : "s are") +
                " visible: start at most one rank per GPU (or set "
                "FSDP_RUN_SHARE_GPUS=1 to share them, for tests)");
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(
                                     info.localRank % visible));
}

Backend runBackend(const std::string &requested, c10::Device device) {
  if (requested.empty())
    return device.is_cuda() ? Backend::Nccl : Backend::Gloo;
  if (requested == "gloo") {
    // Its reductions send and receive host memory (point-to-point).
    if (device.is_cuda())
      throw Error("--backend gloo moves CPU tensors: with --device cuda the "
                  "ranks' collectives are nccl's (the default)");
    return Backend::Gloo;
  }
  if (requested != "nccl")
    throw Error("--backend is nccl or gloo, not '" + requested + "'");
  if (!device.is_cuda())
    throw Error("--backend nccl moves CUDA tensors: it needs --device cuda "
                "(CPU ranks use --backend gloo)");
  return Backend::Nccl;
}

std::unique_ptr<Communicator> createCommunicator(Backend backend,
                                                 const RankInfo &info,
                                                 int shardGroupSize,
                                                 c10::Device device) {
  if (info.worldSize == 1)
    return createSingleRankCommunicator(device);
  if (backend == Backend::Nccl)
    return createNcclCommunicator(info, shardGroupSize, device);
  return createGlooCommunicator(info, shardGroupSize, device);
}

} // namespace fsdp::runtime
