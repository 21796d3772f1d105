#include "harness/model/pickle.h"

#include <fmt/format.h>

#include "harness/model/utf8.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace collcheck {

namespace {

// One value under construction. Containers are shared: the memo holds the
// same list a later APPENDS fills, as in Python.
struct Node;
using NodeP = Node*;  // owned by the reader's arena: a container may hold itself
struct Node {
  enum Kind { None, Bool, Int, UInt, Float, Str, Bytes, List, Tuple, Dict, Set } kind = None;
  int64_t i = 0;
  uint64_t u = 0;
  double f = 0;
  std::string s;
  std::vector<NodeP> items;                       // list, tuple, set
  std::vector<std::pair<NodeP, NodeP>> entries;   // dict, in insertion order
};

const char* opcode_name(unsigned char op) {
  switch (op) {
    case 'c': return "GLOBAL";
    case 0x93: return "STACK_GLOBAL";
    case 'R': return "REDUCE";
    case 'b': return "BUILD";
    case 'i': return "INST";
    case 'o': return "OBJ";
    case 0x81: return "NEWOBJ";
    case 0x92: return "NEWOBJ_EX";
    case 'P': return "PERSID";
    case 'Q': return "BINPERSID";
    case 0x82: return "EXT1";
    case 0x83: return "EXT2";
    case 0x84: return "EXT4";
    case 0x97: return "NEXT_BUFFER";
    case 0x98: return "READONLY_BUFFER";
    case 'S': return "STRING";
    case 'V': return "UNICODE";
    default: return nullptr;
  }
}


class Reader {
 public:
  Reader(std::string_view b, const PickleLimits& l) : b_(b), limits_(l) {}

  nlohmann::json read() {
    while (true) {
      if (at_ >= b_.size()) fail(at_, "the pickle ends before its STOP opcode");
      const size_t op_at = at_;
      const auto op = static_cast<unsigned char>(b_[at_++]);
      if (op == '.') break;
      step(op, op_at);
    }
    if (!marks_.empty()) fail(at_ - 1, "a MARK is left open at STOP");
    if (stack_.size() != 1)
      fail(at_ - 1, fmt::format("STOP with {} values on the stack; a pickle ends with one", stack_.size()));
    size_t values = 0;
    return to_json(*stack_.back(), 0, values);
  }

 private:
  [[noreturn]] void fail(size_t where, const std::string& what) const {
    throw PickleError(fmt::format("byte {}: {}", where, what));
  }

  std::string_view take(size_t n) {
    if (n > b_.size() - at_) fail(at_, fmt::format("{} bytes wanted, {} left: the pickle is truncated", n, b_.size() - at_));
    const auto s = b_.substr(at_, n);
    at_ += n;
    return s;
  }
  uint64_t le(size_t n) {
    const auto s = take(n);
    uint64_t v = 0;
    for (size_t k = 0; k < n; ++k) v |= static_cast<uint64_t>(static_cast<unsigned char>(s[k])) << (8 * k);
    return v;
  }
  std::string_view line() {
    const size_t end = b_.find('\n', at_);
    if (end == std::string_view::npos) fail(at_, "a text argument has no end of line: the pickle is truncated");
    const auto s = b_.substr(at_, end - at_);
    at_ = end + 1;
    return s;
  }
  NodeP make(Node::Kind k) {
    arena_.push_back(std::make_unique<Node>());
    arena_.back()->kind = k;
    return arena_.back().get();
  }
  void push(NodeP n) { stack_.push_back(n); }
  NodeP pop(size_t op_at) {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail(op_at, "the stack is empty here");
    NodeP n = stack_.back();
    stack_.pop_back();
    return n;
  }
  NodeP& top(size_t op_at) {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) fail(op_at, "the stack is empty here");
    return stack_.back();
  }
  // The values pushed since the last MARK, which is closed.
  std::vector<NodeP> since_mark(size_t op_at) {
    if (marks_.empty()) fail(op_at, "no MARK is open here");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<NodeP> v(stack_.begin() + static_cast<long>(m), stack_.end());
    stack_.resize(m);
    return v;
  }
  void memo_put(uint64_t k, size_t op_at) { memo_[k] = top(op_at); }
  void memo_get(uint64_t k, size_t op_at) {
    const auto it = memo_.find(k);
    if (it == memo_.end()) fail(op_at, fmt::format("memo index {} was never stored", k));
    push(it->second);
  }
  NodeP integer(int64_t v) {
    auto n = make(Node::Int);
    n->i = v;
    return n;
  }
  NodeP text(std::string_view s, size_t op_at) {
    if (!valid_utf8(s)) fail(op_at, "a string is not valid UTF-8");
    auto n = make(Node::Str);
    n->s = s;
    return n;
  }
  NodeP bytes(std::string_view s) {
    auto n = make(Node::Bytes);
    n->s = s;
    return n;
  }
  // Little-endian two's complement of `n` bytes (LONG1, LONG4).
  NodeP long_bytes(size_t n, size_t op_at) {
    const auto s = take(n);
    if (n == 0) return integer(0);
    const bool negative = static_cast<unsigned char>(s[n - 1]) & 0x80;
    size_t used = n;  // without the sign-only high bytes
    while (used > 1 && static_cast<unsigned char>(s[used - 1]) == (negative ? 0xff : 0x00)) --used;
    if (used > 8)
      fail(op_at, fmt::format("an integer of {} bytes does not fit 64 bits", n));
    uint64_t v = 0;
    for (size_t k = 0; k < used; ++k) v |= static_cast<uint64_t>(static_cast<unsigned char>(s[k])) << (8 * k);
    if (negative) {
      if (used < 8) v |= ~uint64_t{0} << (8 * used);
      if (!(v >> 63)) fail(op_at, "a negative integer does not fit 64 bits");
      return integer(static_cast<int64_t>(v));
    }
    if (v >> 63) {
      auto u = make(Node::UInt);
      u->u = v;
      return u;
    }
    return integer(static_cast<int64_t>(v));
  }
  NodeP text_integer(std::string_view s, size_t op_at) {
    if (!s.empty() && s.back() == 'L') s.remove_suffix(1);
    int64_t v = 0;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    if (r.ec != std::errc() || r.ptr != s.data() + s.size())
      fail(op_at, fmt::format("'{}' is not an integer of 64 bits", s.substr(0, 40)));
    return integer(v);
  }

  void step(unsigned char op, size_t op_at) {
    switch (op) {
      case 0x80: {  // PROTO
        const auto v = le(1);
        if (v > 5) fail(op_at, fmt::format("pickle protocol {}; this reader knows 0 to 5", v));
        return;
      }
      case 0x95: le(8); return;  // FRAME: a length hint only
      case '(': marks_.push_back(stack_.size()); return;
      case '0': pop(op_at); return;
      case '1': since_mark(op_at); return;
      case '2': push(top(op_at)); return;
      case 'N': push(make(Node::None)); return;
      case 0x88:
      case 0x89: {
        auto n = make(Node::Bool);
        n->i = op == 0x88;
        push(n);
        return;
      }
      case 'J': push(integer(static_cast<int32_t>(static_cast<uint32_t>(le(4))))); return;
      case 'K': push(integer(static_cast<int64_t>(le(1)))); return;
      case 'M': push(integer(static_cast<int64_t>(le(2)))); return;
      case 0x8a: push(long_bytes(le(1), op_at)); return;
      case 0x8b: {
        const uint64_t n = le(4);
        if (n >> 31) fail(op_at, "LONG4 with a negative length");
        push(long_bytes(n, op_at));
        return;
      }
      case 'I': {
        const auto s = line();
        if (s == "00" || s == "01") {
          auto n = make(Node::Bool);
          n->i = s == "01";
          push(n);
        } else {
          push(text_integer(s, op_at));
        }
        return;
      }
      case 'L': push(text_integer(line(), op_at)); return;
      case 'F': {
        const auto s = line();
        double v = 0;
        const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
        if (r.ec != std::errc() || r.ptr != s.data() + s.size())
          fail(op_at, fmt::format("'{}' is not a float", s.substr(0, 40)));
        auto n = make(Node::Float);
        n->f = v;
        push(n);
        return;
      }
      case 'G': {
        const auto s = take(8);
        uint64_t bits = 0;
        for (size_t k = 0; k < 8; ++k) bits = bits << 8 | static_cast<unsigned char>(s[k]);  // big-endian
        auto n = make(Node::Float);
        std::memcpy(&n->f, &bits, 8);
        push(n);
        return;
      }
      case 'X': push(text(take(le(4)), op_at)); return;
      case 0x8c: push(text(take(le(1)), op_at)); return;
      case 0x8d: push(text(take(le(8)), op_at)); return;
      case 'T': {
        const uint64_t n = le(4);
        if (n >> 31) fail(op_at, "BINSTRING with a negative length");
        push(bytes(take(n)));
        return;
      }
      case 'U':
      case 'C': push(bytes(take(le(1)))); return;
      case 'B': push(bytes(take(le(4)))); return;
      case 0x8e:
      case 0x96: push(bytes(take(le(8)))); return;
      case ']': push(make(Node::List)); return;
      case ')': push(make(Node::Tuple)); return;
      case '}': push(make(Node::Dict)); return;
      case 0x8f: push(make(Node::Set)); return;
      case 'l':
      case 't':
      case 0x91: {
        auto n = make(op == 'l' ? Node::List : op == 't' ? Node::Tuple : Node::Set);
        n->items = since_mark(op_at);
        push(n);
        return;
      }
      case 0x85:
      case 0x86:
      case 0x87: {
        const size_t k = static_cast<size_t>(op - 0x84);
        auto n = make(Node::Tuple);
        n->items.resize(k);
        for (size_t j = k; j-- > 0;) n->items[j] = pop(op_at);
        push(n);
        return;
      }
      case 'd': {
        auto items = since_mark(op_at);
        if (items.size() % 2) fail(op_at, "DICT with an odd number of keys and values");
        auto n = make(Node::Dict);
        for (size_t j = 0; j < items.size(); j += 2) n->entries.emplace_back(items[j], items[j + 1]);
        push(n);
        return;
      }
      case 'a': {
        auto v = pop(op_at);
        auto& l = top(op_at);
        if (l->kind != Node::List) fail(op_at, "APPEND to something that is not a list");
        l->items.push_back(std::move(v));
        return;
      }
      case 'e': {
        auto items = since_mark(op_at);
        auto& l = top(op_at);
        if (l->kind != Node::List) fail(op_at, "APPENDS to something that is not a list");
        for (auto& v : items) l->items.push_back(std::move(v));
        return;
      }
      case 0x90: {
        auto items = since_mark(op_at);
        auto& l = top(op_at);
        if (l->kind != Node::Set) fail(op_at, "ADDITEMS to something that is not a set");
        for (auto& v : items) l->items.push_back(std::move(v));
        return;
      }
      case 's': {
        auto v = pop(op_at);
        auto k = pop(op_at);
        auto& d = top(op_at);
        if (d->kind != Node::Dict) fail(op_at, "SETITEM on something that is not a dict");
        d->entries.emplace_back(std::move(k), std::move(v));
        return;
      }
      case 'u': {
        auto items = since_mark(op_at);
        if (items.size() % 2) fail(op_at, "SETITEMS with an odd number of keys and values");
        auto& d = top(op_at);
        if (d->kind != Node::Dict) fail(op_at, "SETITEMS on something that is not a dict");
        for (size_t j = 0; j < items.size(); j += 2) d->entries.emplace_back(items[j], items[j + 1]);
        return;
      }
      case 'p': memo_put(text_integer(line(), op_at)->i, op_at); return;
      case 'q': memo_put(le(1), op_at); return;
      case 'r': memo_put(le(4), op_at); return;
      case 0x94: memo_put(memo_.size(), op_at); return;  // MEMOIZE
      case 'g': {
        const auto n = text_integer(line(), op_at)->i;
        if (n < 0) fail(op_at, "a negative memo index");
        memo_get(static_cast<uint64_t>(n), op_at);
        return;
      }
      case 'h': memo_get(le(1), op_at); return;
      case 'j': memo_get(le(4), op_at); return;
      default: break;
    }
    if (const char* name = opcode_name(op))
      fail(op_at, fmt::format("opcode {} (0x{:02x}) is not plain data; refused, nothing is ever executed{}", name, op,
                              op == 'S' || op == 'V' ? " (protocol 0 text strings are not read)" : ""));
    fail(op_at, fmt::format("0x{:02x} is not a pickle opcode", op));
  }

  std::string key_text(const Node& k) {
    switch (k.kind) {
      case Node::Str: return k.s;
      case Node::Int: return std::to_string(k.i);
      case Node::UInt: return std::to_string(k.u);
      case Node::Bool: return k.i ? "True" : "False";
      case Node::None: return "None";
      default: throw PickleError("a dict key that is not a string, an integer, a boolean or None");
    }
  }

  nlohmann::json to_json(const Node& n, size_t depth, size_t& values) {
    if (++values > limits_.max_values)
      throw PickleError(fmt::format("the pickle expands to more than {} values (shared values count each time)",
                                    limits_.max_values));
    if (depth > limits_.max_depth)
      throw PickleError(fmt::format("containers nested more than {} deep (or a container holds itself)",
                                    limits_.max_depth));
    switch (n.kind) {
      case Node::None: return nullptr;
      case Node::Bool: return n.i != 0;
      case Node::Int: return n.i;
      case Node::UInt: return n.u;
      case Node::Float: return n.f;
      case Node::Str:
      case Node::Bytes:
        if ((text_bytes_ += n.s.size()) > limits_.max_text_bytes)
          throw PickleError(fmt::format("the pickle expands to more than {} bytes of strings (shared ones count "
                                        "each time)", limits_.max_text_bytes));
        if (n.kind == Node::Str) return n.s;
        return nlohmann::json::binary(std::vector<uint8_t>(n.s.begin(), n.s.end()));
      case Node::List:
      case Node::Tuple:
      case Node::Set: {
        nlohmann::json a = nlohmann::json::array();
        for (const auto& v : n.items) a.push_back(to_json(*v, depth + 1, values));
        return a;
      }
      case Node::Dict: {
        nlohmann::json o = nlohmann::json::object();
        for (const auto& [k, v] : n.entries) {
          if ((text_bytes_ += k->s.size()) > limits_.max_text_bytes)
            throw PickleError(fmt::format("the pickle expands to more than {} bytes of strings (shared ones count "
                                          "each time)", limits_.max_text_bytes));
          o[key_text(*k)] = to_json(*v, depth + 1, values);
        }
        return o;
      }
    }
    return nullptr;
  }

  std::string_view b_;
  PickleLimits limits_;
  size_t at_ = 0;
  std::vector<NodeP> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, NodeP> memo_;
  std::vector<std::unique_ptr<Node>> arena_;
  uint64_t text_bytes_ = 0;  // string and bytes produced by to_json
};

}  // namespace

nlohmann::json read_pickle(std::string_view bytes, const PickleLimits& limits) {
  return Reader(bytes, limits).read();
}

}  // namespace collcheck
