// The per-rank ring of records and its dump, in the JSON variant of PyTorch's
// Flight Recorder format (what `collcheck analyze` reads).
#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "interpose/interpose.h"

namespace collcheck_mpi {

namespace {

std::string env(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

Config load_config() {
  Config c;
  c.dir = env("COLLCHECK_MPI_DIR", "");
  c.run_id = env("COLLCHECK_MPI_RUN_ID", "");
  if (c.dir.empty()) c.dir = "collcheck-mpi-" + std::to_string(::getppid());
  c.guarded = env("COLLCHECK_MPI_MODE", "unguarded") == "guarded";
  const double d = std::atof(env("COLLCHECK_MPI_DEADLINE", "60").c_str());
  c.deadline_s = d > 0 ? d : 60;
  const long n = std::atol(env("COLLCHECK_MPI_ENTRIES", "4096").c_str());
  c.entries = n > 0 ? static_cast<size_t>(n) : 4096;
  return c;
}

std::mutex mu;
std::deque<Entry> ring;
uint64_t next_id = 0;

}  // namespace

const Config& config() {
  static const Config c = load_config();
  return c;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

namespace {
Site resolve(const void* ra);
}  // namespace

// dladdr per call costs more than the rest of a record: sites are kept by
// return address (a program has few call sites).
Site site_of(const void* ra) {
  static std::mutex cache_mu;
  static std::unordered_map<const void*, Site> cache;
  std::lock_guard lock(cache_mu);
  if (const auto it = cache.find(ra); it != cache.end()) return it->second;
  if (cache.size() > 65536) cache.clear();
  return cache[ra] = resolve(ra);
}

namespace {
Site resolve(const void* ra) {
  Site s;
  Dl_info info{};
  if (ra && ::dladdr(ra, &info) && info.dli_fname) {
    s.object = info.dli_fname;
    s.offset = reinterpret_cast<uintptr_t>(ra) - reinterpret_cast<uintptr_t>(info.dli_fbase);
    if (info.dli_sname) s.symbol = info.dli_sname;
  } else {
    s.offset = reinterpret_cast<uintptr_t>(ra);
  }
  // The main program's name as /proc says it (dladdr gives argv[0]'s text).
  if (s.object.empty() || s.object.find('/') == std::string::npos) {
    char buf[4096];
    const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0 && (s.object.empty() || std::strstr(buf, s.object.c_str()))) s.object.assign(buf, static_cast<size_t>(n));
  }
  return s;
}
}  // namespace

std::string site_text(const Site& s) {
  const auto slash = s.object.rfind('/');
  char off[32];
  std::snprintf(off, sizeof off, "+0x%zx", static_cast<size_t>(s.offset));
  return (slash == std::string::npos ? s.object : s.object.substr(slash + 1)) + off +
         (s.symbol.empty() ? "" : " (" + s.symbol + ")");
}

namespace {
struct TypeRow {
  MPI_Datatype t;
  const char* name;  // PyTorch's name for it
};
// MPI's predefined datatypes the dump names (their index is the guard's type code).
std::vector<TypeRow> type_rows() {
  return {
      {MPI_FLOAT, "Float"},        {MPI_DOUBLE, "Double"},   {MPI_INT, "Int"},          {MPI_INT32_T, "Int"},
      {MPI_LONG, "Long"},          {MPI_LONG_LONG, "Long"},  {MPI_INT64_T, "Long"},     {MPI_UNSIGNED, "UInt32"},
      {MPI_UINT32_T, "UInt32"},    {MPI_UINT64_T, "UInt64"}, {MPI_UNSIGNED_LONG, "UInt64"}, {MPI_SHORT, "Short"},
      {MPI_UINT16_T, "UInt16"},    {MPI_CHAR, "Char"},       {MPI_SIGNED_CHAR, "Char"}, {MPI_INT8_T, "Char"},
      {MPI_BYTE, "Byte"},          {MPI_UNSIGNED_CHAR, "Byte"}, {MPI_UINT8_T, "Byte"}, {MPI_C_BOOL, "Bool"},
      {MPI_C_FLOAT_COMPLEX, "ComplexFloat"}, {MPI_C_DOUBLE_COMPLEX, "ComplexDouble"}, {MPI_LONG_DOUBLE, "LongDouble"},
      {MPI_UNSIGNED_SHORT, "UInt16"}, {MPI_UNSIGNED_LONG_LONG, "UInt64"}, {MPI_INT16_T, "Short"},
  };
}
}  // namespace

int32_t type_code(MPI_Datatype t) {
  static const std::vector<TypeRow> rows = type_rows();
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].t == t) return static_cast<int32_t>(i);
  return -1;
}

// The one predefined type a derived type is made of (contiguous, vector,
// indexed, struct of one type, ...); MPI_DATATYPE_NULL when it mixes types.
MPI_Datatype base_type(MPI_Datatype t, int depth) {
  int ni = 0, na = 0, nd = 0, combiner = 0;
  if (depth > 16 || PMPI_Type_get_envelope(t, &ni, &na, &nd, &combiner) != MPI_SUCCESS) return MPI_DATATYPE_NULL;
  if (combiner == MPI_COMBINER_NAMED) return t;
  if (nd < 1) return MPI_DATATYPE_NULL;
  std::vector<int> ints(static_cast<size_t>(std::max(ni, 1)));
  std::vector<MPI_Aint> addrs(static_cast<size_t>(std::max(na, 1)));
  std::vector<MPI_Datatype> types(static_cast<size_t>(nd));
  if (PMPI_Type_get_contents(t, ni, na, nd, ints.data(), addrs.data(), types.data()) != MPI_SUCCESS)
    return MPI_DATATYPE_NULL;
  MPI_Datatype base = MPI_DATATYPE_NULL;
  for (MPI_Datatype inner : types) {
    const MPI_Datatype b = base_type(inner, depth + 1);
    int ni2 = 0, na2 = 0, nd2 = 0, comb2 = 0;
    PMPI_Type_get_envelope(inner, &ni2, &na2, &nd2, &comb2);
    if (comb2 != MPI_COMBINER_NAMED) PMPI_Type_free(&inner);  // get_contents made a copy
    if (b == MPI_DATATYPE_NULL || (base != MPI_DATATYPE_NULL && b != base)) return MPI_DATATYPE_NULL;
    base = b;
  }
  return base;
}

std::pair<MPI_Datatype, int64_t> elements_of(MPI_Datatype t, int count) {
  if (t == MPI_DATATYPE_NULL || type_code(t) >= 0) return {t, count};
  int size = 0, base_size = 0;
  PMPI_Type_size(t, &size);
  const MPI_Datatype base = base_type(t, 0);
  if (base != MPI_DATATYPE_NULL && type_code(base) >= 0 && PMPI_Type_size(base, &base_size) == MPI_SUCCESS &&
      base_size > 0 && size % base_size == 0)
    return {base, int64_t{count} * (size / base_size)};
  return {MPI_DATATYPE_NULL, int64_t{count} * size};  // mixed: its signature's bytes
}

std::pair<std::string, int64_t> dtype_of(MPI_Datatype t, int count) {
  static const std::vector<TypeRow> rows = type_rows();
  const auto [base, n] = elements_of(t, count);
  if (const int32_t k = type_code(base); k >= 0) return {rows[static_cast<size_t>(k)].name, n};
  return {"Byte", n};
}

uint64_t record(Entry e) {
  std::lock_guard lock(mu);
  e.record_id = next_id++;
  e.created_ns = now_ns();
  ring.push_back(std::move(e));
  while (ring.size() > config().entries) ring.pop_front();
  return ring.back().record_id;
}

void complete(uint64_t id) {
  std::lock_guard lock(mu);
  if (ring.empty() || id < ring.front().record_id) return;  // out of the ring
  const size_t k = static_cast<size_t>(id - ring.front().record_id);
  if (k >= ring.size()) return;
  ring[k].state = "completed";
  ring[k].completed_ns = now_ns();
}

void matched_source(uint64_t id, int source) {
  if (source < 0) return;
  std::lock_guard lock(mu);
  if (ring.empty() || id < ring.front().record_id) return;
  const size_t k = static_cast<size_t>(id - ring.front().record_id);
  if (k >= ring.size()) return;
  std::string& name = ring[k].name;
  if (const auto at = name.rfind("<-any"); at != std::string::npos && at + 5 == name.size())
    name = name.substr(0, at + 2) + std::to_string(source);
}

namespace {

// The dump's text, written as it goes (one entry a line): a JSON document
// built first and then indented took 80-110 ms for a full ring of 4,096
// records, against a few here. Open MPI kills a job's ranks a second after
// its SIGTERM (sooner once one has died), so at 16 ranks on a busy 2-core
// host the slower writer lost dumps. pg_config comes before the entries.
class DumpText {
 public:
  explicit DumpText(size_t entries) { out_.reserve(1024 + entries * 560); }
  DumpText& raw(std::string_view s) {
    out_ += s;
    return *this;
  }
  DumpText& num(int64_t v) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out_.append(buf, r.ptr);
    return *this;
  }
  // A JSON string: printable ASCII as it is; anything else through
  // nlohmann-json, which escapes it and replaces bytes that are not UTF-8.
  DumpText& str(std::string_view s) {
    const bool plain = std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
    if (plain) {
      out_ += '"';
      out_ += s;
      out_ += '"';
    } else {
      out_ += nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
    return *this;
  }
  // "key": (the key is one of ours: plain)
  DumpText& key(std::string_view k) {
    out_ += '"';
    out_ += k;
    out_ += "\": ";
    return *this;
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

std::string dump_text(const char* why) {
  char lib[MPI_MAX_LIBRARY_VERSION_STRING] = {0};
  int len = 0;
  PMPI_Get_library_version(lib, &len);  // callable at any time, from any thread (MPI-3.1 8.1.1)
  std::string version(lib, static_cast<size_t>(std::max(0, len)));
  version = version.substr(0, version.find_first_of(",\n"));
  const std::vector<CommRow> comms = comm_table();
  std::unordered_map<std::string_view, std::string_view> desc;  // a group's desc, by its name
  for (const CommRow& c : comms) desc.emplace(c.name, c.desc);
  std::lock_guard lock(mu);
  DumpText t(ring.size());
  t.raw("{\n").key("version").str("2.10").raw(",\n");
  t.key("comm_lib_version").str(version.empty() ? "MPI" : version).raw(",\n");
  t.key("rank").num(world_rank()).raw(",\n").key("world_size").num(world_size()).raw(",\n");
  t.key("collcheck_run_id").str(config().run_id).raw(",\n");
  t.key("collcheck_dump_reason").str(why).raw(",\n");
  t.key("collcheck_mode").str(config().guarded ? "guarded" : "unguarded").raw(",\n");
  t.key("pg_config").raw("{");
  for (size_t k = 0; k < comms.size(); ++k) {
    const CommRow& c = comms[k];
    t.raw(k ? ",\n " : "\n ").str(c.name).raw(": {").key("name").str(c.name).raw(", ").key("desc").str(c.desc);
    t.raw(", ").key("ranks").raw("[");
    for (size_t r = 0; r < c.ranks.size(); ++r) t.raw(r ? ", " : "").num(c.ranks[r]);
    t.raw("]}");
  }
  t.raw("},\n").key("entries").raw("[");
  const int64_t timeout_ms = static_cast<int64_t>(config().deadline_s * 1000);
  bool first = true;
  for (const Entry& e : ring) {
    const auto d = desc.find(e.group);
    t.raw(first ? "\n {" : ",\n {");
    first = false;
    t.key("record_id").num(static_cast<int64_t>(e.record_id)).raw(", ");
    t.key("process_group").raw("[").str(e.group).raw(", ").str(d == desc.end() ? "" : d->second).raw("], ");
    t.key("collective_seq_id").num(e.coll_seq).raw(", ").key("p2p_seq_id").num(e.p2p_seq).raw(", ");
    t.key("is_p2p").raw(e.p2p ? "true" : "false").raw(", ").key("profiling_name").str(e.name).raw(", ");
    t.key("input_sizes").raw("[[").num(e.count).raw("]], ").key("output_sizes").raw("[[").num(e.count).raw("]], ");
    t.key("input_dtypes").raw("[").str(e.dtype).raw("], ").key("output_dtypes").raw("[").str(e.dtype).raw("], ");
    t.key("state").str(e.state).raw(", ").key("time_created_ns").num(e.created_ns).raw(", ");
    t.key("time_discovered_started_ns").num(e.created_ns).raw(", ");
    t.key("time_discovered_completed_ns").num(e.completed_ns).raw(", ").key("timeout_ms").num(timeout_ms).raw(", ");
    char off[32];
    std::snprintf(off, sizeof off, "0x%zx", static_cast<size_t>(e.site.offset));
    t.key("frames").raw("[{").key("filename").str(e.site.object).raw(", ").key("name").str(e.site.symbol);
    t.raw(", ").key("line").raw("0, ").key("offset").str(off).raw("}]}");
  }
  t.raw("\n]\n}\n");
  return t.take();
}

void write_dump(const char* why) {
  const std::string text = dump_text(why);
  const std::string path = config().dir + "/mpi_trace_rank_" + std::to_string(world_rank()) + ".json";
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::fprintf(stderr, "collcheck-mpi: rank %d cannot write its dump %s: %s\n", world_rank(), tmp.c_str(),
                 std::strerror(errno));
    return;
  }
  size_t off = 0;
  while (off < text.size()) {
    const ssize_t n = ::write(fd, text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;  // a signal deferred while this thread writes (watchdog.cc)
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  if (off != text.size() || ::rename(tmp.c_str(), path.c_str()) != 0)
    std::fprintf(stderr, "collcheck-mpi: rank %d could not finish its dump %s\n", world_rank(), path.c_str());
}

}  // namespace

void dump(const char* why) {
  static std::mutex dump_mu;  // one dump at a time (the watchdog and a signal's may meet)
  {
    std::lock_guard dlock(dump_mu);
    dump_begins();
    write_dump(why);
  }
  dump_ends();
}

}  // namespace collcheck_mpi
