// The sweep's reports beside its rows: the memory-traffic bound, the
// alpha-beta model, one implementation against another, and the JSON file.
#include "harness/run/sweep.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <thread>

#include "harness/check/oracle.h"
#include "harness/check/output_check.h"
#include "harness/model/atomic_file.h"
#include "harness/run/sweep_detail.h"
#include "harness/session/session.h"

namespace collcheck {

// The memory-traffic bound of the ring (issue 16): the bytes it must read
// and write, over memcpy's rate of reading and writing in the same run.
// Per rank, the reduce-scatter's p-1 steps each read two chunks of N/p (its
// own, the one received) and write one; the all-gather's p-1 steps read one
// and write one: 5 (p-1) N / p, or 5 (p-1) N over the p ranks, with a
// transport that moves nothing itself (a real one only adds). memcpy reads
// and writes each byte it copies once: 2 bytes of traffic per byte copied.
// Ranks as threads only: they share this process's memory, which is what the
// memcpy measures; MPI processes on several hosts have memories of their own.
void print_traffic_bound(Events& ev, const SweepOptions& o, const std::vector<SweepRow>& rows, int p, size_t largest,
                         size_t aw) {
  if (p < 2 || largest == 0) return;
  const int cores = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int threads = std::min(p, cores);
  const double copy = memcpy_bandwidth_threads(largest, std::max(o.iters, 3), threads);
  if (copy <= 0) return;
  ev.print(
             "#\n# memory-traffic bound of the ring: 5(p-1)N bytes read and written over p = {} ranks (reduce-scatter\n"
             "# 3, all-gather 2 per chunk of N/p per step), at memcpy's read+write rate on {} thread{} at once\n"
             "# ({} core{}): {:.3f} GB/s copied, {:.3f} GB/s of traffic (same run)\n",
             p, threads, threads == 1 ? "" : "s", cores, cores == 1 ? "" : "s", copy, 2 * copy);
  for (const auto& r : rows) {
    if (r.algo != "ring" || r.bytes != largest || !r.skipped.empty() || r.time_us <= 0) continue;
    const double bound_us = 5.0 * (p - 1) * static_cast<double>(r.bytes) / (2 * copy * 1e9) * 1e6;
    ev.print("#   {:>{}} {:>9} {:>9} {:>12} B: {:>10.1f} us, bound {:>10.1f} us: {:.1f} % of the bound\n", r.algo,
               aw, dtype_name(r.dtype), op_name(r.op), r.bytes, r.time_us, bound_us, 100 * bound_us / r.time_us);
  }
}

// Measured against modelled, row by row, and ring against hierarchical where
// both were swept: who wins, by how much, and whether the model agrees.
void print_model(Events& ev, const SweepOptions& o, const std::vector<SweepRow>& rows, int p, int nodes) {
  const double alpha = o.inter_latency_us / 1e6, bw = o.inter_bandwidth_mbps * 1e6;
  ev.print("#\n# alpha-beta model of the inter-node links: alpha = {} us{}, {} nodes of {} ranks\n",
             o.inter_latency_us, bw > 0 ? fmt::format(", 1/beta = {} MB/s", o.inter_bandwidth_mbps) : "",
             nodes, o.ranks_per_node > 0 ? fmt::format("{}", o.ranks_per_node) : "the world's");
  ev.print("#   ring 2(p-1)(alpha + N/p beta); hierarchical 2(L-1)(alpha + N/L beta) among the leaders, its "
                  "intra-node tree not modelled\n");
  ev.print("# {:>12} {:>9} {:>9} {:>13} {:>10} {:>10} {:>13}\n", "size(B)", "type", "redop", "algo",
             "time(us)", "model(us)", "unmodelled(us)");
  for (const auto& r : rows)
    if (auto m = alpha_beta_seconds(r.algo, p, nodes, r.bytes, alpha, bw))
      ev.print("  {:>12} {:>9} {:>9} {:>13} {:>10.1f} {:>10.1f} {:>13.1f}\n", r.bytes, dtype_name(r.dtype),
                 op_name(r.op), r.algo, r.time_us, *m * 1e6, r.time_us - *m * 1e6);
  bool header = false;
  for (const auto& ring : rows) {
    if (ring.algo != "ring") continue;
    for (const auto& h : rows) {
      if (h.algo != "hierarchical" || h.bytes != ring.bytes || h.dtype != ring.dtype || h.op != ring.op) continue;
      const auto mr = alpha_beta_seconds("ring", p, nodes, ring.bytes, alpha, bw);
      const auto mh = alpha_beta_seconds("hierarchical", p, nodes, h.bytes, alpha, bw);
      if (!header) {
        ev.print("#\n# ring against hierarchical, same run: time(ring) / time(hierarchical), above 1 when "
                        "hierarchical wins\n# {:>12} {:>9} {:>9} {:>10} {:>10} {:>14}\n",
                   "size(B)", "type", "redop", "measured", "model", "winner");
        header = true;
      }
      const double measured = h.time_us > 0 ? ring.time_us / h.time_us : 0;
      const double model = mr && mh && *mh > 0 ? *mr / *mh : 0;
      ev.print("  {:>12} {:>9} {:>9} {:>10.2f} {:>10.2f} {:>14}\n", ring.bytes, dtype_name(ring.dtype),
                 op_name(ring.op), measured, model, measured > 1 ? "hierarchical" : "ring");
    }
  }
}

// Each --algo row's busbw over each peer's on the same row (size, dtype, op).
void print_against(Events& ev, const SweepOptions& o, const std::vector<SweepRow>& rows) {
  ev.print("#\n# against the peers, same run: busbw(algo) / busbw(peer), above 1 when the algorithm is faster\n");
  ev.print("# {:>12} {:>9} {:>9} {:>12}", "size(B)", "type", "redop", "algo");
  for (const auto& peer : o.against) ev.print(" {:>20}", "vs " + peer);
  ev.print("\n");
  for (const auto& r : rows) {
    if (r.peer) continue;
    ev.print("  {:>12} {:>9} {:>9} {:>12}", r.bytes, dtype_name(r.dtype), op_name(r.op), r.algo);
    for (const auto& peer : o.against) {
      std::string cell = "-";
      for (const auto& q : rows)
        if (q.peer && q.algo == peer && q.bytes == r.bytes && q.dtype == r.dtype && q.op == r.op) {
          if (!q.skipped.empty() || !r.skipped.empty()) cell = "skipped";
          else if (!q.error.empty() || !r.error.empty()) cell = "failed";
          else if (q.busbw > 0) cell = fmt::format("{:.2f}", r.busbw / q.busbw);
        }
      ev.print(" {:>20}", cell);
    }
    ev.print("\n");
  }
}

nlohmann::json sweep_row_json(const SweepOptions& o, const SweepRow& x) {
  nlohmann::json perf{{"time", x.time_us}, {"algbw", x.algbw}, {"busbw", x.busbw}, {"wrong", x.wrong}};
  return {{"size", x.bytes},
          {"count", x.count},
          {"type", std::string(dtype_name(x.dtype))},
          {"redop", std::string(op_name(x.op))},
          {"root", -1},
          {"algo", x.algo},
          {o.inplace ? "in-place" : "out-of-place", perf},
          {"busbw_samples", x.busbw_samples},
          {"peer", x.peer},
          {"skipped", x.skipped},
          {"memcpy_samples", x.memcpy_samples},
          {"error", x.error}};
}

namespace {

// --json FILE: the row events kept, and written as one document at the end.
class SweepJsonSink : public EventSink {
 public:
  SweepJsonSink(std::string path, nlohmann::json header) : path_(std::move(path)), header_(std::move(header)) {}
  void on(const Event& e) override {
    if (const auto* r = std::get_if<RowEvent>(&e)) rows_.push_back(r->row);
  }
  void close() override {
    const nlohmann::json doc{{"collcheck", header_}, {"results", rows_}};
    try {
      write_file_atomically(path_, doc.dump(2) + "\n");
    } catch (const std::exception& e) {
      throw std::runtime_error(fmt::format("--json {}: {}", path_, e.what()));
    }
  }

 private:
  std::string path_;
  nlohmann::json header_;
  nlohmann::json rows_ = nlohmann::json::array();
};

}  // namespace

std::shared_ptr<EventSink> sweep_json_sink(const std::string& path, const SweepOptions& o, const Session& session,
                                           const std::string& version) {
  const std::string world = session.is_mpi() ? fmt::format("mpi:{}", session.processes()) : session.name();
  return std::make_shared<SweepJsonSink>(path, nlohmann::json{{"version", version},
                                                              {"command", "sweep"},
                                                              {"world", world},
                                                              {"ranks", o.ranks},
                                                              {"iters", o.iters},
                                                              {"warmup", o.warmup},
                                                              {"reps", o.reps},
                                                              {"check", o.check},
                                                              {"seed", o.seed}});
}

}  // namespace collcheck
