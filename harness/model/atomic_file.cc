#include "harness/model/atomic_file.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace collcheck {

namespace {

// Writes `text` into an existing file in place (a character device:
// /dev/null, /dev/stdout), checking the write and the close.
void write_in_place(const std::string& path, std::string_view text, const char* mode = "w") {
  std::FILE* f = std::fopen(path.c_str(), mode);
  if (!f) throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0;
  const int err = errno;
  if (std::fclose(f) != 0 || !ok)
    throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(ok ? errno : err)));
}

const char* refused_kind(const std::filesystem::file_status& st) {
  namespace fs = std::filesystem;
  if (!fs::exists(st) || fs::is_regular_file(st) || st.type() == fs::file_type::character) return nullptr;
  return fs::is_directory(st)                ? "a directory"
         : st.type() == fs::file_type::fifo   ? "a FIFO"
         : st.type() == fs::file_type::socket ? "a socket"
         : st.type() == fs::file_type::block  ? "a block device"
                                              : "not a regular file";
}

}  // namespace

void append_to_file(const std::string& path, std::string_view text) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (const char* kind = ec ? nullptr : refused_kind(st))
    throw std::runtime_error(fmt::format("cannot write {}: it is {}; give a file's path", path, kind));
  write_in_place(path, text, "a");
}

void write_file_atomically(const std::string& path, std::string_view text) {
  namespace fs = std::filesystem;
  // What is there decides how it is written: a symlink is followed (the link
  // stays, its target is replaced), a character device is written in place
  // (renaming over /dev/full as root replaced the device with a file), a
  // FIFO, a socket, a block device or a directory is refused (a FIFO would
  // block until a reader came).
  std::error_code ec;
  fs::path target = path;
  for (int hops = 0; fs::is_symlink(fs::symlink_status(target, ec)); ++hops) {  // a dangling link too
    if (hops == 40) throw std::runtime_error(fmt::format("cannot write {}: too many levels of symbolic links", path));
    const fs::path next = fs::read_symlink(target, ec);
    if (ec) throw std::runtime_error(fmt::format("cannot write {}: {}", path, ec.message()));
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  const auto st = fs::status(target, ec);
  if (!ec && st.type() == fs::file_type::character) return write_in_place(target.string(), text);
  if (const char* kind = ec ? nullptr : refused_kind(st))
    throw std::runtime_error(fmt::format("cannot write {}: it is {}; give a file's path", path, kind));
  const std::string tmp = target.string() + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) throw std::runtime_error(fmt::format("cannot write {}: {}", tmp, std::strerror(errno)));
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0;
  if (std::fclose(f) != 0 || !ok || std::rename(tmp.c_str(), target.string().c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw std::runtime_error(fmt::format("cannot write {}: {}", path, std::strerror(err)));
  }
}

}  // namespace collcheck
