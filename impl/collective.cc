#include "impl/collective.h"

#include <fmt/format.h>

#include <stdexcept>

namespace collcheck {

std::string_view collective_name(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "all_reduce";
    case Collective::Broadcast: return "broadcast";
    case Collective::AllGather: return "all_gather";
    case Collective::ReduceScatter: return "reduce_scatter";
    case Collective::AllToAll: return "all_to_all";
    case Collective::Barrier: return "barrier";
    case Collective::Send: return "send";
    case Collective::Recv: return "recv";
  }
  return "?";
}

std::optional<Collective> parse_collective(std::string_view name) {
  for (Collective c : kAllCollectives)
    if (collective_name(c) == name) return c;
  return std::nullopt;
}

std::string collective_choices() {
  std::string s;
  for (Collective c : kAllCollectives) s += (s.empty() ? "" : ", ") + std::string(collective_name(c));
  return s;
}

size_t send_elements(Collective c, size_t count, int p) {
  switch (c) {
    case Collective::ReduceScatter: return count * static_cast<size_t>(p);
    case Collective::Barrier:
    case Collective::Recv: return 0;
    default: return count;
  }
}

size_t recv_elements(Collective c, size_t count, int p) {
  switch (c) {
    case Collective::AllGather: return count * static_cast<size_t>(p);
    case Collective::Barrier:
    case Collective::Send: return 0;
    default: return count;
  }
}

std::string count_fits(Collective c, size_t count, int p) {
  if (c == Collective::AllToAll && p > 0 && count % static_cast<size_t>(p) != 0)
    return fmt::format("all_to_all sends count / p elements to each rank, so count must be a multiple of the {} "
                       "ranks of its group; {} is not",
                       p, count);
  if (c == Collective::Barrier && count != 0) return "a barrier moves no data: leave count out";
  return "";
}

void run_collective(const CollectiveArgs& a) {
  switch (a.kind) {
    case Collective::Broadcast: return broadcast_binomial(a);
    case Collective::AllGather: return all_gather_ring(a);
    case Collective::ReduceScatter: return reduce_scatter_ring(a);
    case Collective::AllToAll: return all_to_all_pairwise(a);
    case Collective::Barrier: return barrier_dissemination(a);
    case Collective::Send:
    case Collective::Recv: return send_recv_direct(a);
    case Collective::AllReduce: break;
  }
  throw std::invalid_argument("run_collective: all_reduce runs on the implementation under test");
}

}  // namespace collcheck
