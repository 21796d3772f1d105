// Bad input from the user (a flag, a value, a file, a run that cannot fit):
// every command turns it into one line naming the field and exit code 2.
// Thrown by the command line and by the jobs it hands flags to.
#pragma once

#include <stdexcept>

namespace collcheck {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace collcheck
