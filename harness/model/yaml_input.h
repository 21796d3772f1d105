// What every YAML input of collcheck shares (scenarios, soak plans): a file
// read up to its size limit, a text checked before yaml-cpp reads it (NUL
// bytes, nesting deeper than the limit), and the reading of fields with
// "file:line: field: what is wrong; allowed: ..." errors (issue 13). `Error`
// is the exception each input throws (ScenarioError, PlanError).
#pragma once

#include <fmt/format.h>
#include "harness/model/utf8.h"
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <set>
#include <vector>
#include <string>

namespace collcheck {

template <typename Error>
class YamlFields {
 public:
  explicit YamlFields(std::string file) : file_(std::move(file)) {}

  [[noreturn]] void fail(const YAML::Node& n, const std::string& field, const std::string& what) const {
    const int line = n.IsDefined() ? n.Mark().line + 1 : 0;
    throw Error(fmt::format("{}:{}: {}: {}", file_, line, field, what));
  }

  // A mapping's key: a plain name (a complex key such as `? [a, b]` is not
  // one), said only once in its mapping (yaml-cpp keeps both and reads the first).
  std::string key(const YAML::Node& k, const std::string& field, std::set<std::string>& seen) const {
    if (!k.IsScalar()) fail(k, field, "expected a plain key (a name); a complex key (a list or a mapping) is not one");
    const std::string name = k.Scalar();
    // Bytes that are not UTF-8 are written back as they are and read again
    // as U+FFFD, so such a key would not survive the YAML round trip.
    if (!valid_utf8(name)) fail(k, field, "a key is not valid UTF-8 text");
    if (!seen.insert(name).second) fail(k, field, fmt::format("duplicate key '{}': say each key once", name));
    return name;
  }

  void only_keys(const YAML::Node& n, const std::string& field, std::initializer_list<const char*> allowed) const {
    only_keys(n, field, std::vector<const char*>(allowed));
  }
  void only_keys(const YAML::Node& n, const std::string& field, const std::vector<const char*>& allowed) const {
    if (!n.IsMap()) fail(n, field, "expected a mapping");
    std::set<std::string> ok(allowed.begin(), allowed.end()), seen;
    for (const auto& kv : n) {
      const auto key = this->key(kv.first, field, seen);
      if (!ok.count(key)) {
        std::string list;
        for (const char* a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
        fail(kv.first, field, fmt::format("unknown key '{}'; allowed: {}", key, list));
      }
    }
  }

  template <typename T>
  T scalar(const YAML::Node& n, const std::string& field, const char* expected) const {
    if (!n.IsScalar()) fail(n, field, fmt::format("expected {}", expected));
    try {
      return n.as<T>();
    } catch (const YAML::Exception&) {
      fail(n, field, fmt::format("expected {}, got '{}'", expected, n.Scalar()));
    }
  }

  // A name that must be one of `choices`, each {name, what it means} (the
  // meaning may be empty): returns the name's index. The error names the
  // field and lists the choices: "unknown <what> 'x'; allowed: a (...), b".
  struct Choice {
    const char* name;
    const char* meaning = "";
  };
  size_t one_of(const YAML::Node& n, const std::string& field, const char* what,
                std::initializer_list<Choice> choices) const {
    std::string names, allowed;
    for (const Choice& c : choices) {
      names += fmt::format("{}{}", names.empty() ? "" : " or ", c.name);
      allowed += fmt::format("{}{}{}", allowed.empty() ? "" : ", ", c.name, *c.meaning ? fmt::format(" ({})", c.meaning) : "");
    }
    const auto v = scalar<std::string>(n, field, names.c_str());
    size_t i = 0;
    for (const Choice& c : choices) {
      if (v == c.name) return i;
      ++i;
    }
    fail(n, field, fmt::format("unknown {} '{}'; allowed: {}", what, v, allowed));
  }

  int integer(const YAML::Node& n, const std::string& field, long lo, long hi) const {
    const auto desc = fmt::format("an integer in [{}, {}]", lo, hi);
    const long v = scalar<long>(n, field, desc.c_str());
    if (v < lo || v > hi) fail(n, field, fmt::format("expected {}, got {}", desc, v));
    return static_cast<int>(v);
  }

  double number(const YAML::Node& n, const std::string& field, double lo, double hi) const {
    const double v = scalar<double>(n, field, "a number");
    if (!(v >= lo && v <= hi)) fail(n, field, fmt::format("expected a number in [{}, {}], got {}", lo, hi, v));
    return v;
  }

 protected:
  std::string file_;
};

// What yaml-cpp reads badly or not at all, said before it reads: a NUL byte
// (binary data), and lists and mappings nested deeper than the limit (yaml-cpp
// says "bad file", or recurses until the stack is gone).
template <typename Error>
void prescan_yaml(const std::string& text, const std::string& file, int max_depth) {
  int line = 1, depth = 0, indent = 0;
  bool at_line_start = true, comment = false;
  char quote = 0, prev = ' ';
  bool escaped = false;
  for (char ch : text) {
    if (ch == '\0')
      throw Error(fmt::format("{}:{}: a NUL byte: this is not a YAML text file", file, line));
    if (ch == '\n') {
      ++line;
      at_line_start = true;
      comment = false;
      indent = 0;
      continue;
    }
    if (at_line_start && ch == ' ' && !quote) {
      if (++indent / 2 > max_depth)
        throw Error(fmt::format("{}:{}: nested deeper than {} levels (indentation), the input limit", file,
                                        line, max_depth));
      continue;
    }
    const char before = at_line_start ? ' ' : prev;
    at_line_start = false;
    prev = ch;
    if (comment) continue;
    if (quote) {
      if (escaped) escaped = false;
      else if (quote == '"' && ch == '\\') escaped = true;  // \" does not end the string
      else if (ch == quote) quote = 0;
      continue;
    }
    // As YAML has it: '#' starts a comment only after a space (tag: a#1 is a
    // plain scalar), and a quote starts a quoted scalar only where a scalar
    // starts (rank0's is plain).
    const bool scalar_start = before == ' ' || before == '\t' || before == '[' || before == '{' || before == ',';
    if (ch == '#' && (before == ' ' || before == '\t')) comment = true;
    else if ((ch == '"' || ch == '\'') && scalar_start) quote = ch;
    else if (ch == '[' || ch == '{') {
      if (++depth > max_depth)
        throw Error(
            fmt::format("{}:{}: lists and mappings nested deeper than {} levels, the input limit", file, line, max_depth));
    } else if ((ch == ']' || ch == '}') && depth > 0) {
      --depth;
    }
  }
}


// The file's text, at most `max_bytes` (a device such as /dev/zero never
// ends); `what` says what to give instead of a directory, `flag` what raises
// the limit.
template <typename Error>
std::string read_input_file(const std::string& path, size_t max_bytes, const std::string& what, const std::string& flag) {
  // What the path is, before it is opened: a FIFO blocks the open until a
  // writer comes, a device (/dev/zero) never ends, a symlink loop is an
  // error, not an abort. Only a regular file is read.
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec) throw Error(fmt::format("{}: cannot read {}: {}", path, what, ec.message()));
  if (std::filesystem::is_directory(st)) throw Error(fmt::format("{}: is a directory; give {}", path, what));
  if (!std::filesystem::is_regular_file(st)) {
    using std::filesystem::file_type;
    const file_type t = st.type();
    const char* kind = t == file_type::fifo        ? "a FIFO"
                       : t == file_type::socket    ? "a socket"
                       : t == file_type::block     ? "a block device"
                       : t == file_type::character ? "a character device"
                                                   : "not a regular file";
    throw Error(fmt::format("{}: is {}, not a regular file; give {}", path, kind, what));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot read {}", path, what));
  std::string text;
  char block[1 << 16];
  while (text.size() <= max_bytes && in.read(block, sizeof block).gcount() > 0)
    text.append(block, static_cast<size_t>(in.gcount()));
  if (text.size() > max_bytes)
    throw Error(fmt::format("{}: larger than {} bytes, the input limit ({} raises it)", path, max_bytes, flag));
  return text;
}

// Checks and loads `text`, then reads it with `read`; a shape `read` did not
// foresee is still bad input (Error), never an abort.
template <typename T, typename Error>
T parse_yaml_input(const std::string& text, const std::string& file, int max_depth,
                   const std::function<T(const YAML::Node&)>& read) {
  prescan_yaml<Error>(text, file, max_depth);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw Error(fmt::format("{}:{}: syntax: {}", file, e.mark.line + 1, e.msg));
  }
  try {
    return read(root);
  } catch (const YAML::Exception& e) {
    throw Error(fmt::format("{}:{}: {}", file, e.mark.is_null() ? 0 : e.mark.line + 1, e.msg));
  }
}

}  // namespace collcheck
