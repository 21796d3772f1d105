#include "properties/case.h"

#include "harness/model/size.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "harness/check/oracle.h"

namespace collcheck {

uint64_t Case::input(int rank, size_t i) const {
  if (explicit_values) return values[static_cast<size_t>(rank)][i];
  return input_element(dtype, op, seed_p ? seed_p : p, seed_ranks.empty() ? rank : seed_ranks[static_cast<size_t>(rank)],
                       seed_offset + i, seed, data);
}

void Case::make_explicit() {
  if (explicit_values) return;
  std::vector<std::vector<uint64_t>> v(static_cast<size_t>(p), std::vector<uint64_t>(count));
  for (int r = 0; r < p; ++r)
    for (size_t i = 0; i < count; ++i) v[static_cast<size_t>(r)][i] = input(r, i);
  values = std::move(v);
  explicit_values = true;
}

std::vector<std::vector<std::byte>> Case::input_buffers() const {
  std::vector<std::vector<std::byte>> out(static_cast<size_t>(p));
  std::vector<void*> data_of(static_cast<size_t>(p));
  for (int r = 0; r < p; ++r) {
    auto& b = out[static_cast<size_t>(r)];
    b.resize(count * dtype_size(dtype));
    data_of[static_cast<size_t>(r)] = b.data();
  }
  if (!explicit_values && seed_p == 0 && seed_ranks.empty() && seed_offset == 0) {
    fill_inputs(data_of, count, dtype, op, p, seed, data);
    return out;
  }
  for (int r = 0; r < p; ++r) {
    auto& b = out[static_cast<size_t>(r)];
    if (explicit_values) {
      for (size_t i = 0; i < count; ++i) store_element(dtype, b.data(), i, values[static_cast<size_t>(r)][i]);
    } else {
      for (size_t i = 0; i < count; ++i) store_element(dtype, b.data(), i, input(r, i));
    }
  }
  return out;
}

size_t Case::total_count() const {
  size_t n = count;
  for (const auto& t : then) n += t.count;
  return n;
}

bool operator==(const Case& a, const Case& b) {
  if (a.p != b.p || a.dtype != b.dtype || a.op != b.op || a.count != b.count || a.inplace != b.inplace) return false;
  if (a.op == RedOp::PreMulSum && std::memcmp(&a.scalar, &b.scalar, sizeof(double)) != 0) return false;
  if (a.async != b.async || a.defer != b.defer || a.perturb != b.perturb || a.ranks_per_node != b.ranks_per_node || a.then != b.then) return false;
  if (a.explicit_values != b.explicit_values) return false;
  if (a.explicit_values) return a.values == b.values;
  return a.data == b.data && a.seed == b.seed && (a.seed_p ? a.seed_p : a.p) == (b.seed_p ? b.seed_p : b.p) &&
         a.seed_offset == b.seed_offset && a.seed_ranks == b.seed_ranks;
}

namespace {

std::string scalar_text(double s) {
  // Shortest decimal that round-trips, else a hex float.
  std::string d = fmt::format("{}", s);
  return d;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  for (;;) {
    size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) return out;
    start = pos + 1;
  }
}

[[noreturn]] void bad(std::string_view field, std::string_view got, std::string_view allowed) {
  throw std::invalid_argument(fmt::format("replay token: bad {} '{}'; expected {}", field, got, allowed));
}

uint64_t parse_u64(std::string_view s, int base, std::string_view field, std::string_view allowed) {
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size()) bad(field, s, allowed);
  return v;
}

}  // namespace

namespace {

// dtype:op:s<scalar>:n<count>:oop|ip[:sync|async<defer>]:<inputs>
std::string encode_call(const Case& c, bool in_sequence) {
  std::string t = fmt::format("{}:{}:s{}:n{}:{}:", dtype_name(c.dtype), op_name(c.op), scalar_text(c.scalar), c.count,
                              c.inplace ? "ip" : "oop");
  if (in_sequence) t += c.async ? fmt::format("async{}:", c.defer) : std::string("sync:");
  if (!c.explicit_values) {
    t += fmt::format("d:{}:{:x}", data_class_name(c.data), c.seed);
    if (c.seed_p || !c.seed_ranks.empty() || c.seed_offset)
      t += fmt::format(":w{}:{}:{}", c.seed_p ? c.seed_p : c.p, fmt::join(c.seed_ranks, "."), c.seed_offset);
    return t;
  }
  t += "x:";
  for (int r = 0; r < c.p; ++r) {
    if (r) t += '/';
    const auto& v = c.values[static_cast<size_t>(r)];
    for (size_t i = 0; i < c.count;) {
      size_t n = 1;
      while (i + n < c.count && v[i + n] == v[i]) ++n;
      if (i) t += '.';
      if (n >= 3) {
        fmt::format_to(std::back_inserter(t), "{:x}*{}", v[i], n);
        i += n;
      } else {
        fmt::format_to(std::back_inserter(t), "{:x}", v[i]);
        ++i;
      }
    }
  }
  return t;
}

// Parses the fields of one call from f[0..]; c.p is set.
void decode_call(Case& c, const std::vector<std::string_view>& f, bool in_sequence, std::string_view token) {
  const size_t k = in_sequence ? 1 : 0;  // the extra sync|async field
  if (f.size() < 7 + k)
    bad("call", token.substr(0, 60),
        in_sequence ? "<dtype>:<op>:s<scalar>:n<count>:<oop|ip>:<sync|async<defer>>:<inputs>"
                    : "v1:p<ranks>:<dtype>:<op>:s<scalar>:n<count>:<oop|ip>:x:<values> or ...:d:<class>:<seed>");
  auto t = parse_dtype(f[0]);
  if (!t) bad("dtype", f[0], dtype_choices());
  c.dtype = *t;
  auto op = parse_op(f[1]);
  if (!op) bad("op", f[1], op_choices());
  c.op = *op;
  if (f[2].size() < 2 || f[2][0] != 's') bad("scalar field", f[2], "s<number>, e.g. s3");
  {
    const std::string s(f[2].substr(1));
    char* end = nullptr;
    c.scalar = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size() || !std::isfinite(c.scalar)) bad("scalar field", f[2], "s<finite number>");
  }
  if (f[3].size() < 2 || f[3][0] != 'n') bad("count field", f[3], "n<count>");
  c.count = parse_u64(f[3].substr(1), 10, "count field", "n<count>");
  if (c.count > max_count(c.dtype))
    bad("count field", f[3], fmt::format("n<count> with at most {} {} elements (2^48 bytes, one buffer's limit)",
                                         max_count(c.dtype), dtype_name(c.dtype)));
  if (f[4] != "oop" && f[4] != "ip") bad("placement", f[4], "oop or ip");
  c.inplace = f[4] == "ip";
  if (in_sequence) {
    if (f[5] == "sync") {
      c.async = false;
    } else if (f[5].substr(0, 5) == "async" && f[5].size() > 5) {
      c.async = true;
      c.defer = static_cast<int>(parse_u64(f[5].substr(5), 10, "async field", "sync or async<defer>, defer 0..16"));
      if (c.defer > static_cast<int>(kMaxSequenceCalls)) bad("async field", f[5], "sync or async<defer>, defer 0..16");
    } else {
      bad("async field", f[5], "sync or async<defer>, e.g. async1");
    }
  }
  const size_t in = 5 + k;  // where the inputs start
  if (f[in] == "d") {
    if (f.size() != in + 3 && f.size() != in + 6)
      bad("call", token.substr(0, 60), "...:d:<class>:<seed hex>[:w<p>:<rank.rank...>:<offset>]");
    auto dc = parse_data_class(f[in + 1]);
    if (!dc) bad("data class", f[in + 1], data_class_choices());
    c.data = *dc;
    c.seed = parse_u64(f[in + 2], 16, "seed", "a hex number");
    if (f.size() == in + 6) {
      const std::string_view w = f[in + 3];
      const std::string allowed = fmt::format("w<p> with p in {}..{}", c.p, kMaxCaseRanks);
      if (w.size() < 2 || w[0] != 'w') bad("window field", w, allowed);
      c.seed_p = static_cast<int>(parse_u64(w.substr(1), 10, "window field", allowed));
      if (c.seed_p < c.p || c.seed_p > kMaxCaseRanks) bad("window field", w, allowed);
      if (!f[in + 4].empty()) {
        for (auto rv : split(f[in + 4], '.')) {
          const uint64_t r = parse_u64(rv, 10, "window ranks", "'.'-separated ranks below the window's p");
          if (r >= static_cast<uint64_t>(c.seed_p)) bad("window ranks", rv, fmt::format("ranks below {}", c.seed_p));
          c.seed_ranks.push_back(static_cast<int>(r));
        }
        if (c.seed_ranks.size() != static_cast<size_t>(c.p))
          bad("window ranks", f[in + 4], fmt::format("{} ranks, one per rank of the case", c.p));
      }
      c.seed_offset = parse_u64(f[in + 5], 10, "window offset", "an element offset");
      if (c.seed_offset > (size_t{1} << 40)) bad("window offset", f[in + 5], "an element offset below 2^40");
    }
    return;
  }
  if (f[in] != "x" || f.size() != in + 2) bad("inputs", f[in], "x:<values> or d:<class>:<seed>");
  if (c.count > (size_t{1} << 24)) bad("count field", f[3], "at most 16777216 explicit elements");
  c.explicit_values = true;
  const auto ranks = split(f[in + 1], '/');
  if (ranks.size() != static_cast<size_t>(c.p))
    bad("values", fmt::format("{} rank(s)", ranks.size()), fmt::format("{} ranks separated by '/'", c.p));
  const unsigned bits = 8 * static_cast<unsigned>(dtype_size(c.dtype));
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  for (const auto& rv : ranks) {
    std::vector<uint64_t> v;
    if (c.count > 0) {
      for (const auto& e : split(rv, '.')) {
        const size_t star = e.find('*');
        const std::string_view bits_text = e.substr(0, star);
        const uint64_t x = parse_u64(bits_text, 16, "element", "hex element bits, or <bits>*<run length>");
        if (x & ~mask) bad("element", e, fmt::format("at most {} bits for {}", bits, dtype_name(c.dtype)));
        uint64_t n = 1;
        if (star != std::string_view::npos) {
          n = parse_u64(e.substr(star + 1), 10, "element", "<bits>*<run length>, run length 1 or more");
          if (n == 0 || n > c.count) bad("element", e, fmt::format("a run length in 1..{}", c.count));
        }
        if (v.size() + n > c.count)
          bad("values", fmt::format("more than {} element(s)", c.count), fmt::format("{} per rank separated by '.'", c.count));
        v.insert(v.end(), n, x);
      }
      if (v.size() != c.count)
        bad("values", fmt::format("{} element(s)", v.size()), fmt::format("{} per rank separated by '.'", c.count));
    } else if (!rv.empty()) {
      bad("values", rv, "nothing for count 0");
    }
    c.values.push_back(std::move(v));
  }
}

}  // namespace

std::string encode_case(const Case& c) {
  std::string t = fmt::format("v1:p{}:", c.p) + encode_call(c, false);
  if (c.perturb) t += fmt::format(",z{:x}", c.perturb);
  if (c.ranks_per_node) t += fmt::format(",h{}", c.ranks_per_node);
  for (const auto& n : c.then) t += "," + encode_call(n, true);
  return t;
}

Case decode_case(std::string_view token) {
  const auto parts = split(token, ',');
  const auto f = split(parts[0], ':');
  if (f.size() < 9 || f[0] != "v1")
    bad("token", token.substr(0, 40), "v1:p<ranks>:<dtype>:<op>:s<scalar>:n<count>:<oop|ip>:x:<values> or ...:d:<class>:<seed>");
  Case c;
  if (f[1].size() < 2 || f[1][0] != 'p') bad("ranks field", f[1], "p<ranks>, e.g. p4");
  const std::string allowed = fmt::format("p<ranks> with ranks in 1..{}", kMaxCaseRanks);
  c.p = static_cast<int>(parse_u64(f[1].substr(1), 10, "ranks field", allowed));
  if (c.p < 1 || c.p > kMaxCaseRanks) bad("ranks field", f[1], allowed);
  decode_call(c, {f.begin() + 2, f.end()}, false, parts[0]);
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string_view part = parts[i];
    if (!part.empty() && part[0] == 'z' && part.find(':') == std::string_view::npos) {
      if (i != 1 || part.size() < 2) bad("perturbation field", part, "z<seed hex>, right after the first call");
      c.perturb = parse_u64(part.substr(1), 16, "perturbation field", "z<seed hex>, nonzero");
      if (c.perturb == 0) bad("perturbation field", part, "z<seed hex>, nonzero");
      continue;
    }
    if (!part.empty() && part[0] == 'h' && part.find(':') == std::string_view::npos) {
      const std::string h_allowed = fmt::format("h<ranks per node>, 1..{}, after the first call (and z) and before the "
                                              "further calls", kMaxCaseRanks);
      if (!c.then.empty() || c.ranks_per_node || part.size() < 2) bad("ranks-per-node field", part, h_allowed);
      const uint64_t n = parse_u64(part.substr(1), 10, "ranks-per-node field", h_allowed);
      if (n < 1 || n > static_cast<uint64_t>(kMaxCaseRanks)) bad("ranks-per-node field", part, h_allowed);
      c.ranks_per_node = static_cast<int>(n);
      continue;
    }
    if (c.then.size() >= kMaxSequenceCalls - 1)
      bad("sequence", fmt::format("{} calls", parts.size()), fmt::format("at most {} calls", kMaxSequenceCalls));
    Case n;
    n.p = c.p;
    decode_call(n, split(part, ':'), true, part);
    c.then.push_back(std::move(n));
  }
  return c;
}

namespace {
std::string call_summary(const Case& c) {
  std::string s = fmt::format("{} {}", dtype_name(c.dtype), op_name(c.op));
  if (c.op == RedOp::PreMulSum) s += fmt::format(" (scalar {})", scalar_text(c.scalar));
  s += fmt::format(" count={} {}", c.count, c.inplace ? "in-place" : "out-of-place");
  if (c.explicit_values) {
    s += ", explicit inputs";
  } else {
    s += fmt::format(", {} inputs, seed {:#x}", data_class_name(c.data), c.seed);
  }
  return s;
}
}  // namespace

std::string sequence_call_name(const Case& c, size_t k) {
  if (k == 0) return "call 1";
  const Case& n = c.then[k - 1];
  return fmt::format("call {} of the sequence ({}, {})", k + 1, call_summary(n),
                     n.async ? fmt::format("async, waited after {} more call(s)", n.defer) : std::string("sync"));
}

std::string case_summary(const Case& c) {
  std::string s = fmt::format("p={} ", c.p) + call_summary(c);
  if (c.perturb) s += fmt::format(", perturbed schedule (seed {:#x})", c.perturb);
  if (c.ranks_per_node) s += fmt::format(", {} rank(s) per node", c.ranks_per_node);
  if (!c.then.empty()) {
    s += fmt::format("; then {} more call(s) on the same communicator:", c.then.size());
    for (size_t k = 0; k < c.then.size(); ++k)
      s += fmt::format(" [{}] {}{}", k + 2, call_summary(c.then[k]),
                       c.then[k].async ? fmt::format(" async(defer {})", c.then[k].defer) : std::string(" sync"));
  }
  return s;
}

std::string describe_case(const Case& c, size_t max_elements) {
  std::string s = case_summary(c) + "\n";
  for (size_t k = 0; k < c.calls(); ++k) {
    const Case& call = k == 0 ? c : c.then[k - 1];
    if (c.calls() > 1) s += fmt::format("  call {}:\n", k + 1);
    for (int r = 0; r < c.p; ++r) {
      s += fmt::format("    rank {}:", r);
      const size_t n = std::min(call.count, max_elements);
      for (size_t i = 0; i < n; ++i) s += fmt::format(" [{}] {}", i, format_element(call.dtype, call.input(r, i)));
      if (call.count > n) s += fmt::format(" ... ({} more)", call.count - n);
      if (call.count == 0) s += " (no elements)";
      s += "\n";
    }
  }
  return s;
}

std::optional<Case> calls_cut_together(const Case& c, size_t count) {
  const size_t bytes = c.count * dtype_size(c.dtype), to = count * dtype_size(c.dtype);
  if (count >= c.count) return std::nullopt;
  Case out = c;
  bool cut = false;
  for (Case& call : out.then) {
    const size_t size = dtype_size(call.dtype);
    if (call.count * size != bytes || call.count == 0) continue;
    if (to % size != 0) return std::nullopt;
    call.count = to / size;  // a prefix: seeded values stay seeded
    for (auto& v : call.values) v.resize(std::min(v.size(), call.count));
    cut = true;
  }
  if (!cut) return std::nullopt;
  out.count = count;
  for (auto& v : out.values) v.resize(std::min(v.size(), count));
  return out;
}

}  // namespace collcheck
