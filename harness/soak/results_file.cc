#include "harness/soak/results_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "harness/soak/plan.h"

namespace collcheck {

using json = nlohmann::json;

ResultsFile::ResultsFile(std::string path, bool resume, std::string world) : path_(std::move(path)), world_(std::move(world)) {
  // O_NONBLOCK: a FIFO there is refused below, not waited on for a reader.
  fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC | O_NONBLOCK | (resume ? 0 : O_CREAT | O_EXCL), 0644);
  if (fd_ < 0 && errno == ENXIO) throw PlanError(fmt::format("--results {}: not a regular file", path_));
  if (fd_ < 0 && errno == EEXIST)
    throw PlanError(fmt::format("--results {}: the file exists; --resume continues that soak, or give another path", path_));
  if (fd_ < 0 && errno == ENOENT && resume)
    throw PlanError(fmt::format("--resume: no results file {} to continue", path_));
  if (fd_ < 0) throw PlanError(fmt::format("--results {}: cannot write the file: {}", path_, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw PlanError(fmt::format("--results {}: not a regular file", path_));
  }
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
  // A job killed just now may still be dying (its lock goes with it).
  bool locked = false;
  for (int i = 0; i < 50 && !(locked = ::flock(fd_, LOCK_EX | LOCK_NB) == 0); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  if (!locked) {
    ::close(fd_);
    throw PlanError(fmt::format("--results {}: another collcheck soak is writing this file (it holds the file's lock); "
                                "wait for it to end, or give another path",
                                path_));
  }
}

ResultsFile::~ResultsFile() {
  if (fd_ >= 0) ::close(fd_);  // and with it the lock
}

void ResultsFile::read_back(const std::function<void(const json&, size_t)>& each, Events& ev) {
  std::ifstream in(path_, std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto last_nl = text.rfind('\n');
  const size_t keep = last_nl == std::string::npos ? 0 : last_nl + 1;
  if (keep < text.size()) {
    ev.print("note: --resume: dropped an unfinished last line of {} bytes (the unit in flight when the soak was "
                    "killed)\n", text.size() - keep);
    std::filesystem::resize_file(path_, keep);
    text.resize(keep);
  }
  std::set<size_t> seen;
  size_t pos = 0, line = 0;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    const std::string l = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line;
    json j;
    try {
      j = json::parse(l);
    } catch (const json::exception& e) {
      throw PlanError(fmt::format("--resume: {}:{}: not a line of JSON ({})", path_, line, e.what()));
    }
    const std::string type = j.value("type", "");
    if (line == 1) {
      if (type != "start")
        throw PlanError(fmt::format("--resume: {}:1: not a collcheck soak results file (no start line)", path_));
      if (j.value("world", "") != world_)
        throw PlanError(fmt::format("--resume: {} holds a soak of the {} world; this one runs in the {} world (one "
                                    "world per results file: give another path)",
                                    path_, j.value("world", "?"), world_));
      continue;
    }
    if (type == "start")
      throw PlanError(fmt::format("--resume: {}:{}: a second start line (two soaks wrote this file)", path_, line));
    if (type == "unit" && j.contains("i") && j["i"].is_number_unsigned() && !seen.insert(j["i"].get<size_t>()).second) {
      ev.print("note: --resume: {}:{}: unit {} appears again; counted once\n", path_, line, j["i"].get<size_t>());
      continue;
    }
    each(j, line);
  }
  if (line == 0) throw PlanError(fmt::format("--resume: {} is empty", path_));
}

void ResultsFile::append(const json& j) {
  if (fd_ < 0 || !error_.empty()) return;
  const std::string line = j.dump() + '\n';
  size_t off = 0;
  while (off < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + off, line.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error_ = fmt::format("cannot write: {}", std::strerror(n < 0 ? errno : ENOSPC));
      // No partial line: --resume would drop it, a reader would choke on it.
      struct stat st {};
      if (off > 0 && ::fstat(fd_, &st) == 0) (void)!::ftruncate(fd_, st.st_size - static_cast<off_t>(off));
      return;
    }
    off += static_cast<size_t>(n);
  }
}

}  // namespace collcheck
