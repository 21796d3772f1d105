#include "impl/links.h"

#include <fmt/format.h>

namespace collcheck {

std::string describe_tag(Tag tag) {
  // Communicators put the call's sequence number above the low 8 bits and the
  // algorithm's channel in them.
  return fmt::format("tag {:#x} (call #{}, channel {})", tag, tag >> 8, tag & 0xff);
}

void wait_all(std::vector<RequestPtr>& requests, Deadline deadline) {
  for (auto& r : requests)
    if (r) r->wait(deadline);
}

}  // namespace collcheck
