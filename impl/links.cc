#include "impl/links.h"

#include <fmt/format.h>

namespace collcheck {

std::string describe_tag(Tag tag) {
  return fmt::format("tag {:#x} (call #{}, channel {})", tag, call_of_tag(tag), channel_of_tag(tag));
}

void wait_all(std::vector<RequestPtr>& requests, Deadline deadline) {
  for (auto& r : requests)
    if (r) r->wait(deadline);
}

}  // namespace collcheck
