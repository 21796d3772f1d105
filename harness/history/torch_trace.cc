#include "harness/history/torch_trace.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <cstdlib>
#include <cstring>
#include <set>

#include <nlohmann/json.hpp>

#include "harness/model/pickle.h"
#include "harness/model/yaml_input.h"

namespace collcheck {

namespace {

using nlohmann::json;

constexpr size_t kMaxDumpBytes = size_t{256} << 20;

struct Fields {
  const std::string& file;
  [[noreturn]] void bad(const std::string& where, const std::string& what) const {
    throw TorchTraceError(fmt::format("{}: {}: {}", file, where, what));
  }
  const json& at(const json& o, const char* key, const std::string& where) const {
    if (!o.is_object()) bad(where, "expected a dict");
    const auto it = o.find(key);
    if (it == o.end()) bad(where.empty() ? key : where + "." + key, "missing");
    return *it;
  }
  const json* maybe(const json& o, const char* key) const {
    const auto it = o.find(key);
    return it == o.end() || it->is_null() ? nullptr : &*it;
  }
  std::string str(const json& v, const std::string& where) const {
    if (!v.is_string()) bad(where, fmt::format("expected a string, got {}", v.type_name()));
    return v.get<std::string>();
  }
  int64_t integer(const json& v, const std::string& where) const {
    if (v.is_number_integer() && !(v.is_number_unsigned() && v.get<uint64_t>() > uint64_t{INT64_MAX}))
      return v.get<int64_t>();
    if (v.is_boolean()) return v.get<bool>();
    bad(where, fmt::format("expected an integer, got {}", v.is_number() ? v.dump() : std::string(v.type_name())));
  }
  bool boolean(const json& v, const std::string& where) const {
    if (!v.is_boolean()) bad(where, fmt::format("expected True or False, got {}", v.type_name()));
    return v.get<bool>();
  }
  std::vector<std::string> strings(const json& v, const std::string& where) const {
    if (!v.is_array()) bad(where, fmt::format("expected a list of strings, got {}", v.type_name()));
    std::vector<std::string> out;
    for (size_t k = 0; k < v.size(); ++k) out.push_back(str(v[k], fmt::format("{}[{}]", where, k)));
    return out;
  }
  std::vector<std::vector<int64_t>> shapes(const json& v, const std::string& where) const {
    if (!v.is_array()) bad(where, fmt::format("expected a list of shapes, got {}", v.type_name()));
    std::vector<std::vector<int64_t>> out;
    for (size_t k = 0; k < v.size(); ++k) {
      const std::string w = fmt::format("{}[{}]", where, k);
      if (!v[k].is_array()) bad(w, fmt::format("expected a list of dims, got {}", v[k].type_name()));
      std::vector<int64_t> dims;
      for (size_t j = 0; j < v[k].size(); ++j) {
        const int64_t d = integer(v[k][j], fmt::format("{}[{}]", w, j));
        if (d < 0) bad(fmt::format("{}[{}]", w, j), fmt::format("a dim of {}", d));
        dims.push_back(d);
      }
      out.push_back(std::move(dims));
    }
    return out;
  }
  // pg_config's ranks: "[0, 1, 2]" (the pickle writes the list as text) or a list.
  std::vector<int> ranks(const json& v, const std::string& where) const {
    std::vector<int> out;
    auto rank = [&](int64_t r) {
      if (r < 0 || r > 1'000'000) bad(where, fmt::format("rank {} is out of range (0 to 1000000)", r));
      out.push_back(static_cast<int>(r));
    };
    if (v.is_array()) {
      for (size_t k = 0; k < v.size(); ++k) rank(integer(v[k], fmt::format("{}[{}]", where, k)));
      return out;
    }
    const std::string s = str(v, where);
    size_t k = 0;
    auto skip = [&] {
      while (k < s.size() && std::isspace(static_cast<unsigned char>(s[k]))) ++k;
    };
    skip();
    if (k == s.size() || s[k] != '[') bad(where, fmt::format("expected a list of ranks such as \"[0, 1]\", got \"{}\"", s.substr(0, 60)));
    ++k;
    skip();
    while (k < s.size() && s[k] != ']') {
      size_t j = k;
      while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      if (j == k || j - k > 7) bad(where, fmt::format("expected a list of ranks such as \"[0, 1]\", got \"{}\"", s.substr(0, 60)));
      rank(std::stoll(s.substr(k, j - k)));
      k = j;
      skip();
      if (k < s.size() && s[k] == ',') ++k;
      skip();
    }
    if (k >= s.size()) bad(where, "the list of ranks is not closed");
    return out;
  }
};

// The number a file name ends in: nccl_trace_rank_12 -> 12, rank_3.json -> 3.
std::optional<int> rank_of_name(const std::string& name) {
  std::string stem = name;
  for (const char* ext : {".json", ".pkl", ".pickle"})
    if (stem.size() > std::strlen(ext) && stem.ends_with(ext)) stem.resize(stem.size() - std::strlen(ext));
  size_t k = stem.size();
  while (k > 0 && std::isdigit(static_cast<unsigned char>(stem[k - 1]))) --k;
  if (k == stem.size() || stem.size() - k > 7) return std::nullopt;
  return std::stoi(stem.substr(k));
}

[[noreturn]] void bad_number(const Fields& f, const std::string& where, const std::string& t) {
  f.bad(where, fmt::format("expected an integer, got \"{}\"", t.substr(0, 40)));
}

// "2.10" -> 10; anything but 2.<0..kTorchTraceMaxMinor> is refused by name.
int version_minor(const std::string& v, const Fields& f) {
  int minor = -1;
  if (v.size() >= 3 && v.size() <= 4 && v.starts_with("2.") &&
      std::all_of(v.begin() + 2, v.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
    minor = std::stoi(v.substr(2));
  if (minor < 0 || minor > kTorchTraceMaxMinor)
    f.bad("version", fmt::format("format version '{}' is not one this reader knows (known: 2.0 to 2.{}; 2.10 is what "
                                 "torch 2.14 writes); it is not read, rather than read wrong",
                                 v.substr(0, 40), kTorchTraceMaxMinor));
  return minor;
}

TorchDump from_json(const json& d, const std::string& file) {
  const Fields f{file};
  TorchDump t;
  t.file = file;
  if (!d.is_object()) f.bad("the dump", fmt::format("expected a dict, got {}", d.type_name()));
  const json& ver = f.at(d, "version", "");
  t.version = ver.is_number() ? ver.dump() : f.str(ver, "version");
  t.version_minor = version_minor(t.version, f);
  for (const char* key : {"nccl_version", "comm_lib_version"})
    if (const json* v = f.maybe(d, key); v && t.nccl_version.empty())
      t.nccl_version = v->is_string() ? v->get<std::string>() : v->dump();
  if (const json* r = f.maybe(d, "rank")) {
    const int64_t rank = f.integer(*r, "rank");
    if (rank < 0 || rank > 1'000'000) f.bad("rank", fmt::format("{} is out of range (0 to 1000000)", rank));
    t.rank = static_cast<int>(rank);
  }
  if (const json* v = f.maybe(d, "collcheck_dump_reason")) t.collcheck_reason = f.str(*v, "collcheck_dump_reason");
  const json& cfg = f.at(d, "pg_config", "");
  if (!cfg.is_object()) f.bad("pg_config", fmt::format("expected a dict, got {}", cfg.type_name()));
  for (const auto& [key, g] : cfg.items()) {
    const std::string w = "pg_config[" + key + "]";
    TorchGroup tg;
    tg.name = key;
    if (const json* n = f.maybe(g, "name")) tg.name = f.str(*n, w + ".name");
    if (const json* n = f.maybe(g, "desc")) tg.desc = f.str(*n, w + ".desc");
    tg.ranks = f.ranks(f.at(g, "ranks", w), w + ".ranks");
    t.groups[tg.name] = std::move(tg);
  }
  if (const json* st = f.maybe(d, "pg_status")) {
    if (!st->is_object()) f.bad("pg_status", fmt::format("expected a dict, got {}", st->type_name()));
    t.has_status = true;
    for (const auto& [key, g] : st->items()) {
      const std::string w = "pg_status[" + key + "]";
      int64_t id = -1;
      if (!key.empty() && key.size() <= 9 && std::all_of(key.begin(), key.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
        id = std::stoll(key);
      else
        f.bad(w, "expected a process group id (a number) as the key");
      TorchGroupStatus s;
      // The JSON variant writes these numbers as strings ("3").
      auto number = [&](const json& v, const std::string& where) -> int64_t {
        if (v.is_string()) {
          const std::string text = v.get<std::string>();
          char* end = nullptr;
          const long long n = text.empty() || text.size() > 20 ? 0 : std::strtoll(text.c_str(), &end, 10);
          if (text.empty() || text.size() > 20 || !end || *end) bad_number(f, where, text);
          return n;
        }
        return f.integer(v, where);
      };
      if (const json* v = f.maybe(g, "last_enqueued_collective")) s.enqueued = number(*v, w + ".last_enqueued_collective");
      if (const json* v = f.maybe(g, "last_started_collective")) s.started = number(*v, w + ".last_started_collective");
      if (const json* v = f.maybe(g, "last_completed_collective")) s.completed = number(*v, w + ".last_completed_collective");
      t.status[id] = s;
    }
  }
  const json& entries = f.at(d, "entries", "");
  if (!entries.is_array()) f.bad("entries", fmt::format("expected a list, got {}", entries.type_name()));
  for (size_t k = 0; k < entries.size(); ++k) {
    const json& e = entries[k];
    const std::string w = fmt::format("entries[{}]", k);
    TorchEntry te;
    te.record_id = static_cast<uint64_t>(std::max<int64_t>(0, f.integer(f.at(e, "record_id", w), w + ".record_id")));
    if (const json* v = f.maybe(e, "pg_id")) te.pg_id = f.integer(*v, w + ".pg_id");
    const json& pg = f.at(e, "process_group", w);
    if (!pg.is_array() || pg.size() != 2) f.bad(w + ".process_group", "expected (name, desc)");
    te.pg_name = f.str(pg[0], w + ".process_group[0]");
    te.pg_desc = f.str(pg[1], w + ".process_group[1]");
    te.collective_seq = f.integer(f.at(e, "collective_seq_id", w), w + ".collective_seq_id");
    if (const json* v = f.maybe(e, "p2p_seq_id")) te.p2p_seq = f.integer(*v, w + ".p2p_seq_id");
    if (const json* v = f.maybe(e, "is_p2p")) te.p2p = f.boolean(*v, w + ".is_p2p");
    if (te.collective_seq < 0 || te.p2p_seq < 0) f.bad(w, "a negative sequence number");
    te.op = f.str(f.at(e, "profiling_name", w), w + ".profiling_name");
    te.input_sizes = f.shapes(f.at(e, "input_sizes", w), w + ".input_sizes");
    te.output_sizes = f.shapes(f.at(e, "output_sizes", w), w + ".output_sizes");
    te.input_dtypes = f.strings(f.at(e, "input_dtypes", w), w + ".input_dtypes");
    te.output_dtypes = f.strings(f.at(e, "output_dtypes", w), w + ".output_dtypes");
    te.state = f.str(f.at(e, "state", w), w + ".state");
    if (te.state != "scheduled" && te.state != "started" && te.state != "completed")
      f.bad(w + ".state", fmt::format("'{}'; allowed: scheduled, started, completed", te.state.substr(0, 40)));
    if (const json* v = f.maybe(e, "retired")) te.retired = f.boolean(*v, w + ".retired");
    te.created_ns = f.integer(f.at(e, "time_created_ns", w), w + ".time_created_ns");
    // None in the pickle, 0 in the JSON variant: not seen.
    if (const json* v = f.maybe(e, "time_discovered_started_ns"))
      if (const int64_t ns = f.integer(*v, w + ".time_discovered_started_ns"); ns > 0) te.started_ns = ns;
    if (const json* v = f.maybe(e, "time_discovered_completed_ns"))
      if (const int64_t ns = f.integer(*v, w + ".time_discovered_completed_ns"); ns > 0) te.completed_ns = ns;
    if (const json* v = f.maybe(e, "timeout_ms")) te.timeout_ms = f.integer(*v, w + ".timeout_ms");
    if (const json* fr = f.maybe(e, "frames")) {
      if (!fr->is_array()) f.bad(w + ".frames", fmt::format("expected a list, got {}", fr->type_name()));
      for (size_t j = 0; j < fr->size() && j < 64; ++j) {
        const std::string wf = fmt::format("{}.frames[{}]", w, j);
        const json& x = (*fr)[j];
        TorchFrame tf;
        if (const json* v = f.maybe(x, "filename")) tf.file = f.str(*v, wf + ".filename");
        if (const json* v = f.maybe(x, "name")) tf.name = f.str(*v, wf + ".name");
        if (const json* v = f.maybe(x, "line")) tf.line = f.integer(*v, wf + ".line");
        te.frames.push_back(std::move(tf));
      }
    }
    t.entries.push_back(std::move(te));
  }
  return t;
}

}  // namespace

bool looks_like_torch_trace(const std::string& bytes) {
  if (!bytes.empty() && static_cast<unsigned char>(bytes[0]) == 0x80) return true;  // a pickle's PROTO
  const auto head = std::string_view(bytes).substr(0, 1 << 16);
  const auto first = head.find_first_not_of(" \t\r\n");
  // A writer that sorts its keys (nlohmann-json: torch's dump_json, the MPI
  // interposer) puts "entries" first and "pg_config" after every entry.
  return first != std::string_view::npos && head[first] == '{' &&
         (head.find("\"entries\"") != std::string_view::npos || head.find("\"pg_config\"") != std::string_view::npos);
}

TorchDump parse_torch_trace(const std::string& bytes, const std::string& file) {
  json d;
  if (!bytes.empty() && static_cast<unsigned char>(bytes[0]) == 0x80) {
    try {
      d = read_pickle(bytes);
    } catch (const PickleError& e) {
      throw TorchTraceError(fmt::format("{}: not a Flight Recorder dump this reader takes: {}", file, e.what()));
    }
  } else {
    d = json::parse(bytes, nullptr, false);
    if (d.is_discarded()) throw TorchTraceError(fmt::format("{}: neither a pickle nor valid JSON", file));
  }
  TorchDump t = from_json(d, file);
  if (t.rank < 0) {
    const auto r = rank_of_name(std::filesystem::path(file).filename().string());
    if (!r) throw TorchTraceError(fmt::format("{}: the dump has no rank, and its file name does not end in one", file));
    t.rank = *r;
  }
  return t;
}

std::vector<TorchDump> load_torch_traces(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec))
    throw TorchTraceError(fmt::format("{}: not a directory of Flight Recorder dumps", dir));
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec))
    if (rank_of_name(e.path().filename().string())) {
      std::error_code type_ec;  // a symlink loop or a dangling link: named when read, never an abort
      if (e.is_regular_file(type_ec) || type_ec) files.push_back(e.path().string());
      else if (!e.is_directory(type_ec)) files.push_back(e.path().string());  // a FIFO or a device: refused by name
    }
  std::sort(files.begin(), files.end());
  std::vector<TorchDump> dumps;
  std::map<int, std::string> seen;
  for (const auto& file : files) {
    const std::string bytes =
        read_input_file<TorchTraceError>(file, kMaxDumpBytes, "a Flight Recorder dump", "no flag");
    if (!looks_like_torch_trace(bytes)) continue;
    TorchDump t = parse_torch_trace(bytes, file);
    if (const auto it = seen.find(t.rank); it != seen.end())
      throw TorchTraceError(fmt::format("{} and {} are both rank {}'s dump", it->second, file, t.rank));
    seen[t.rank] = file;
    dumps.push_back(std::move(t));
  }
  if (dumps.empty())
    throw TorchTraceError(fmt::format("{}: no Flight Recorder dumps (files whose name ends in the rank, such as "
                                      "nccl_trace_rank_0, holding a pickle or JSON dump)", dir));
  std::sort(dumps.begin(), dumps.end(), [](const TorchDump& a, const TorchDump& b) { return a.rank < b.rank; });
  return dumps;
}

std::string torch_collective(const std::string& profiling_name) {
  std::string op = profiling_name;
  for (const char* backend : {"nccl:", "gloo:", "ucc:", "mpi:", "xccl:"})
    if (op.starts_with(backend)) op = op.substr(std::strlen(backend));
  if (const auto sp = op.find(' '); sp != std::string::npos) op.resize(sp);  // "send 0->3"
  // collcheck's MPI interposer (interpose/): MPI's names, "i" for non-blocking.
  if (profiling_name.starts_with("mpi:")) {
    static const std::map<std::string, std::string> mpi = {
        {"bcast", "broadcast"},         {"allreduce", "all_reduce"},       {"reduce", "reduce"},
        {"allgather", "all_gather"},    {"alltoall", "all_to_all"},        {"gather", "gather"},
        {"scatter", "scatter"},         {"barrier", "barrier"},            {"reduce_scatter_block", "reduce_scatter"},
        {"allgatherv", "all_gather_v"}, {"alltoallv", "all_to_all_v"},     {"gatherv", "gather_v"},
        {"scatterv", "scatter_v"},      {"reduce_scatter", "reduce_scatter_v"}, {"scan", "scan"},
        {"exscan", "exscan"},           {"alltoallw", "all_to_all_w"},     {"send", "send"},
        {"recv", "recv"},
        {"recvAnySource", "recv"},      {"comm_free", "comm_free"},
        {"neighbor_allgather", "neighbor_all_gather"},   {"neighbor_allgatherv", "neighbor_all_gather_v"},
        {"neighbor_alltoall", "neighbor_all_to_all"},    {"neighbor_alltoallv", "neighbor_all_to_all_v"},
        {"neighbor_alltoallw", "neighbor_all_to_all_w"},
    };
    // MPI_Sendrecv: its send half "sendrecv a->b", its receive half "sendrecv a<-b".
    if (op == "sendrecv") return profiling_name.find("->") != std::string::npos ? "send" : "recv";
    if (op == "sendrecvAnySource") return "recv";
    if (op.size() > 1 && op[0] == 'i' && !mpi.count(op) && mpi.count(op.substr(1))) op = op.substr(1);
    const auto it = mpi.find(op);
    return it == mpi.end() ? "" : it->second;
  }
  static const std::map<std::string, std::string> table = {
      {"all_reduce", "all_reduce"}, {"allreduce", "all_reduce"}, {"all_reduce_coalesced", "all_reduce"},
      {"allreduce_coalesced", "all_reduce"}, {"sparse_all_reduce", "all_reduce"}, {"allreduce_sparse", "all_reduce"},
      {"all_gather", "all_gather"}, {"allgather", "all_gather"}, {"_allgather_base", "all_gather"},
      {"_all_gather_base", "all_gather"}, {"all_gather_base", "all_gather"}, {"all_gather_into_tensor", "all_gather"},
      {"allgather_into_tensor_coalesced", "all_gather"}, {"all_gather_into_tensor_coalesced", "all_gather"},
      {"allgather_coalesced", "all_gather"}, {"all_gather_coalesced", "all_gather"},
      {"reduce_scatter", "reduce_scatter"}, {"_reduce_scatter_base", "reduce_scatter"},
      {"reduce_scatter_base", "reduce_scatter"}, {"reduce_scatter_tensor", "reduce_scatter"},
      {"reduce_scatter_tensor_coalesced", "reduce_scatter"}, {"all_to_all", "all_to_all"}, {"alltoall", "all_to_all"},
      {"alltoall_base", "all_to_all"}, {"all_to_all_single", "all_to_all"}, {"all_to_allv", "all_to_all"},
      {"broadcast", "broadcast"}, {"_broadcast_oop", "broadcast"}, {"broadcast_coalesced", "broadcast"},
      {"reduce", "reduce"}, {"_reduce_oop", "reduce"}, {"gather", "gather"}, {"scatter", "scatter"},
      {"barrier", "barrier"}, {"monitored_barrier", "barrier"}, {"send", "send"}, {"recv", "recv"},
      {"recvanysource", "recv"}, {"recvAnySource", "recv"}, {"coalesced", "coalesced"},
  };
  const auto it = table.find(op);
  return it == table.end() ? "" : it->second;
}

std::string torch_call_attributes(const std::string& profiling_name) {
  if (!profiling_name.starts_with("mpi:")) return "";
  std::string out;
  const std::string name = profiling_name.substr(4, profiling_name.find(' ') == std::string::npos
                                                       ? std::string::npos
                                                       : profiling_name.find(' ') - 4);
  if (name.size() > 1 && name[0] == 'i' && !torch_collective("mpi:" + name.substr(1)).empty() &&
      name != "isend" && name != "irecv")
    out = "nonblocking";
  size_t k = profiling_name.find(' ');
  while (k != std::string::npos) {
    const size_t next = profiling_name.find(' ', k + 1);
    const std::string word = profiling_name.substr(k + 1, next == std::string::npos ? std::string::npos : next - k - 1);
    if (word.starts_with("op=") || word.starts_with("root=")) out += (out.empty() ? "" : " ") + word;
    k = next;
  }
  return out;
}

std::string torch_call_attribute(const std::string& profiling_name, std::string_view key) {
  const std::string attrs = torch_call_attributes(profiling_name);
  const std::string want = std::string(key) + "=";
  for (size_t k = 0; k < attrs.size();) {
    const size_t end = std::min(attrs.find(' ', k), attrs.size());
    if (attrs.compare(k, want.size(), want) == 0) return attrs.substr(k + want.size(), end - k - want.size());
    k = end + 1;
  }
  return "";
}

std::string torch_entry_text(const TorchEntry& e) {
  std::string op = e.op;
  for (const char* backend : {"nccl:", "gloo:", "mpi:"})
    if (op.starts_with(backend)) op = op.substr(std::strlen(backend));
  std::string shape = e.input_sizes.empty() ? "-" : fmt::format("{}", fmt::join(e.input_sizes.front(), "x"));
  if (!e.input_sizes.empty() && e.input_sizes.front().empty()) shape = "scalar";
  if (torch_collective(e.op) == "barrier") return op;
  return fmt::format("{} {} {}", op, shape, e.input_dtypes.empty() ? "-" : e.input_dtypes.front());
}

std::string torch_call_site(const TorchEntry& e) {
  for (const auto& fr : e.frames) {
    if (fr.file.find("/torch/") != std::string::npos || fr.file.starts_with("torch/") || fr.file.empty()) continue;
    const auto slash = fr.file.rfind('/');
    const std::string base = slash == std::string::npos ? fr.file : fr.file.substr(slash + 1);
    // Line 0: a site without debug information (the object and, in the name, the symbol).
    return fmt::format("{}{}{}", base, fr.line > 0 ? fmt::format(":{}", fr.line) : "",
                       fr.name.empty() ? "" : " (" + fr.name + ")");
  }
  return "";
}

}  // namespace collcheck
