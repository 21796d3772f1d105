#include "impl/collective.h"

#include <fmt/format.h>

#include <stdexcept>

namespace collcheck {

namespace {
// What each collective is called and how large its buffers are: none, count,
// or p * count elements.
enum class Size : uint8_t { None, Count, PCount };
struct Row {
  Collective coll;
  std::string_view name;
  Size send, recv;
};
constexpr Row kRows[] = {
    {Collective::AllReduce, "all_reduce", Size::Count, Size::Count},
    {Collective::Broadcast, "broadcast", Size::Count, Size::Count},
    {Collective::AllGather, "all_gather", Size::Count, Size::PCount},
    {Collective::ReduceScatter, "reduce_scatter", Size::PCount, Size::Count},
    {Collective::AllToAll, "all_to_all", Size::Count, Size::Count},
    {Collective::Barrier, "barrier", Size::None, Size::None},
    {Collective::Send, "send", Size::Count, Size::None},
    {Collective::Recv, "recv", Size::None, Size::Count},
};
const Row& row(Collective c) {
  for (const Row& r : kRows)
    if (r.coll == c) return r;
  throw std::invalid_argument("unknown collective");
}
size_t elements(Size s, size_t count, int p) {
  return s == Size::None ? 0 : s == Size::Count ? count : count * static_cast<size_t>(p);
}
}  // namespace

std::string_view collective_name(Collective c) { return row(c).name; }

std::optional<Collective> parse_collective(std::string_view name) {
  for (const Row& r : kRows)
    if (r.name == name) return r.coll;
  return std::nullopt;
}

std::string collective_choices() {
  std::string s;
  for (const Row& r : kRows) s += (s.empty() ? "" : ", ") + std::string(r.name);
  return s;
}

size_t send_elements(Collective c, size_t count, int p) { return elements(row(c).send, count, p); }
size_t recv_elements(Collective c, size_t count, int p) { return elements(row(c).recv, count, p); }

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
