// Links that record every transfer and every blocking wait into a flight
// recorder (recording_links).
#include "harness/history/flight_recorder.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <limits>
#include <optional>
#include <stdexcept>

namespace collcheck {

namespace {

class RecordingRequest final : public LinkRequest {
 public:
  RecordingRequest(RequestPtr inner, FlightRecorder& rec, TransferRecord t, std::span<const std::byte> data)
      : inner_(std::move(inner)), rec_(rec), t_(t), data_(data) {}
  bool test() override {
    if (done_) return true;
    if (!inner_->test()) return false;
    finish();
    return true;
  }
  void wait(Deadline deadline) override {
    if (done_) return;
    rec_.blocked(t_.send ? t_.dst : t_.src, t_.send, t_.tag);
    try {
      inner_->wait(deadline);
    } catch (...) {
      // Stay "blocked" in the record: the dump shows what this rank was waiting for.
      rec_.wait_failed();
      throw;
    }
    rec_.unblocked();
    finish();
  }

 private:
  void finish() {
    done_ = true;
    t_.t_completed = rec_.now();
    const std::optional<uint64_t> moved = inner_->moved_checksum();
    t_.checksum = moved ? *moved : payload_checksum(data_.data(), data_.size());
    rec_.transfer(t_);
  }
  RequestPtr inner_;
  FlightRecorder& rec_;
  TransferRecord t_;
  std::span<const std::byte> data_;
  bool done_ = false;
};

class RecordingLinks final : public LinksDecorator {
 public:
  RecordingLinks(Links& inner, FlightRecorder& rec) : LinksDecorator(inner), rec_(rec) {}
  RequestPtr isend(int peer, Tag tag, std::span<const std::byte> data) override {
    TransferRecord t{rank(), peer, tag, next_ordinal({peer, tag, true}), data.size(), rec_.now(), -1, 0, true};
    return std::make_unique<RecordingRequest>(inner_.isend(peer, tag, data), rec_, t, data);
  }
  RequestPtr irecv(int peer, Tag tag, std::span<std::byte> data) override {
    TransferRecord t{peer, rank(), tag, next_ordinal({peer, tag, false}), data.size(), rec_.now(), -1, 0, false};
    return std::make_unique<RecordingRequest>(inner_.irecv(peer, tag, data), rec_, t, data);
  }

 private:
  using Key = std::tuple<int, Tag, bool>;  // (peer, tag, send)
  // The n-th transfer of its (peer, tag, direction), from 0. The counters of
  // the last few keys are found without a walk of the map: a call's
  // transfers use a handful of keys hundreds of times (a 128-rank ring call:
  // 254 transfers, 2 keys), and the map holds every call's.
  uint64_t next_ordinal(const Key& key) {
    for (auto& [k, counter] : recent_)
      if (counter != nullptr && k == key) return (*counter)++;
    uint64_t* counter = &ordinal_[key];  // a map's values stay where they are
    recent_[next_recent_] = {key, counter};
    next_recent_ = (next_recent_ + 1) % recent_.size();
    return (*counter)++;
  }
  FlightRecorder& rec_;
  std::map<Key, uint64_t> ordinal_;
  std::array<std::pair<Key, uint64_t*>, 8> recent_{};
  size_t next_recent_ = 0;
};

}  // namespace

std::unique_ptr<Links> recording_links(Links& inner, FlightRecorder& rec) {
  return std::make_unique<RecordingLinks>(inner, rec);
}

}  // namespace collcheck
