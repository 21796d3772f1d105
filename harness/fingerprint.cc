#include "harness/fingerprint.h"

#include <fmt/format.h>

namespace collcheck {

std::string CallFingerprint::describe() const {
  return fmt::format("all_reduce{} #{}{} count={} dtype={} op={} algo={}", async ? "_async" : "", seq,
                     tag.empty() ? "" : " tag=" + tag, count, dtype_name(dtype), op_name(op), algorithm);
}

CallRecord record_of(const CallFingerprint& f) {
  CallRecord r;
  r.seq = f.seq;
  r.tag = f.tag;
  r.count = f.count;
  r.dtype = f.dtype;
  r.op = f.op;
  r.async = f.async;
  r.impl = f.algorithm;
  return r;
}

}  // namespace collcheck
