//===- Communicator.cpp - one rank, and what every communicator shares ----===//

#include "fsdp/runtime/Communicator.h"

namespace fsdp::runtime {

int rankInGroup(CommGroup group, int rank, int shardSize) {
  switch (group) {
  case CommGroup::World:
    return rank;
  case CommGroup::Shard:
    return rank % shardSize;
  case CommGroup::Replicate:
    return rank / shardSize;
  }
  return 0;
}

int sizeOfGroup(CommGroup group, int worldSize, int shardSize) {
  switch (group) {
  case CommGroup::World:
    return worldSize;
  case CommGroup::Shard:
    return shardSize;
  case CommGroup::Replicate:
    return worldSize / shardSize;
  }
  return 1;
}

//===----------------------------------------------------------------------===//
// One rank
//===----------------------------------------------------------------------===//

namespace {

class Ready : public Pending {
public:
  explicit Ready(at::Tensor t) : tensor(std::move(t)) {}
  at::Tensor wait() override { return tensor; }
  std::vector<at::Tensor> held() const override { return {tensor}; }

private:
  at::Tensor tensor;
};

class SingleRank : public Communicator {
public:
  explicit SingleRank(c10::Device device) : device_(device) {}
  int rank() const override { return 0; }
  c10::Device device() const override { return device_; }
  int worldSize() const override { return 1; }
  int groupRank(CommGroup) const override { return 0; }
  int groupSize(CommGroup) const override { return 1; }
  std::unique_ptr<Pending> allGather(const at::Tensor &shard,
                                     CommGroup) override {
    return gatheredAlone(shard);
  }
  std::unique_ptr<Pending> reduceScatter(const at::Tensor &full, CommGroup,
                                         bool) override {
    return std::make_unique<Ready>(full.clone());
  }
  std::unique_ptr<Pending> allReduce(const at::Tensor &t, CommGroup,
                                     bool) override {
    return std::make_unique<Ready>(t.clone());
  }
  std::unique_ptr<Pending> reduceScatterOverWorld(const at::Tensor &full,
                                                  bool) override {
    return std::make_unique<Ready>(full.clone());
  }
  void abort(const std::string &) override {}
  std::string failureOfOthers(std::chrono::milliseconds) override {
    return "";
  }

private:
  c10::Device device_;
};

} // namespace

std::unique_ptr<Pending> completed(at::Tensor result) {
  return std::make_unique<Ready>(std::move(result));
}

std::unique_ptr<Pending> gatheredAlone(const at::Tensor &shard) {
  return completed(shard.dim() == 0 ? shard.reshape({1}).clone()
                                    : shard.clone());
}

std::unique_ptr<Communicator> createSingleRankCommunicator(c10::Device device) {
  return std::make_unique<SingleRank>(device);
}

} // namespace fsdp::runtime
