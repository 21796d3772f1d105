#include "properties/properties.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "harness/communicator.h"

namespace collcheck {

std::vector<std::string_view> property_names() {
  return {"call-completes",         "count-zero-is-noop", "no-write-outside-count", "input-untouched",
          "agrees-with-oracle",     "ranks-identical",    "deterministic",          "inplace-equals-out-of-place",
          "async-wait-equals-sync", "peers-agree"};
}

std::vector<ImplPtr> default_peers(const Implementation& impl) {
  std::vector<ImplPtr> peers;
  const bool reference = find_algorithm(impl.name()) != nullptr;
  for (const auto& a : algorithms()) {
    if (a.name == impl.name()) continue;
    peers.push_back(reference_implementation(a.name));
    if (!reference) break;  // ring only, for an implementation from outside
  }
  return peers;
}

namespace {

constexpr size_t kCanary = 64;

// The calls each rank makes per case.
enum CallKind { kPrimary, kRepeat, kOtherPlacement, kAsync, kNumCalls };
const char* const kCallNames[kNumCalls] = {"the call", "the same call again", "the other placement",
                                           "all_reduce_async + wait"};

std::byte canary_byte(size_t k) { return static_cast<std::byte>(0xA5u ^ (k * 0x3Bu) ^ (k >> 3)); }

// Buffers of one call on one rank, each framed by canaries.
struct CallBuffers {
  bool inplace = false;
  std::vector<std::byte> send;  // out-of-place only
  std::vector<std::byte> recv;
  std::byte* send_data() { return send.data() + kCanary; }
  std::byte* recv_data() { return recv.data() + kCanary; }
};

std::vector<std::byte> framed(const std::vector<std::byte>& payload, bool poison) {
  std::vector<std::byte> b(payload.size() + 2 * kCanary);
  for (size_t k = 0; k < b.size(); ++k) b[k] = canary_byte(k);
  if (!poison && !payload.empty()) std::memcpy(b.data() + kCanary, payload.data(), payload.size());
  return b;
}

// Everything one run touches, kept on the heap: when a rank hangs, its thread
// may still write here, so a hung run's state is deliberately never freed.
struct RunState {
  std::vector<std::vector<CallBuffers>> bufs;  // [rank][call]
  std::vector<std::vector<std::byte>> peer_out;
  ThreadWorld::RankFn fn;
};

std::string first_diff_detail(const Case& c, const Reduction& red, const std::vector<std::vector<std::byte>>& inputs,
                              const std::byte* want, const std::byte* got, std::string_view want_name,
                              std::string_view got_name) {
  for (size_t i = 0; i < c.count; ++i) {
    const uint64_t a = load_element(c.dtype, want, i), b = load_element(c.dtype, got, i);
    if (a == b) continue;
    std::vector<uint64_t> vals;
    for (const auto& in : inputs) vals.push_back(load_element(c.dtype, in.data(), i));
    const Expectation e = expect_element(red, vals);
    return fmt::format("  first difference at element [{}]:\n    {}: {}\n    {}: {}\n    oracle: {}\n", i, want_name,
                       format_element(c.dtype, a), got_name, format_element(c.dtype, b), e.describe(c.dtype));
  }
  return "";
}

std::string oracle_detail(const Case& c, const Reduction& red, const std::vector<std::vector<std::byte>>& inputs,
                          const std::byte* result, size_t i, std::string_view who) {
  std::vector<uint64_t> vals;
  for (const auto& in : inputs) vals.push_back(load_element(c.dtype, in.data(), i));
  const Expectation e = expect_element(red, vals);
  const uint64_t got = load_element(c.dtype, result, i);
  const Verdict v = judge(red, e, got);
  std::string bound;
  switch (e.kind) {
    case CheckKind::Bitwise: bound = "0 (bitwise: the result does not depend on the reduction order)"; break;
    case CheckKind::OneOf: bound = "exactly one of the outcomes some reduction order gives"; break;
    default:
      bound = fmt::format("{:.3g} [{}]; the error is {:.3g} bounds", e.bound, check_kind_name(e.kind), v.err_units);
  }
  std::string ins;
  for (size_t r = 0; r < vals.size(); ++r) ins += fmt::format("      rank {}: {}\n", r, format_element(c.dtype, vals[r]));
  return fmt::format("  first wrong element: [{}] on {}\n    expected: {}\n    got:      {}\n    bound:    {}\n"
                     "    inputs at [{}]:\n{}",
                     i, who, e.describe(c.dtype), format_element(c.dtype, got), bound, i, ins);
}

// Each line of `text` indented by `pad`.
std::string indent(const std::string& text, std::string_view pad = "    ") {
  std::string out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t nl = text.find('\n', start);
    const size_t end = nl == std::string::npos ? text.size() : nl;
    out += fmt::format("{}{}\n", pad, std::string_view(text).substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

CaseRunner::CaseRunner(RunConfig cfg) : cfg_(std::move(cfg)) {}
CaseRunner::~CaseRunner() = default;

ThreadWorld& CaseRunner::world(int p) {
  auto& w = worlds_[p];
  if (!w) w = std::make_unique<ThreadWorld>(p);
  return *w;
}

CaseOutcome CaseRunner::run(const Case& c) {
  CaseOutcome out;
  auto fail = [&](std::string_view property, std::string detail) {
    out.ok = false;
    out.failure = Failure{std::string(property), std::move(detail)};
    return out;
  };
  const auto inputs = c.input_buffers();
  const Reduction red = c.reduction();
  const size_t bytes = c.count * dtype_size(c.dtype);
  const auto P = static_cast<size_t>(c.p);

  auto st = std::make_shared<RunState>();
  st->bufs.resize(P);
  for (size_t r = 0; r < P; ++r) {
    for (int k = 0; k < kNumCalls; ++k) {
      CallBuffers b;
      b.inplace = (k == kOtherPlacement) ? !c.inplace : c.inplace;
      if (b.inplace) {
        b.recv = framed(inputs[r], false);
      } else {
        b.send = framed(inputs[r], false);
        b.recv = framed(inputs[r], true);
      }
      st->bufs[r].push_back(std::move(b));
    }
  }
  const auto limit = cfg_.timeout * kNumCalls + std::chrono::seconds(2);
  RunState* s = st.get();
  // The rank bodies capture by value: a hung rank may outlive this call.
  struct Call {
    size_t count;
    DType dtype;
    RedOp op;
    double scalar;
  };
  const Call call{c.count, c.dtype, c.op, c.scalar};
  ImplPtr impl = cfg_.impl;
  const auto timeout = cfg_.timeout;
  st->fn = [s, call, impl, timeout](RankContext& ctx) {
    const Call* cp = &call;
    Communicator comm(ctx.links(), CommOptions{"", timeout, impl});
    auto& mine = s->bufs[static_cast<size_t>(ctx.rank())];
    for (int k = 0; k < kNumCalls; ++k) {
      CallBuffers& b = mine[static_cast<size_t>(k)];
      const void* send = b.inplace ? b.recv_data() : b.send_data();
      try {
        if (k == kAsync) {
          auto w = comm.all_reduce_async(send, b.recv_data(), cp->count, cp->dtype, cp->op, cp->scalar);
          w->wait();
        } else {
          comm.all_reduce(send, b.recv_data(), cp->count, cp->dtype, cp->op, cp->scalar);
        }
      } catch (const std::exception& e) {
        throw std::runtime_error(fmt::format("in {} ({}): {}", kCallNames[k], b.inplace ? "in-place" : "out-of-place",
                                             e.what()));
      }
    }
  };
  const WorldRun run = world(c.p).run(st->fn, std::chrono::duration_cast<std::chrono::milliseconds>(limit));
  if (run.hung) {
    new std::shared_ptr<RunState>(st);  // never freed: a hung rank may still write to it
    worlds_.erase(c.p);                 // the world is broken; its hung thread is abandoned
    out.world_broken = true;
    return fail("call-completes",
                fmt::format("  ranks did not return within {:.1f} s ({} calls of deadline {} ms each):\n{}",
                            std::chrono::duration<double>(limit).count(), static_cast<int>(kNumCalls),
                            cfg_.timeout.count(), indent(run.failures())));
  }
  if (!run.ok()) return fail("call-completes", indent(run.failures(), "  "));

  // Canaries, and inputs left alone.
  for (size_t r = 0; r < P; ++r) {
    for (int k = 0; k < kNumCalls; ++k) {
      CallBuffers& b = st->bufs[r][static_cast<size_t>(k)];
      for (size_t j = 0; j < b.recv.size(); ++j) {
        if (j >= kCanary && j < kCanary + bytes) continue;
        if (b.recv[j] != canary_byte(j)) {
          const long off = static_cast<long>(j) - static_cast<long>(kCanary);
          const long es = static_cast<long>(dtype_size(c.dtype));
          const std::string where =
              off < 0 ? fmt::format("{} byte(s) before the buffer", -off)
                      : fmt::format("byte {} past the end (element [{}])", off - static_cast<long>(bytes), off / es);
          return fail(c.count == 0 ? "count-zero-is-noop" : "no-write-outside-count",
                      fmt::format("  rank {} wrote {} in {} ({}): byte is {:#04x}, canary was {:#04x}\n", r, where,
                                  kCallNames[k], b.inplace ? "in-place" : "out-of-place",
                                  static_cast<unsigned>(b.recv[j]), static_cast<unsigned>(canary_byte(j))));
        }
      }
      if (!b.inplace && bytes > 0 && std::memcmp(b.send.data() + kCanary, inputs[r].data(), bytes) != 0) {
        size_t i = 0;
        while (load_element(c.dtype, b.send_data(), i) == load_element(c.dtype, inputs[r].data(), i)) ++i;
        return fail("input-untouched",
                    fmt::format("  rank {} modified its send buffer in {} (out-of-place): element [{}] was {}, is {}\n",
                                r, kCallNames[k], i, format_element(c.dtype, load_element(c.dtype, inputs[r].data(), i)),
                                format_element(c.dtype, load_element(c.dtype, b.send_data(), i))));
      }
    }
  }

  // The result against the oracle (rank 0's primary call; then the others must be identical).
  std::vector<const void*> ptrs;
  for (const auto& in : inputs) ptrs.push_back(in.data());
  const std::byte* result = st->bufs[0][kPrimary].recv_data();
  const CheckSummary cs = check_all_reduce(red, ptrs, result, c.count);
  for (int k = 0; k < 4; ++k) out.by_kind[k] = cs.by_kind[k];
  out.max_err_units = cs.max_err_units;
  if (cs.wrong > 0) {
    return fail("agrees-with-oracle",
                fmt::format("  {} of {} elements wrong\n", cs.wrong, cs.checked) +
                    oracle_detail(c, red, inputs, result, *cs.first_wrong, "rank 0"));
  }
  for (size_t r = 1; r < P; ++r) {
    const std::byte* other = st->bufs[r][kPrimary].recv_data();
    if (std::memcmp(other, result, bytes) != 0)
      return fail("ranks-identical", fmt::format("  rank {} differs from rank 0\n", r) +
                                         first_diff_detail(c, red, inputs, result, other, "rank 0",
                                                           fmt::format("rank {}", r)));
  }
  const struct {
    CallKind k;
    const char* property;
  } same[] = {{kRepeat, "deterministic"}, {kOtherPlacement, "inplace-equals-out-of-place"}, {kAsync, "async-wait-equals-sync"}};
  for (const auto& x : same) {
    for (size_t r = 0; r < P; ++r) {
      const std::byte* other = st->bufs[r][x.k].recv_data();
      if (std::memcmp(other, result, bytes) != 0) {
        auto& b = st->bufs[r][x.k];
        return fail(x.property, fmt::format("  rank {}: {} ({}) differs from the call ({})\n", r, kCallNames[x.k],
                                            b.inplace ? "in-place" : "out-of-place",
                                            c.inplace ? "in-place" : "out-of-place") +
                                    first_diff_detail(c, red, inputs, result, other, "the call", kCallNames[x.k]));
      }
    }
  }

  // Peers: each must pass the oracle too, and match bitwise where the oracle is bitwise.
  for (const auto& peer : cfg_.peers) {
    std::vector<std::vector<std::byte>> peer_out(P);
    for (size_t r = 0; r < P; ++r) peer_out[r] = inputs[r];
    auto pst = std::make_shared<std::vector<std::vector<std::byte>>>(std::move(peer_out));
    ThreadWorld::RankFn pfn = [pst, call, peer, timeout](RankContext& ctx) {
      const Call* cp = &call;
      Communicator comm(ctx.links(), CommOptions{"", timeout, peer});
      auto& b = (*pst)[static_cast<size_t>(ctx.rank())];
      comm.all_reduce(b.data(), b.data(), cp->count, cp->dtype, cp->op, cp->scalar);
    };
    const WorldRun prun = world(c.p).run(pfn, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                  cfg_.timeout + std::chrono::seconds(2)));
    if (!prun.ok()) {
      if (prun.hung) {
        new ThreadWorld::RankFn(pfn);
        worlds_.erase(c.p);
        out.world_broken = true;
      }
      return fail("peers-agree", fmt::format("  peer {} failed:\n{}", peer->name(), indent(prun.failures())));
    }
    const std::byte* pres = (*pst)[0].data();
    std::vector<uint64_t> vals(P);
    for (size_t i = 0; i < c.count; ++i) {
      for (size_t r = 0; r < P; ++r) vals[r] = load_element(c.dtype, inputs[r].data(), i);
      const Expectation e = expect_element(red, vals);
      const uint64_t a = load_element(c.dtype, result, i), b = load_element(c.dtype, pres, i);
      const Verdict vb = judge(red, e, b);
      if (!vb.ok) {  // the impl passed the oracle already, so bitwise elements now agree
        return fail("peers-agree", fmt::format("  peer {} disagrees at element [{}]: {} has {}, {} has {}; oracle: {}\n",
                                               peer->name(), i, cfg_.impl->name(), format_element(c.dtype, a),
                                               peer->name(), format_element(c.dtype, b), e.describe(c.dtype)));
      }
      if ((e.kind == CheckKind::Bound || e.kind == CheckKind::Coarse) && e.bound > 0) {
        const double da = element_to_double(c.dtype, a), db = element_to_double(c.dtype, b);
        if (std::isfinite(da) && std::isfinite(db))
          out.max_peer_diff_units = std::max(out.max_peer_diff_units, std::fabs(da - db) / e.bound);
      }
    }
  }
  return out;
}

}  // namespace collcheck
