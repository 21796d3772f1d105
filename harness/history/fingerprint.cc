#include "harness/history/fingerprint.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace collcheck {

std::string CallFingerprint::describe() const {
  const std::string who = coll == Collective::Broadcast ? fmt::format(" root={}", peer)
                          : is_p2p(coll)                 ? fmt::format(" peer={}", peer)
                                                         : "";
  const std::string red = reduces(coll) ? fmt::format(" op={}", op_name(op)) : "";
  return fmt::format("{}{} #{}{} count={} dtype={}{}{} algo={}", collective_name(coll), async ? "_async" : "", seq,
                     tag.empty() ? "" : " tag=" + tag, count, dtype_name(dtype), red, who, algorithm);
}

CallRecord record_of(const CallFingerprint& f) {
  CallRecord r;
  r.seq = f.seq;
  r.tag = f.tag;
  r.count = f.count;
  r.dtype = f.dtype;
  r.op = f.op;
  r.async = f.async;
  r.blocking_matters = f.blocking_matters;
  r.impl = f.algorithm;
  r.coll = f.coll;
  r.peer = f.peer;
  return r;
}

std::string fingerprint_to_json(const CallFingerprint& f) {
  return nlohmann::json{{"seq", f.seq},   {"tag", f.tag},         {"count", f.count}, {"dtype", static_cast<int>(f.dtype)},
                        {"op", static_cast<int>(f.op)}, {"algorithm", f.algorithm}, {"async", f.async},
                        {"coll", static_cast<int>(f.coll)}, {"peer", f.peer}, {"blocking_matters", f.blocking_matters}}
      .dump();
}

CallFingerprint fingerprint_from_json(const std::string& text) {
  const auto j = nlohmann::json::parse(text);
  CallFingerprint f;
  f.seq = j.at("seq").get<uint64_t>();
  f.tag = j.at("tag").get<std::string>();
  f.count = j.at("count").get<size_t>();
  f.dtype = static_cast<DType>(j.at("dtype").get<int>());
  f.op = static_cast<RedOp>(j.at("op").get<int>());
  f.algorithm = j.at("algorithm").get<std::string>();
  f.async = j.at("async").get<bool>();
  f.coll = static_cast<Collective>(j.value("coll", 0));
  f.peer = j.value("peer", -1);
  f.blocking_matters = j.value("blocking_matters", false);
  return f;
}

}  // namespace collcheck
