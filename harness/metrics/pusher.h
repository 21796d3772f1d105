// The Pushgateway push, bounded (issue 30). prometheus-cpp's Gateway has no
// timeout: a gateway that accepted the connection and never answered hung
// the soak, the sweep and verify, on the main thread, past SIGTERM. The
// Pusher does the same HTTP PUT of the text exposition (it replaces the job's
// group, as Gateway::PushAdd did) through libcurl with a connect timeout and
// a total timeout, on its own thread:
// - push() hands the latest text over and returns at once; a push still in
//   flight is not queued behind (the newest text wins);
// - flush() waits for the last text to be pushed, at most `total` more;
// - failures are said once when they start and once when they end, in words
//   ("no answer within 10 s", "HTTP 500 from the gateway"), not once per
//   interval; the end of the run says how many pushes failed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace collcheck {

struct PushTarget {
  std::string url;  // http(s)://host:port/metrics/job/<job>[/instance/<i>]
  std::string shown;  // host:port, for messages
};

// --pushgateway [http://|https://]HOST:PORT and the job: the target, or
// std::invalid_argument naming the flag and what is allowed.
PushTarget push_target(const std::string& gateway, const std::string& job, const std::string& instance);

class Pusher {
 public:
  using Say = std::function<void(const std::string&)>;
  Pusher(PushTarget target, std::chrono::milliseconds connect, std::chrono::milliseconds total, Say say);
  ~Pusher();
  Pusher(const Pusher&) = delete;
  Pusher& operator=(const Pusher&) = delete;

  void push(std::string text);
  // Waits until the last text handed over was pushed (or failed); false when
  // it is still in flight after `wait`.
  bool flush(std::chrono::milliseconds wait);
  uint64_t attempts() const;
  uint64_t failures() const;
  // "" when the last push succeeded (or none was made), else why it failed.
  std::string last_error() const;

 private:
  void run();
  // One PUT; "" on success, else why not.
  std::string put(const std::string& text) const;

  PushTarget target_;
  std::chrono::milliseconds connect_, total_;
  Say say_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<std::string> pending_;
  bool busy_ = false, stop_ = false;
  uint64_t attempts_ = 0, failures_ = 0, failing_since_ = 0;
  std::string last_error_;
  std::thread thread_;
};

}  // namespace collcheck
