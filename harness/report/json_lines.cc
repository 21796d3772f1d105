// The JSON-lines sink (--report jsonl=PATH): every event of the run, one JSON
// object a line, written and flushed as it happens, so that a run cut short
// still leaves what it did, and a dashboard or a script can follow the file.
// Each line is event_json (events.h) with "t", seconds since the sink opened.
#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "harness/report/events.h"

namespace collcheck {

namespace {
class JsonLinesSink final : public EventSink {
 public:
  explicit JsonLinesSink(std::string path) : path_(std::move(path)), start_(std::chrono::steady_clock::now()) {
    fp_ = std::fopen(path_.c_str(), "w");
    if (!fp_) throw std::runtime_error(fmt::format("--report jsonl={}: cannot write: {}", path_, std::strerror(errno)));
  }
  ~JsonLinesSink() override {
    if (fp_) std::fclose(fp_);
  }
  void on(const Event& e) override {
    if (!fp_) return;
    nlohmann::json j = event_json(e);
    j["t"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    const std::string line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    if (std::fwrite(line.data(), 1, line.size(), fp_) != line.size() || std::fflush(fp_) != 0) failed_ = errno;
  }
  void close() override {
    if (!fp_) return;
    if (std::fclose(fp_) != 0 && !failed_) failed_ = errno;
    fp_ = nullptr;
    if (failed_) throw std::runtime_error(fmt::format("--report jsonl={}: {}", path_, std::strerror(failed_)));
  }

 private:
  std::string path_;
  std::chrono::steady_clock::time_point start_;
  std::FILE* fp_ = nullptr;
  int failed_ = 0;
};
}  // namespace

std::shared_ptr<EventSink> json_lines_sink(const std::string& path) { return std::make_shared<JsonLinesSink>(path); }

}  // namespace collcheck
