// Gloo's allreduce algorithms as implementations (--impl / --against gloo:<algo>).
//
// Debian's libgloo (0.5) ships four legacy algorithms (one class each, in place
// over a vector of pointers) and the options-based gloo::allreduce. Each rank
// gets a gloo::rendezvous::Context over Gloo's TCP transport, in either world:
// ranks as threads of this process, or one rank per MPI process under mpirun.
// The ranks meet through a store that lives on collcheck's own links
// (LinksStore): every set() is an all-gather of the key and its value, so no
// shared file system or store server is needed. TCP binds to 127.0.0.1 when
// every rank is on this node, else to the address this host's name resolves
// to. Contexts are kept per world size and dropped (reset) after a failed call.
//
// What Gloo can reduce, and how it differs from NCCL (README, "Findings"):
// - dtypes: every integer type, float16 (gloo::float16), float32, float64. It
//   has no bfloat16 and no fp8 type.
// - ops: sum, product, max, min. It has no avg and no pre-multiplied sum.
// - float max/min use std::max/std::min, not fmax/fmin: a NaN is kept when it
//   is the left operand and dropped when it is the right one, and of two equal
//   values (+0 and -0) the left one is kept. The result then depends on the
//   order of the reduction. This is checked as the documented deviation
//   "gloo-nan-order", which allows exactly NCCL's result, an input NaN, or a
//   zero of either sign where the result is zero.
// - Sum/product of signed integers use signed arithmetic: an overflow is
//   undefined behaviour in C++; with GCC it wraps, as NCCL's does.
#include <fmt/format.h>
#include <gloo/allreduce.h>
#include <gloo/config.h>
#include <gloo/allreduce_bcube.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <sys/resource.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <map>
#include <mutex>

#include "harness/peers/gloo_impl.h"
#include "harness/peers/gloo_deviations.h"
#include "harness/check/oracle.h"

namespace collcheck {

namespace {

enum class GlooAlgo { Ring, RingChunked, HalvingDoubling, Bcube, Allreduce, AllreduceBcube };

struct GlooAlgoInfo {
  const char* name;
  GlooAlgo algo;
  const char* summary;
};

constexpr GlooAlgoInfo kGlooAlgos[] = {
    {"ring", GlooAlgo::Ring, "gloo::AllreduceRing: reduce around the ring, then pass the result around"},
    {"ring_chunked", GlooAlgo::RingChunked, "gloo::AllreduceRingChunked: reduce-scatter + allgather in chunks"},
    {"halving_doubling", GlooAlgo::HalvingDoubling,
     "gloo::AllreduceHalvingDoubling: recursive halving/doubling, binary blocks for non-powers of two"},
    {"bcube", GlooAlgo::Bcube, "gloo::AllreduceBcube: BCube groups of base 2"},
    {"allreduce", GlooAlgo::Allreduce, "gloo::allreduce (options API), its default algorithm (ring)"},
    {"allreduce_bcube", GlooAlgo::AllreduceBcube, "gloo::allreduce (options API) with Algorithm::BCUBE"},
};

// A TCP device per address Gloo binds to, made once per process.
std::shared_ptr<gloo::transport::Device> tcp_device(const std::string& address) {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<gloo::transport::Device>> devices;
  std::lock_guard lk(mu);
  auto& dev = devices[address];
  if (!dev) {
    gloo::transport::tcp::attr a(address.c_str());
    dev = gloo::transport::tcp::CreateDevice(a);
  }
  return dev;
}

// 127.0.0.1 when every rank is on this rank's node, else this host's name.
std::string bind_address(const Links& links) {
  const int mine = links.node_of(links.rank());
  bool one_node = true;
  for (int r = 0; r < links.size(); ++r) one_node = one_node && links.node_of(r) == mine;
  if (one_node) return "127.0.0.1";
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) != 0) throw std::runtime_error("gloo: gethostname failed");
  return host;
}

// Gloo's rendezvous store on collcheck's links. Gloo 0.5's connectFullMesh
// has every rank set() the same keys in the same order (its host, then its
// pairs' addresses) and then get() and wait() for the others' keys, so each
// set() here is a collective: an all-gather of (key, value) over the links,
// under the call's tag and deadline. get() and wait() then read what arrived;
// a key that never came is an error that names it.
class LinksStore final : public gloo::rendezvous::Store {
 public:
  LinksStore(Links& links, Tag tag, Deadline deadline) : links_(links), tag_(tag), deadline_(deadline) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    std::vector<std::byte> mine(sizeof(uint64_t) + key.size() + data.size());
    const uint64_t key_size = key.size();
    std::memcpy(mine.data(), &key_size, sizeof key_size);
    std::memcpy(mine.data() + sizeof key_size, key.data(), key.size());
    if (!data.empty()) std::memcpy(mine.data() + sizeof key_size + key.size(), data.data(), data.size());
    values_[key] = data;
    const int p = links_.size(), me = links_.rank();
    // Sizes first, then the bytes.
    const uint64_t size = mine.size();
    std::vector<uint64_t> sizes(static_cast<size_t>(p));
    exchange(std::as_bytes(std::span(&size, 1)), [&](int r) { return std::as_writable_bytes(std::span(&sizes[static_cast<size_t>(r)], 1)); });
    std::vector<std::vector<std::byte>> theirs(static_cast<size_t>(p));
    for (int r = 0; r < p; ++r)
      if (r != me) theirs[static_cast<size_t>(r)].resize(sizes[static_cast<size_t>(r)]);
    exchange(mine, [&](int r) { return std::span<std::byte>(theirs[static_cast<size_t>(r)]); });
    for (int r = 0; r < p; ++r) {
      if (r == me) continue;
      const auto& b = theirs[static_cast<size_t>(r)];
      uint64_t n = 0;
      if (b.size() < sizeof n) throw std::runtime_error(fmt::format("gloo store: rank {} sent a short entry", r));
      std::memcpy(&n, b.data(), sizeof n);
      if (n > b.size() - sizeof n) throw std::runtime_error(fmt::format("gloo store: rank {} sent a bad key length", r));
      const std::string k(reinterpret_cast<const char*>(b.data()) + sizeof n, n);
      const auto* v = reinterpret_cast<const char*>(b.data()) + sizeof n + n;
      values_[k] = std::vector<char>(v, reinterpret_cast<const char*>(b.data()) + b.size());
    }
  }

  std::vector<char> get(const std::string& key) override {
    auto it = values_.find(key);
    if (it == values_.end())
      throw std::runtime_error(fmt::format("gloo store: rank {} asked for key '{}', which no rank set", links_.rank(), key));
    return it->second;
  }
  void wait(const std::vector<std::string>& keys) override {
    for (const auto& k : keys) get(k);
  }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds&) override { wait(keys); }

 private:
  // Sends `mine` to every other rank and receives each one's into into(r).
  template <typename Into>
  void exchange(std::span<const std::byte> mine, Into into) {
    const int p = links_.size(), me = links_.rank();
    std::vector<RequestPtr> reqs;
    for (int r = 0; r < p; ++r) {
      if (r == me) continue;
      reqs.push_back(links_.irecv(r, tag_, into(r)));
      reqs.push_back(links_.isend(r, tag_, mine));
    }
    for (auto& q : reqs) q->wait(deadline_);
  }

  Links& links_;
  Tag tag_;
  Deadline deadline_;
  std::map<std::string, std::vector<char>> values_;
};

// The contexts of every world size: every rank's in the thread world, this
// process's rank's in the MPI world.
struct GlooWorlds {
  std::mutex mu;
  struct World {
    uint64_t epoch = 0;
    std::vector<std::shared_ptr<gloo::Context>> ctx;
  };
  std::map<int, World> worlds;
};


template <typename T>
const gloo::ReductionFunction<T>* legacy_fn(Combine c) {
  switch (c) {
    case Combine::Sum: return gloo::ReductionFunction<T>::sum;
    case Combine::Prod: return gloo::ReductionFunction<T>::product;
    case Combine::Max: return gloo::ReductionFunction<T>::max;
    case Combine::Min: return gloo::ReductionFunction<T>::min;
  }
  return nullptr;
}

template <typename T>
gloo::AllreduceOptions::Func options_fn(Combine c) {
  using F = void (*)(void*, const void*, const void*, size_t);
  switch (c) {
    case Combine::Sum: return static_cast<F>(&gloo::sum<T>);
    case Combine::Prod: return static_cast<F>(&gloo::product<T>);
    case Combine::Max: return static_cast<F>(&gloo::max<T>);
    case Combine::Min: return static_cast<F>(&gloo::min<T>);
  }
  return nullptr;
}

template <typename T>
void run_typed(GlooAlgo algo, const std::shared_ptr<gloo::Context>& ctx, const AllReduceArgs& a) {
  const size_t bytes = a.count * sizeof(T);
  T* out = static_cast<T*>(a.recv);
  if (algo == GlooAlgo::Allreduce || algo == GlooAlgo::AllreduceBcube) {
    gloo::AllreduceOptions opts(ctx);
    if (algo == GlooAlgo::AllreduceBcube) opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::BCUBE);
    // Out of place for real: the options API takes an input and an output.
    if (a.send != a.recv) opts.setInput(const_cast<T*>(static_cast<const T*>(a.send)), a.count);
    opts.setOutput(out, a.count);
    opts.setReduceFunction(options_fn<T>(a.red.combine));
    opts.setTag(static_cast<uint32_t>(a.tag));
    opts.setTimeout(std::chrono::duration_cast<std::chrono::milliseconds>(a.deadline - Clock::now()));
    gloo::allreduce(opts);
    return;
  }
  // The legacy algorithms reduce in place.
  if (a.send != a.recv && bytes) std::memcpy(a.recv, a.send, bytes);
  if (a.count > static_cast<size_t>(INT_MAX))
    throw std::runtime_error(fmt::format("gloo's legacy algorithms take an int count; {} elements do not fit", a.count));
  const std::vector<T*> ptrs{out};
  const int n = static_cast<int>(a.count);
  const auto* fn = legacy_fn<T>(a.red.combine);
  switch (algo) {
    case GlooAlgo::Ring: gloo::AllreduceRing<T>(ctx, ptrs, n, fn).run(); break;
    case GlooAlgo::RingChunked: gloo::AllreduceRingChunked<T>(ctx, ptrs, n, fn).run(); break;
    case GlooAlgo::HalvingDoubling: gloo::AllreduceHalvingDoubling<T>(ctx, ptrs, n, fn).run(); break;
    case GlooAlgo::Bcube: gloo::AllreduceBcube<T>(ctx, ptrs, n, fn).run(); break;
    default: break;
  }
}

class GlooImplementation final : public Implementation {
 public:
  std::optional<std::string> unsupported_world(WorldKind w) const override {
    if (w == WorldKind::Sim) return std::string("gloo ") + kNeedsOwnThreads;
    return std::nullopt;
  }
  std::optional<std::string> threads_by_default() const override { return unsupported_world(WorldKind::Sim); }
  explicit GlooImplementation(const GlooAlgoInfo& info)
      : info_(info), name_(std::string("gloo:") + info.name), worlds_(std::make_shared<GlooWorlds>()) {}
  const std::string& name() const override { return name_; }

  bool forks_cleanly_after_use() const override { return false; }  // its TCP loop's epoll set is shared with a child
  std::optional<std::string> unsupported(DType t, RedOp op) const override {
    switch (t) {
      case DType::BFloat16:
      case DType::Fp8E4M3:
      case DType::Fp8E5M2:
        return fmt::format("Gloo {}.{} has no {} type", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, dtype_name(t));
      default: break;
    }
    if (op == RedOp::Avg || op == RedOp::PreMulSum)
      return fmt::format("Gloo has no {} reduction (only sum, product, max, min)", op_name(op));
    return std::nullopt;
  }

  const Deviation* deviation(DType t, RedOp op) const override {
    return gloo_deviation(t, op, info_.algo != GlooAlgo::Allreduce && info_.algo != GlooAlgo::AllreduceBcube);
  }

  void reset(int p) const override {
    std::lock_guard lk(worlds_->mu);
    auto& w = worlds_->worlds[p];
    ++w.epoch;
    w.ctx.clear();
  }

  void all_reduce(const AllReduceArgs& a) const override {
    if (auto why = unsupported(a.red.dtype, a.red.op)) throw std::runtime_error(*why);
    const auto ctx = context(a.links, a.tag, a.deadline);
    try {
      switch (a.red.dtype) {
        case DType::Int8: run_typed<int8_t>(info_.algo, ctx, a); break;
        case DType::Uint8: run_typed<uint8_t>(info_.algo, ctx, a); break;
        case DType::Int32: run_typed<int32_t>(info_.algo, ctx, a); break;
        case DType::Uint32: run_typed<uint32_t>(info_.algo, ctx, a); break;
        case DType::Int64: run_typed<int64_t>(info_.algo, ctx, a); break;
        case DType::Uint64: run_typed<uint64_t>(info_.algo, ctx, a); break;
        case DType::Float16: run_typed<gloo::float16>(info_.algo, ctx, a); break;
        case DType::Float32: run_typed<float>(info_.algo, ctx, a); break;
        case DType::Float64: run_typed<double>(info_.algo, ctx, a); break;
        default: throw std::logic_error("unreachable: unsupported gloo dtype");
      }
    } catch (const gloo::Exception& e) {
      throw std::runtime_error(fmt::format("{} on rank {}: {}", name_, a.links.rank(), e.what()));
    }
  }

 private:
  // This rank's context for a world of p ranks; every rank of the world
  // connects at once through the shared store, under the world's epoch.
  std::shared_ptr<gloo::Context> context(Links& links, Tag tag, Deadline deadline) const {
    const int rank = links.rank(), p = links.size();
    uint64_t epoch;
    {
      std::lock_guard lk(worlds_->mu);
      auto& w = worlds_->worlds[p];
      if (w.ctx.size() != static_cast<size_t>(p)) {
        make_room(p);
        w.ctx.assign(static_cast<size_t>(p), nullptr);
      }
      if (auto c = w.ctx[static_cast<size_t>(rank)]) return c;
      epoch = w.epoch;
    }
    auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, p);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    ctx->setTimeout(std::max(left, std::chrono::milliseconds(1)));
    LinksStore store(links, tag, deadline);
    const std::string address = bind_address(links);
    try {
      auto dev = tcp_device(address);
      ctx->connectFullMesh(store, dev);
    } catch (const gloo::Exception& e) {
      throw std::runtime_error(fmt::format("{}: rank {} could not connect to its {} peers over TCP on {}: {}", name_,
                                           rank, p - 1, address, e.what()));
    }
    std::lock_guard lk(worlds_->mu);
    auto& w = worlds_->worlds[p];
    if (w.epoch == epoch) w.ctx[static_cast<size_t>(rank)] = ctx;
    return ctx;
  }

  // A full mesh of p ranks in this process holds p(p-1) sockets. Contexts are
  // cached per world size, and a verify run visits many sizes, so before a new
  // world connects, the other worlds are dropped when the total would pass half
  // the open-file limit (they reconnect when next used; no call is in flight
  // in them: the thread world runs one case at a time). Called with mu held.
  void make_room(int p) const {
    rlimit lim{};
    const size_t budget = getrlimit(RLIMIT_NOFILE, &lim) == 0 ? static_cast<size_t>(lim.rlim_cur) / 2 : 512;
    auto sockets = [](int q) { return static_cast<size_t>(q) * static_cast<size_t>(q - 1); };
    if (sockets(p) > budget)
      throw std::runtime_error(fmt::format("{}: a world of {} ranks needs {} sockets in this process, more than half "
                                           "the open-file limit ({}); raise it (ulimit -n) or pass --max-ranks",
                                           name_, p, sockets(p), budget * 2));
    size_t held = sockets(p);
    for (const auto& [q, w] : worlds_->worlds)
      if (q != p && !w.ctx.empty()) held += sockets(q);
    if (held <= budget) return;
    for (auto& [q, w] : worlds_->worlds) {
      if (q == p || w.ctx.empty()) continue;
      ++w.epoch;
      w.ctx.clear();
    }
  }

  const GlooAlgoInfo& info_;
  std::string name_;
  std::shared_ptr<GlooWorlds> worlds_;
};

}  // namespace

std::string gloo_algorithm_choices() {
  std::string s;
  for (const auto& a : kGlooAlgos) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

std::vector<std::string> gloo_algorithms() {
  std::vector<std::string> v;
  for (const auto& a : kGlooAlgos) v.emplace_back(a.name);
  return v;
}

std::string gloo_version() {
  return fmt::format("{}.{}.{}", GLOO_VERSION_MAJOR, GLOO_VERSION_MINOR, GLOO_VERSION_PATCH);
}

ImplPtr make_gloo_implementation(std::string_view algo) {
  for (const auto& a : kGlooAlgos)
    if (algo == a.name) return std::make_shared<GlooImplementation>(a);
  throw ImplementationError(fmt::format("unknown gloo algorithm '{}'; allowed: gloo:{{{}}}", algo,
                                        gloo_algorithm_choices()));
}

}  // namespace collcheck
