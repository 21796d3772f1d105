#include "impl/links.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace collcheck {

std::string describe_tag(Tag tag) {
  const uint64_t call = call_of_tag(tag);
  const std::string group = group_of_tag(tag) ? fmt::format("group {}, ", group_of_tag(tag)) : "";
  if (call & kP2pCall)
    return fmt::format("tag {:#x} ({}point-to-point #{}, channel {})", tag, group, call & ~kP2pCall, channel_of_tag(tag));
  return fmt::format("tag {:#x} ({}call #{}, channel {})", tag, group, call, channel_of_tag(tag));
}

void wait_all(std::vector<RequestPtr>& requests, Deadline deadline) {
  for (auto& r : requests)
    if (r) r->wait(deadline);
}

namespace {
class SubsetLinks final : public Links {
 public:
  SubsetLinks(Links& inner, std::vector<int> members) : inner_(inner), members_(std::move(members)) {
    const auto it = std::find(members_.begin(), members_.end(), inner_.rank());
    if (it == members_.end())
      throw std::invalid_argument(fmt::format("subset_links: rank {} is not in the group", inner_.rank()));
    rank_ = static_cast<int>(it - members_.begin());
  }
  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(members_.size()); }
  RequestPtr isend(int peer, Tag tag, std::span<const std::byte> data) override {
    return inner_.isend(world(peer), tag, data);
  }
  RequestPtr irecv(int peer, Tag tag, std::span<std::byte> data) override {
    return inner_.irecv(world(peer), tag, data);
  }

 private:
  int world(int peer) const {
    if (peer < 0 || peer >= size())
      throw std::out_of_range(fmt::format("subset_links: peer {} is not a rank of the group (0..{})", peer, size() - 1));
    return members_[static_cast<size_t>(peer)];
  }
  Links& inner_;
  std::vector<int> members_;
  int rank_ = 0;
};
}  // namespace

std::unique_ptr<Links> subset_links(Links& inner, std::vector<int> members) {
  return std::make_unique<SubsetLinks>(inner, std::move(members));
}

}  // namespace collcheck
