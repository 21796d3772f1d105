// The plugin adapter: loads a shared library that implements
// harness/include/collcheck/plugin.h and runs it as an Implementation. The
// adapter is where the ABI's rules are enforced: tags stay in the call's range,
// request handles are ones we issued, nothing is left pending at return, and a
// plugin that reports success after a failed link operation is caught.
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>
#include <unordered_set>

#include "collcheck/plugin.h"
#include "harness/peers/implementation.h"
#include "impl/kernels.h"
#include "impl/sched.h"

namespace collcheck {

namespace {

using AbiVersionFn = int (*)();
using NameFn = const char* (*)();
using PluginAllReduceFn = int (*)(const collcheck_call*, const collcheck_links*);
using FiberSafeFn = int (*)();

int abi_dtype(DType t) {
  switch (t) {
    case DType::Int8: return COLLCHECK_INT8;
    case DType::Uint8: return COLLCHECK_UINT8;
    case DType::Int32: return COLLCHECK_INT32;
    case DType::Uint32: return COLLCHECK_UINT32;
    case DType::Int64: return COLLCHECK_INT64;
    case DType::Uint64: return COLLCHECK_UINT64;
    case DType::Float16: return COLLCHECK_FLOAT16;
    case DType::BFloat16: return COLLCHECK_BFLOAT16;
    case DType::Float32: return COLLCHECK_FLOAT32;
    case DType::Float64: return COLLCHECK_FLOAT64;
    case DType::Fp8E4M3: return COLLCHECK_FP8_E4M3;
    case DType::Fp8E5M2: return COLLCHECK_FP8_E5M2;
  }
  return -1;
}

int abi_op(RedOp op) {
  switch (op) {
    case RedOp::Sum: return COLLCHECK_SUM;
    case RedOp::Prod: return COLLCHECK_PROD;
    case RedOp::Max: return COLLCHECK_MAX;
    case RedOp::Min: return COLLCHECK_MIN;
    case RedOp::Avg: return COLLCHECK_AVG;
    case RedOp::PreMulSum: return COLLCHECK_PREMULSUM;
  }
  return -1;
}

struct Request {
  RequestPtr req;
  int peer;
  Tag tag;
  bool send;
};

// The state behind collcheck_links::ctx for one call on one rank.
struct CallContext {
  const AllReduceArgs& a;
  std::unordered_set<Request*> live;
  std::string plugin_error;  // from set_error()
  std::string link_error;    // the first link operation that failed
  uint64_t scalar = 0;

  explicit CallContext(const AllReduceArgs& args) : a(args) {}
  ~CallContext() {
    for (Request* r : live) delete r;  // cancels anything still pending
  }

  int fail(std::string msg) {
    if (link_error.empty()) link_error = std::move(msg);
    return 1;
  }
  bool tag_ok(uint64_t tag) const { return tag >= a.tag && tag < a.tag + 256; }

  int post(bool send, int peer, uint64_t tag, void* buf, size_t bytes, collcheck_request** out) {
    if (!out) return fail("isend/irecv called with a null request pointer");
    *out = nullptr;
    if (peer < 0 || peer >= a.links.size() || peer == a.links.rank())
      return fail(fmt::format("{} to invalid peer {} (rank {} of {})", send ? "isend" : "irecv", peer,
                              a.links.rank(), a.links.size()));
    if (!tag_ok(tag))
      return fail(fmt::format("{} with tag {:#x} outside this call's range [{:#x}, {:#x})", send ? "isend" : "irecv",
                              tag, a.tag, a.tag + 256));
    try {
      auto r = std::make_unique<Request>();
      r->peer = peer;
      r->tag = tag;
      r->send = send;
      if (send) {
        r->req = a.links.isend(peer, tag, {static_cast<const std::byte*>(buf), bytes});
      } else {
        r->req = a.links.irecv(peer, tag, {static_cast<std::byte*>(buf), bytes});
      }
      live.insert(r.get());
      *out = reinterpret_cast<collcheck_request*>(r.release());
      return 0;
    } catch (const std::exception& e) {
      return fail(e.what());
    }
  }

  Request* lookup(collcheck_request* h, const char* fn) {
    auto* r = reinterpret_cast<Request*>(h);
    if (!live.count(r)) {
      fail(fmt::format("{}() on a request handle that is not live (never issued, or already waited/cancelled)", fn));
      return nullptr;
    }
    return r;
  }
};

CallContext& ctx_of(void* ctx) { return *static_cast<CallContext*>(ctx); }

int cb_isend(void* ctx, int peer, uint64_t tag, const void* buf, size_t bytes, collcheck_request** req) {
  return ctx_of(ctx).post(true, peer, tag, const_cast<void*>(buf), bytes, req);
}
int cb_irecv(void* ctx, int peer, uint64_t tag, void* buf, size_t bytes, collcheck_request** req) {
  return ctx_of(ctx).post(false, peer, tag, buf, bytes, req);
}
int cb_test(void* ctx, collcheck_request* h, int* done) {
  auto& c = ctx_of(ctx);
  Request* r = c.lookup(h, "test");
  if (!r) return 1;
  try {
    const bool d = r->req->test();
    if (done) *done = d ? 1 : 0;
    return 0;
  } catch (const std::exception& e) {
    return c.fail(e.what());
  }
}
int cb_wait(void* ctx, collcheck_request* h) {
  auto& c = ctx_of(ctx);
  Request* r = c.lookup(h, "wait");
  if (!r) return 1;
  std::unique_ptr<Request> owned(r);
  c.live.erase(r);
  try {
    r->req->wait(c.a.deadline);
    return 0;
  } catch (const std::exception& e) {
    return c.fail(e.what());
  }
}
void cb_cancel(void* ctx, collcheck_request* h) {
  auto& c = ctx_of(ctx);
  Request* r = c.lookup(h, "cancel");
  if (!r) return;
  c.live.erase(r);
  delete r;
}
void cb_set_error(void* ctx, const char* msg) { ctx_of(ctx).plugin_error = msg ? msg : "(null message)"; }
void cb_combine(void* ctx, void* inout, const void* in, size_t count) {
  const Reduction& red = ctx_of(ctx).a.red;
  reduce(inout, in, count, red.dtype, red.combine);
}
void cb_premul(void* ctx, void* out, const void* in, size_t count) { apply_pre(ctx_of(ctx).a.red, out, in, count); }
void cb_postdiv(void* ctx, void* buf, size_t count) { apply_post(ctx_of(ctx).a.red, buf, count); }
// The world's clock (sched::now: virtual time in the simulated world).
uint64_t cb_ns_left(void* ctx) {
  const auto left = ctx_of(ctx).a.deadline - sched::now();
  return left.count() <= 0 ? 0 : static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(left).count());
}
uint64_t cb_now_ns(void*) {
  const auto t = sched::now().time_since_epoch();
  return static_cast<uint64_t>(std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::nanoseconds>(t).count()));
}

class PluginImplementation final : public Implementation {
 public:
  using OrderFn = int (*)(int, size_t, size_t, int*, size_t);
  PluginImplementation(std::string spec, void* handle, PluginAllReduceFn fn, std::string label, OrderFn order,
                       bool fiber_safe)
      : spec_(std::move(spec)), handle_(handle), fn_(fn), label_(std::move(label)), order_(order),
        fiber_safe_(fiber_safe) {}
  // The plugin ABI has no nodes: a plugin's order is the same on every topology.
  bool reduction_order(int p, size_t count, size_t index, std::span<const int>,
                       std::vector<int>& postfix) const override {
    if (!order_) return false;
    const size_t cap = 2 * static_cast<size_t>(p) - 1;
    const size_t at = postfix.size();
    postfix.resize(at + cap);
    const int n = order_(p, count, index, postfix.data() + at, cap);
    if (n == -1) {  // unknown: the ABI's one way to declare none
      postfix.resize(at);
      return false;
    }
    if (n < 0 || static_cast<size_t>(n) > cap) {
      postfix.resize(at);
      throw ImplementationError(fmt::format("{}: collcheck_plugin_reduction_order returned {} for element [{}] of {} "
                                            "over {} ranks; the ABI allows -1 (unknown) or 0..{} (the capacity, 2p - 1)",
                                            label_, n, index, count, p, cap));
    }
    postfix.resize(at + static_cast<size_t>(n));
    return true;
  }
  // The library stays loaded for the life of the process: a hung plugin
  // thread may still be executing its code.
  const std::string& name() const override { return spec_; }
  bool untrusted() const override { return true; }
  // Threads unless the plugin declares its ranks may share one thread
  // (collcheck_plugin_fiber_safe): it may keep thread-local state or make
  // its ranks wait on each other with primitives of its own.
  std::optional<std::string> threads_by_default() const override {
    if (fiber_safe_) return std::nullopt;
    return "a plugin may keep thread-local state or synchronize its ranks itself, unless it exports "
           "collcheck_plugin_fiber_safe() returning 1 (--world sim runs it as fibers anyway)";
  }
  // Whether or not its ranks may be fibers, a plugin may keep state (a cache,
  // a plan) from one case to the next: its cases never run side by side.
  std::optional<std::string> state_across_cases() const override { return "may keep state across cases"; }

  void all_reduce(const AllReduceArgs& a) const override {
    CallContext c(a);
    if (a.red.op == RedOp::PreMulSum) c.scalar = a.red.scalar_bits;
    const collcheck_call call{a.send,
                              a.recv,
                              a.count,
                              abi_dtype(a.red.dtype),
                              abi_op(a.red.op),
                              dtype_size(a.red.dtype),
                              a.red.op == RedOp::PreMulSum ? &c.scalar : nullptr,
                              a.tag};
    const collcheck_links links{&c,      a.links.rank(), a.links.size(), cb_isend,   cb_irecv,   cb_test,
                                cb_wait, cb_cancel,      cb_set_error,   cb_combine, cb_premul, cb_postdiv,
                                cb_ns_left, cb_now_ns};
    const int rc = fn_(&call, &links);
    if (rc != 0) {
      std::string why = !c.plugin_error.empty() ? c.plugin_error
                        : !c.link_error.empty() ? "link error: " + c.link_error
                                                : "no message (set_error was not called)";
      throw std::runtime_error(fmt::format("plugin {} returned {} on rank {}: {}", label_, rc, a.links.rank(), why));
    }
    if (!c.link_error.empty())
      throw std::runtime_error(fmt::format("plugin {} returned success on rank {} after a failed link operation: {}",
                                           label_, a.links.rank(), c.link_error));
    if (!c.live.empty()) {
      const Request* r = *c.live.begin();
      throw std::runtime_error(fmt::format(
          "plugin {} returned on rank {} with {} request(s) neither waited nor cancelled (e.g. {} rank {}, {})",
          label_, a.links.rank(), c.live.size(), r->send ? "isend to" : "irecv from", r->peer, describe_tag(r->tag)));
    }
  }

 private:
  std::string spec_;
  void* handle_;
  PluginAllReduceFn fn_;
  std::string label_;
  OrderFn order_ = nullptr;
  bool fiber_safe_ = false;
};

}  // namespace

ImplPtr load_plugin(const std::string& path) {
  // dlopen searches the library path for a bare name; a user who names a file
  // means that file.
  const std::string file = path.find('/') == std::string::npos ? "./" + path : path;
  void* h = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) throw ImplementationError(fmt::format("cannot load plugin '{}': {}", path, dlerror()));
  auto sym = [&](const char* name) { return dlsym(h, name); };
  auto version = reinterpret_cast<AbiVersionFn>(sym("collcheck_plugin_abi_version"));
  if (!version)
    throw ImplementationError(fmt::format("plugin '{}' does not export collcheck_plugin_abi_version "
                                          "(see collcheck/plugin.h)",
                                          path));
  const int v = version();
  // Fields are only added at the end: an older plugin never reads the newer ones.
  if (v < 1 || v > COLLCHECK_PLUGIN_ABI_VERSION)
    throw ImplementationError(fmt::format("plugin '{}' was built for plugin ABI version {}; this collcheck "
                                          "supports versions 1 to {}",
                                          path, v, COLLCHECK_PLUGIN_ABI_VERSION));
  auto fn = reinterpret_cast<PluginAllReduceFn>(sym("collcheck_all_reduce"));
  if (!fn)
    throw ImplementationError(fmt::format("plugin '{}' does not export collcheck_all_reduce (see collcheck/plugin.h)",
                                          path));
  std::string label = path;
  if (auto name = reinterpret_cast<NameFn>(sym("collcheck_plugin_name"))) {
    if (const char* n = name()) label = fmt::format("'{}' ({})", n, path);
  }
  auto order = reinterpret_cast<PluginImplementation::OrderFn>(sym("collcheck_plugin_reduction_order"));
  const auto fiber_safe = reinterpret_cast<FiberSafeFn>(sym("collcheck_plugin_fiber_safe"));
  return std::make_shared<PluginImplementation>("plugin:" + path, h, fn, label, order,
                                                fiber_safe != nullptr && fiber_safe() == 1);
}

}  // namespace collcheck
