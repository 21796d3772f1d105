// The call sites of collcheck's MPI interposer dumps, from object + offset
// (what the interposer can know cheaply in the program) to file, line and
// function, by binutils' addr2line (run_job.h). A site addr2line cannot place
// (no debug information, no addr2line) keeps its object + offset.
#include <poll.h>
#include <unistd.h>

#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "harness/model/atomic_file.h"
#include "harness/model/child_process.h"
#include "harness/run/run_job.h"

namespace collcheck {

namespace {

using nlohmann::json;

struct Place {
  std::string function, file;
  int64_t line = 0;
};

// addr2line -f -C -e OBJECT addr...: two lines per address, function then
// file:line ("??" and "??:0" where unknown). Bounded: 30 s.
std::map<uint64_t, Place> places_in(const std::string& object, const std::set<uint64_t>& offsets) {
  std::vector<std::string> args = {"addr2line", "-f", "-C", "-e", object};
  for (uint64_t o : offsets) args.push_back(fmt::format("{:#x}", o > 0 ? o - 1 : o));  // the call, not the return
  std::map<uint64_t, Place> out;
  ChildProcess child;
  try {
    child = start_child(args, {}, true);
  } catch (const std::runtime_error&) {
    return out;
  }
  std::string text;
  char buf[65536];
  const auto t0 = std::chrono::steady_clock::now();
  for (;;) {
    pollfd p{child.out_fd, POLLIN, 0};
    if (::poll(&p, 1, 200) > 0) {
      const ssize_t n = ::read(child.out_fd, buf, sizeof buf);
      if (n <= 0) break;
      text.append(buf, static_cast<size_t>(n));
    }
    if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(30)) {
      stop_child(child, 1);
      ::close(child.out_fd);
      return out;
    }
  }
  ::close(child.out_fd);
  if (wait_child(child) != 0) return out;
  std::istringstream in(text);
  for (uint64_t o : offsets) {
    std::string fn, where;
    if (!std::getline(in, fn) || !std::getline(in, where)) break;
    const auto colon = where.rfind(':');
    if (fn == "??" || colon == std::string::npos || where.starts_with("??")) continue;
    Place pl{fn, where.substr(0, colon), 0};
    try {
      pl.line = std::stoll(where.substr(colon + 1));
    } catch (const std::exception&) {
      pl.line = 0;
    }
    out[o] = pl;
  }
  return out;
}

uint64_t offset_of(const json& frame) {
  if (!frame.contains("offset") || !frame["offset"].is_string()) return 0;
  try {
    return std::stoull(frame["offset"].get<std::string>(), nullptr, 16);
  } catch (const std::exception&) {
    return 0;
  }
}

}  // namespace

void resolve_call_sites(const std::string& dir) {
  std::map<std::string, json> dumps;
  std::map<std::string, std::set<uint64_t>> wanted;  // object -> offsets
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (!name.starts_with("mpi_trace_rank_") || !name.ends_with(".json")) continue;
    std::ifstream f(e.path());
    json d = json::parse(f, nullptr, false);
    if (d.is_discarded() || !d.contains("entries") || !d["entries"].is_array()) continue;
    for (const json& entry : d["entries"])
      for (const json& fr : entry.value("frames", json::array()))
        if (fr.contains("offset") && fr.value("line", 0) == 0)
          wanted[fr.value("filename", "")].insert(offset_of(fr));
    dumps[e.path().string()] = std::move(d);
  }
  std::map<std::string, std::map<uint64_t, Place>> found;
  for (const auto& [object, offsets] : wanted)
    if (!object.empty()) found[object] = places_in(object, offsets);
  for (auto& [path, d] : dumps) {
    bool changed = false;
    for (json& entry : d["entries"]) {
      if (!entry.contains("frames")) continue;
      for (json& fr : entry["frames"]) {
        const auto obj = found.find(fr.value("filename", ""));
        if (obj == found.end()) continue;
        const auto pl = obj->second.find(offset_of(fr));
        if (pl == obj->second.end()) continue;
        fr["object"] = fr["filename"];
        fr["filename"] = pl->second.file;
        fr["line"] = pl->second.line;
        fr["name"] = pl->second.function;
        changed = true;
      }
    }
    if (changed) write_file_atomically(path, d.dump(1));
  }
}

}  // namespace collcheck
