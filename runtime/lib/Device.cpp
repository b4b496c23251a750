//===- Device.cpp - the device a rank runs on, and its backend ------------===//

#include "fsdp/runtime/Device.h"
#ifdef FSDP_RUNTIME_CUDA
#include "CudaHalf.h"
#endif

#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <cstdlib>
#include <cstring>

namespace fsdp::runtime {

namespace cuda {
namespace {

/// The CUDA half, or null where this process has none.
const Half *present() {
#ifdef FSDP_RUNTIME_CUDA
  return linkedHalf();
#else
  return nullptr;
#endif
}

const Half &half() {
  if (const Half *h = present())
    return *h;
  throw Error("this fsdp-run was built without CUDA");
}

} // namespace

bool built() { return present() != nullptr; }
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
  const cuda::Half *h = cuda::present();
  return h ? h->ncclVersion() : "";
}

std::unique_ptr<Communicator> createNcclCommunicator(const RankInfo &info,
                                                     int shardGroupSize,
                                                     c10::Device device) {
  const cuda::Half *h = cuda::present();
  if (!h)
    throw Error("this fsdp-run was built without NCCL's headers: --backend "
                "nccl is unavailable (use --backend gloo)");
  return h->nccl(info, shardGroupSize, device);
}

const char *backendName(Backend backend) {
  return backend == Backend::Nccl ? "nccl" : "gloo";
}

int visibleCudaDevices() {
  if (!cuda::built() || !at::hasCUDA())
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
  if (requested == "gloo")
    return Backend::Gloo;
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
