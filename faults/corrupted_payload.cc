// Corrupted payload: one bit flipped in one transfer on one directed edge (a
// flaky NIC or a bad cable that the transport's CRC missed). Applied on the
// receiving side, below the flight recorder, so what the receiver records is
// what arrived.
#include <fmt/format.h>

#include "faults/nemesis.h"

namespace collcheck {
namespace {

struct Params {
  int from, to;
  uint64_t transfer, bit;
};

Params params(const Scenario& s, const FaultSpec& f) {
  return Params{fault_rank(s, f, "from"), fault_rank(s, f, "to"),
                static_cast<uint64_t>(fault_number(s, f, "transfer", 0, 1e9, 0)),
                static_cast<uint64_t>(fault_number(s, f, "bit", 0, 1e12, 0))};
}

void validate(const Scenario& s, const FaultSpec& f) {
  const Params p = params(s, f);
  if (p.from == p.to) fault_error(s, f, "to", "must differ from 'from'");
  for (const auto& [k, v] : f.fields)
    if (k != "from" && k != "to" && k != "transfer" && k != "bit")
      fault_error(s, f, k, "unknown parameter; allowed: from, to, transfer, bit");
  if (!f.ranks.empty() || !f.calls.empty()) fault_error(s, f, "", "takes from and to, not ranks or calls");
}

struct Counter {
  uint64_t seen = 0;  // non-empty receives from `from` so far
  bool done = false;
};

class FlipRequest final : public LinkRequest {
 public:
  FlipRequest(RequestPtr inner, std::span<std::byte> data, bool flip, uint64_t bit)
      : inner_(std::move(inner)), data_(data), flip_(flip), bit_(bit) {}
  bool test() override {
    if (!inner_->test()) return false;
    apply();
    return true;
  }
  void wait(Deadline deadline) override {
    inner_->wait(deadline);
    apply();
  }

 private:
  void apply() {
    if (!flip_) return;
    flip_ = false;
    const uint64_t b = bit_ % (8 * data_.size());
    data_[b / 8] ^= static_cast<std::byte>(1u << (b % 8));
  }
  RequestPtr inner_;
  std::span<std::byte> data_;
  bool flip_;
  uint64_t bit_;
};

class CorruptingLinks final : public FaultLinks {
 public:
  CorruptingLinks(Links& inner, Params p) : FaultLinks(inner), p_(p) {}
  RequestPtr irecv(int peer, Tag tag, std::span<std::byte> data) override {
    bool flip = false;
    if (peer == p_.from && !data.empty()) ++seen_;
    if (peer == p_.from && !data.empty() && !c_.done) {
      flip = c_.seen++ == p_.transfer;
      c_.done = flip;
      fired_ += flip ? 1 : 0;
    }
    return std::make_unique<FlipRequest>(inner_.irecv(peer, tag, data), data, flip, p_.bit);
  }

 private:
  Params p_;
  Counter c_;
};

std::unique_ptr<FaultLinks> wrap(Links& inner, const FaultSpec& f, int rank) {
  Scenario dummy;
  dummy.ranks = inner.size();
  const Params p = params(dummy, f);
  if (rank != p.to) return nullptr;
  return std::make_unique<CorruptingLinks>(inner, p);
}

ExpectSpec expected(const Scenario& s, const FaultSpec& f) {
  const Params p = params(s, f);
  ExpectSpec e;
  e.diagnosis = "corrupted_payload";
  e.edge = std::make_pair(p.from, p.to);
  return e;
}

FaultSpec random(const Scenario& s, uint64_t r) {
  FaultSpec f;
  f.kind = "corrupted_payload";
  const int from = static_cast<int>(r % static_cast<uint64_t>(s.ranks));
  f.fields["from"] = std::to_string(from);
  f.fields["to"] = std::to_string((from + 1) % s.ranks);  // a ring edge, so it carries data
  f.fields["transfer"] = "0";
  f.fields["bit"] = std::to_string((r >> 8) % 64);
  return f;
}

FaultSpec table_instance(const Scenario&) {
  FaultSpec f;
  f.kind = "corrupted_payload";
  f.fields = {{"from", "0"}, {"to", "1"}, {"transfer", "1"}, {"bit", "7"}};
  return f;
}

// A ring edge (r -> r+1), which only the ring is sure to use.
void adapt(Scenario& s) { s.impl = "ring"; }

std::string unfired(const Scenario& s, const FaultSpec& f, const FaultTally& t) {
  const Params p = params(s, f);
  if (t.seen == 0) return fmt::format("no non-empty transfer went from rank {} to rank {} in this run", p.from, p.to);
  return fmt::format("transfer {} (counted from 0) never came: {} non-empty transfer(s) went from rank {} to rank {}",
                     p.transfer, t.seen, p.from, p.to);
}

}  // namespace

extern const NemesisInfo kCorruptedPayload{"corrupted_payload", "one bit flipped in one transfer on a directed edge",
                                    validate, nullptr, wrap, expected, random, table_instance, nullptr, adapt,
                                    nullptr, nullptr, unfired};

}  // namespace collcheck
