#include "strategies/collectives/hierarchical_collective.h"

#include <algorithm>
#include <vector>

namespace cadre {

namespace {

class HierarchicalCollective : public ProcessCollective {
 public:
  HierarchicalCollective(int rank, int size, std::unique_ptr<ProcessCollective> local,
                         std::unique_ptr<ProcessCollective> leaders, std::vector<int> host_of)
      : rank_(rank),
        size_(size),
        local_(std::move(local)),
        leaders_(std::move(leaders)),
        host_of_(std::move(host_of)) {}

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Device device() const override { return Device::cpu(0); }
  const char* transport() const override { return "shared memory within hosts, Gloo across"; }

  void sum(float* data, size_t count) override { reduce(data, count); }
  void sum(double* data, size_t count) override { reduce(data, count); }
  void leave() override {
    if (local_) local_->leave();
    if (leaders_) leaders_->leave();
  }

  // From the root to its host's leader (and host), between the leaders, then from each
  // other leader to its host.
  void broadcast(void* data, size_t bytes, int root) override {
    const int root_host = host_of_.at(root);
    const int own_host = host_of_[rank_];
    if (own_host == root_host && local_) local_->broadcast(data, bytes, local_rank(root));
    if (leaders_) leaders_->broadcast(data, bytes, root_host);
    if (own_host != root_host && local_) local_->broadcast(data, bytes, 0);
  }

 private:
  // Rank r's place among its host's processes (its host's ranks in job order).
  int local_rank(int r) const {
    int place = 0;
    for (int q = 0; q < r; ++q) place += host_of_[q] == host_of_[r];
    return place;
  }

  template <typename T>
  void reduce(T* data, size_t count) {
    if (local_) local_->sum(data, count);
    if (leaders_) leaders_->sum(data, count);
    if (local_) local_->broadcast(data, count * sizeof(T), 0);
  }

  int rank_;
  int size_;
  std::unique_ptr<ProcessCollective> local_;
  std::unique_ptr<ProcessCollective> leaders_;
  std::vector<int> host_of_;
};

}  // namespace

std::unique_ptr<ProcessCollective> hierarchical_collective(
    int rank, int size, std::unique_ptr<ProcessCollective> local,
    std::unique_ptr<ProcessCollective> leaders, std::vector<int> host_of) {
  return std::make_unique<HierarchicalCollective>(rank, size, std::move(local), std::move(leaders),
                                                  std::move(host_of));
}

}  // namespace cadre
