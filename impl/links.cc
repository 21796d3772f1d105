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
  int node_of(int peer) const override { return inner_.node_of(world(peer)); }

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

namespace {
class NodeLinks final : public LinksDecorator {
 public:
  NodeLinks(Links& inner, int per_node) : LinksDecorator(inner), per_node_(per_node) {}
  int node_of(int peer) const override { return peer / per_node_; }

 private:
  int per_node_;
};
}  // namespace

std::unique_ptr<Links> node_links(Links& inner, int ranks_per_node) {
  if (ranks_per_node < 1)
    throw std::invalid_argument(fmt::format("node_links: ranks per node must be at least 1, got {}", ranks_per_node));
  return std::make_unique<NodeLinks>(inner, ranks_per_node);
}

std::vector<int> number_nodes(std::span<const int> ids) {
  std::vector<int> seen, out;
  out.reserve(ids.size());
  for (const int id : ids) {
    auto it = std::find(seen.begin(), seen.end(), id);
    if (it == seen.end()) it = seen.insert(seen.end(), id);
    out.push_back(static_cast<int>(it - seen.begin()));
  }
  return out;
}

std::vector<int> node_map(const Links& links) {
  std::vector<int> ids;
  for (int r = 0; r < links.size(); ++r) ids.push_back(links.node_of(r));
  return number_nodes(ids);
}

std::unique_ptr<Links> subset_links(Links& inner, std::vector<int> members) {
  return std::make_unique<SubsetLinks>(inner, std::move(members));
}

}  // namespace collcheck
