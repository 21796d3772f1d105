#include "harness/run/sweep.h"
#include "harness/run/sweep_detail.h"

#include <fmt/format.h>

#include <atomic>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>

#include "harness/run/communicator.h"
#include "harness/peers/mpi_impl.h"
#include "harness/session/session.h"
#include "harness/check/oracle.h"
#include "harness/check/output_check.h"
#include "faults/nemesis.h"

namespace collcheck {

namespace {

// nccl-tests' all-reduce bus bandwidth factor (0 at p = 1: nothing crosses a link).
double busbw_factor(int p) { return 2.0 * (p - 1) / p; }

// A rank's links as the sweep runs on them: on the nodes asked for, with the
// inter-node slow link when asked for. `keep` owns the wrappers.
Links& sweep_links(const SweepOptions& o, RankContext& ctx, std::vector<std::unique_ptr<Links>>& keep) {
  Links* l = &ctx.links();
  if (o.ranks_per_node > 0) {
    keep.push_back(node_links(*l, o.ranks_per_node));
    l = keep.back().get();
  }
  if (o.inter_latency_us > 0 || o.inter_bandwidth_mbps > 0) {
    FaultSpec f;
    f.kind = "slow_link";
    f.fields = {{"edges", "inter-node"}, {"latency_ms", fmt::format("{}", o.inter_latency_us / 1e3)}};
    if (o.inter_bandwidth_mbps > 0) f.fields["bandwidth_mbps"] = fmt::format("{}", o.inter_bandwidth_mbps);
    if (auto w = find_nemesis("slow_link")->wrap(*l, f, l->rank())) {
      keep.push_back(std::move(w));
      l = keep.back().get();
    }
  }
  return *l;
}

SweepRow run_row(World& world, const SweepOptions& o, size_t count, DType t, RedOp op,
                 const std::string& algo, const ImplPtr& impl) {
  const int p = world.size();
  const size_t es = dtype_size(t);
  const size_t bytes = count * es;
  SweepRow row;
  row.bytes = bytes;
  row.count = count;
  row.dtype = t;
  row.op = op;
  row.algo = algo;
  if (auto why = impl->unsupported(t, op)) {
    row.skipped = *why;
    return row;
  }
  // Inputs are generated once; every run starts from a copy of them, and the
  // oracle and the "input untouched" check compare against them.
  std::vector<std::vector<std::byte>> pristine(static_cast<size_t>(p)), inputs(static_cast<size_t>(p));
  // Outputs framed by canaries (harness/check/output_check.h).
  std::vector<std::vector<std::byte>> outputs(static_cast<size_t>(p), framed(bytes));
  auto out_of = [&](int r) { return outputs[static_cast<size_t>(r)].data() + kCanary; };
  std::vector<const void*> in_ptrs;
  for (int r = 0; r < p; ++r) {
    auto& pr = pristine[static_cast<size_t>(r)];
    pr.resize(bytes);
    fill_input(pr.data(), count, t, op, p, r, o.seed, o.data);
    in_ptrs.push_back(pr.data());
  }
  auto reset_buffers = [&] {
    for (int r = 0; r < p; ++r) {
      const auto& pr = pristine[static_cast<size_t>(r)];
      if (o.inplace) {
        if (bytes > 0) std::memcpy(out_of(r), pr.data(), bytes);
      } else {
        inputs[static_cast<size_t>(r)] = pr;
      }
    }
  };
  auto send_of = [&](int r) -> const void* {
    return o.inplace ? static_cast<const void*>(out_of(r)) : static_cast<const void*>(inputs[static_cast<size_t>(r)].data());
  };
  const CommOptions copts{algo, o.timeout, impl};
  const auto limit = o.timeout * (o.iters + o.warmup + 2) + std::chrono::seconds(5);

  // Timed iterations.
  reset_buffers();
  const size_t reps = static_cast<size_t>(std::max(o.reps, 1));
  std::vector<std::vector<double>> seconds(static_cast<size_t>(p), std::vector<double>(reps, 0));
  WorldRun timed = world.run(
      [&](RankContext& ctx) {
        std::vector<std::unique_ptr<Links>> keep;
        Communicator comm(sweep_links(o, ctx, keep), copts);
        const size_t r = static_cast<size_t>(ctx.rank());
        for (int i = 0; i < o.warmup; ++i) comm.all_reduce(send_of(ctx.rank()), out_of(ctx.rank()), count, t, op, o.scalar);
        for (size_t k = 0; k < reps; ++k) {
          // sched::now(): in the simulated world, virtual time, so the sweep
          // prints the α-β model's prediction for each algorithm and size.
          ctx.barrier(sched::now() + o.timeout);
          const auto t0 = sched::now();
          for (int i = 0; i < o.iters; ++i) comm.all_reduce(send_of(ctx.rank()), out_of(ctx.rank()), count, t, op, o.scalar);
          seconds[r][k] = std::chrono::duration<double>(sched::now() - t0).count();
        }
      },
      limit * static_cast<int>(reps));
  if (!timed.ok()) {
    row.wrong = std::max<size_t>(count, 1);
    row.error = timed.failures();
    impl->reset(p);  // a library's per-world state (Gloo's contexts) starts over
    return row;
  }
  {
    std::vector<std::byte*> secs;
    for (auto& x : seconds) secs.push_back(reinterpret_cast<std::byte*>(x.data()));
    world.gather_bytes(secs, reps * sizeof(double));
  }
  // Each repetition's time is its slowest rank's; the row's, their mean.
  double total = 0;
  for (size_t k = 0; k < reps; ++k) {
    double slowest = 0;
    for (const auto& x : seconds) slowest = std::max(slowest, x[k]);
    const double sec = slowest / std::max(o.iters, 1);
    total += sec;
    row.busbw_samples.push_back(sec > 0 ? static_cast<double>(bytes) / sec / 1e9 * busbw_factor(p) : 0);
  }
  const double sec = total / static_cast<double>(reps);
  row.time_us = sec * 1e6;
  row.algbw = sec > 0 ? static_cast<double>(bytes) / sec / 1e9 : 0;
  row.busbw = row.algbw * busbw_factor(p);
  if (!o.check) return row;

  // One checked call on fresh inputs.
  reset_buffers();
  WorldRun checked = world.run(
      [&](RankContext& ctx) {
        std::vector<std::unique_ptr<Links>> keep;
        Communicator comm(sweep_links(o, ctx, keep), copts);
        comm.all_reduce(send_of(ctx.rank()), out_of(ctx.rank()), count, t, op, o.scalar);
      },
      o.timeout + std::chrono::seconds(5));
  if (!checked.ok()) {
    row.wrong = std::max<size_t>(count, 1);
    row.error = checked.failures();
    impl->reset(p);
    return row;
  }
  {  // the MPI world: every rank's output (canaries too) and input to the root
    std::vector<std::byte*> outs, ins;
    for (int r = 0; r < p; ++r) {
      outs.push_back(outputs[static_cast<size_t>(r)].data());
      if (!o.inplace) ins.push_back(inputs[static_cast<size_t>(r)].data());
    }
    world.gather_bytes(outs, outputs[0].size());
    if (!o.inplace) world.gather_bytes(ins, bytes);
  }
  if (!world.root()) return row;
  const Reduction red = resolve_reduction(t, op, p, o.scalar);
  std::vector<const void*> out_ptrs, after_ptrs;
  for (int r = 0; r < p; ++r) {
    out_ptrs.push_back(out_of(r));
    if (!o.inplace) after_ptrs.push_back(inputs[static_cast<size_t>(r)].data());
  }
  OutputCheck oc = check_outputs(red, in_ptrs, out_ptrs, after_ptrs, count);
  const Deviation* dev = impl->deviation(t, op);
  if (oc.wrong > 0 && dev) {
    // A library's documented deviation from NCCL's semantics: every element
    // of every rank again, each accepted where the oracle or the deviation's
    // outcomes allow it (counted), wrong otherwise.
    OutputCheck again;  // maxerr over the elements the oracle accepted
    std::vector<uint64_t> values(static_cast<size_t>(p));
    for (size_t i = 0; i < count; ++i) {
      for (int r = 0; r < p; ++r) values[static_cast<size_t>(r)] = load_element(t, in_ptrs[static_cast<size_t>(r)], i);
      const Expectation e = expect_element(red, values);
      for (int r = 0; r < p; ++r) {
        const uint64_t got = load_element(t, out_ptrs[static_cast<size_t>(r)], i);
        if (const Verdict v = judge(red, e, got); v.ok) {
          again.max_err_units = std::max(again.max_err_units, v.err_units);
          continue;
        }
        if (dev->allows(red, values, got)) {
          ++row.deviant;
        } else {
          ++again.wrong;
          if (again.first_problem.empty())
            again.first_problem = fmt::format("rank {} element {}: {} is neither NCCL's result nor an outcome of {}", r,
                                              i, format_element(t, got), dev->name);
        }
      }
    }
    for (size_t r = 0; r < after_ptrs.size(); ++r)  // inputs left alone: as check_outputs judged them
      if (difference(t, in_ptrs[r], after_ptrs[r], count)) {
        ++again.wrong;
        if (again.first_problem.empty()) again.first_problem = fmt::format("rank {}'s input buffer was modified", r);
      }
    oc = again;
    row.deviation = dev->name;
  }
  row.wrong = oc.wrong;
  row.max_err_units = oc.max_err_units;
  row.error = oc.first_problem;
  for (int r = 0; r < p; ++r) {
    if (auto w = stray_write(outputs[static_cast<size_t>(r)], bytes)) {
      row.wrong += 1;
      if (row.error.empty()) row.error = fmt::format("rank {} wrote outside its output buffer: {}", r, w->where(bytes, t));
    }
  }
  return row;
}

}  // namespace

SweepResult run_sweep(const SweepOptions& o, Events& events, const Session& session) {
  SweepResult result;
  const WorldLease world = session.world(o.ranks);
  // Only the root speaks: the other MPI ranks' events go nowhere.
  Events quiet;
  Events& ev = world->root() ? events : quiet;
  const bool premul = std::find(o.ops.begin(), o.ops.end(), RedOp::PreMulSum) != o.ops.end();
  // The algo column: as wide as the longest name (gloo:ring_chunked), at least 12.
  size_t aw = 12;
  for (const auto& a : o.algos) aw = std::max(aw, a.size());
  for (const auto& a : o.against) aw = std::max(aw, a.size());
  // The nodes the rows run on (node_map numbering).
  int nodes = 1;
  if (o.ranks_per_node > 0) {
    nodes = (world->size() + o.ranks_per_node - 1) / o.ranks_per_node;
  } else if (session.is_mpi()) {
    std::vector<int> ids = session.nodes();
    std::sort(ids.begin(), ids.end());
    nodes = static_cast<int>(std::unique(ids.begin(), ids.end()) - ids.begin());
  }
  const bool slow = o.inter_latency_us > 0 || o.inter_bandwidth_mbps > 0;
  ev.print("# collcheck sweep: {} ranks {}, {}, data {}, seed {}{}, {} iters, {} warmup, check {}\n",
             world->size(), fmt::format("{} ({} links)", world->how(), session.is_mpi() ? mpi_library_version() : "in-process"),
             o.inplace ? "in-place" : "out-of-place", data_class_name(o.data), o.seed,
             premul ? fmt::format(", premulsum scalar {}", o.scalar) : "", o.iters, o.warmup, o.check ? 1 : 0);
  if (nodes > 1 || o.ranks_per_node > 0 || session.is_mpi())
    ev.print("# nodes: {} ({}){}\n", nodes,
               o.ranks_per_node > 0 ? fmt::format("--ranks-per-node {}, simulated", o.ranks_per_node)
                                    : "MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)",
               slow ? fmt::format("; every inter-node edge slowed by the slow_link nemesis: {} us per transfer{}",
                                  o.inter_latency_us,
                                  o.inter_bandwidth_mbps > 0 ? fmt::format(", {} MB/s", o.inter_bandwidth_mbps) : "")
                    : "");
  ev.print("# busbw = algbw * 2(p-1)/p; maxerr is the largest |result - exact| in units of the oracle's bound\n");
  ev.print("#\n# {:>12} {:>12} {:>9} {:>9} {:>{}} {:>10} {:>11} {:>11} {:>8} {:>9}\n", "size(B)", "count", "type",
             "redop", "algo", aw, "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong", "maxerr");
  struct Spec {
    std::string algo;
    DType t;
    RedOp op;
    size_t count;
    ImplPtr impl;
    bool peer;
  };
  std::vector<Spec> specs;
  // One implementation object per name for the whole sweep: a library keeps
  // its per-world state (Gloo's connected contexts) from row to row.
  std::vector<std::pair<std::string, bool>> names;
  for (const auto& a : o.algos) names.emplace_back(a, false);
  for (const auto& a : o.against) names.emplace_back(a, true);
  for (const auto& [algo, peer] : names) {
    const ImplPtr impl = make_implementation(algo);
    for (DType t : o.dtypes)
      for (RedOp op : o.ops)
        for (size_t count : sweep_counts(o, t)) specs.push_back({algo, t, op, count, impl, peer});
  }
  auto print_row = [&](const SweepRow& row) {
    ev.emit(RowEvent{sweep_row_json(o, row)});
    if (!row.skipped.empty()) {
      ev.print("  {:>12} {:>12} {:>9} {:>9} {:>{}}   skipped: {}\n", row.bytes, row.count, dtype_name(row.dtype),
                 op_name(row.op), row.algo, aw, row.skipped);
          return;
    }
    const std::string err = o.check ? fmt::format("{:.3g}", row.max_err_units) : "N/A";
    ev.print("  {:>12} {:>12} {:>9} {:>9} {:>{}} {:>10.1f} {:>11.3f} {:>11.3f} {:>8} {:>9}\n", row.bytes,
               row.count, dtype_name(row.dtype), op_name(row.op), row.algo, aw, row.time_us, row.algbw, row.busbw,
               o.check ? fmt::format("{}", row.wrong) : "N/A", err);
    if (!row.error.empty()) ev.print("#   ^ {}\n", row.error);
    if (row.deviant > 0)
      ev.print("#   ^ {} element results differ from NCCL's as the documented deviation {} allows (checked, "
                      "counted, not wrong)\n", row.deviant, row.deviation);
    };
  if (o.reps <= 1) {
    for (const auto& sp : specs) {
      SweepRow row = run_row(*world, o, sp.count, sp.t, sp.op, sp.algo, sp.impl);
      row.peer = sp.peer;
      print_row(row);
      if (!row.peer) result.total_wrong += row.wrong;
      result.rows.push_back(std::move(row));
    }
  } else {
    // Repetitions in rounds over every row, not back to back: what a shared
    // machine does for a while (another job's burst) then falls on some
    // samples of every row, not on all samples of one row. Within a round the
    // same row (dtype, op, size) of every implementation runs back to back,
    // their order turning each round: the gate's side by side compares the
    // same row of two implementations round by round, and neither is always
    // first. Checked once, in the last round.
    const size_t n_impl = names.size(), per_impl = specs.size() / std::max<size_t>(n_impl, 1);
    std::vector<SweepRow> rows(specs.size());
    SweepOptions one = o;
    one.reps = 1;
    for (int k = 0; k < o.reps; ++k) {
      one.check = o.check && k == o.reps - 1;
      for (size_t step = 0; step < specs.size(); ++step) {
        const size_t impl_at = step % n_impl, row_at = step / n_impl;
        const size_t i = (k % 2 == 0 ? impl_at : n_impl - 1 - impl_at) * per_impl + row_at;
        SweepRow r = run_row(*world, one, specs[i].count, specs[i].t, specs[i].op, specs[i].algo, specs[i].impl);
        r.peer = specs[i].peer;
        SweepRow& acc = rows[i];
        if (!r.skipped.empty()) {
          acc = r;
          continue;
        }
        std::vector<double> mem = std::move(acc.memcpy_samples);
        if (world->root()) mem.push_back(memcpy_bandwidth(std::max<size_t>(r.bytes, 1), std::max(o.iters, 3)));
        const double time_sum = acc.time_us * k + r.time_us;
        std::vector<double> samples = std::move(acc.busbw_samples);
        samples.insert(samples.end(), r.busbw_samples.begin(), r.busbw_samples.end());
        const std::string error = acc.error.empty() ? r.error : acc.error;
        if (k == o.reps - 1 || !r.error.empty()) acc = r;
        acc.busbw_samples = std::move(samples);
        acc.memcpy_samples = std::move(mem);
        acc.error = error;
        acc.time_us = time_sum / (k + 1);
        const double sec = acc.time_us / 1e6;
        acc.algbw = sec > 0 ? static_cast<double>(acc.bytes) / sec / 1e9 : 0;
        acc.busbw = r.time_us > 0 ? acc.algbw * (r.busbw / std::max(r.algbw, 1e-300)) : 0;
      }
    }
    for (auto& row : rows) {
      print_row(row);
      if (!row.peer) result.total_wrong += row.wrong;
      result.rows.push_back(std::move(row));
    }
  }
  if (session.is_sim() && world->root()) {
    // Virtual time: a measured peer would compare a model with this host.
    ev.print("#\n# times are the alpha-beta model's prediction (virtual time), not measured: {}\n",
             session.sim_options()->model.describe());
  } else if (o.memcpy_peer && !result.rows.empty() && world->root()) {
    size_t largest = 0;
    for (const auto& r : result.rows) largest = std::max(largest, r.bytes);
    if (largest > 0) {
      const double mbw = memcpy_bandwidth(largest, std::max(o.iters, 3));
      ev.print("#\n# peer: memcpy of {} B in this process: {:.3f} GB/s (single thread, same run)\n", largest,
                 mbw);
      // One ratio per algorithm: float32 sum if swept, else the first dtype and op.
      const bool has_f32_sum = std::count(o.dtypes.begin(), o.dtypes.end(), DType::Float32) &&
                               std::count(o.ops.begin(), o.ops.end(), RedOp::Sum);
      const DType rt = has_f32_sum ? DType::Float32 : o.dtypes.front();
      const RedOp rop = has_f32_sum ? RedOp::Sum : o.ops.front();
      for (const auto& r : result.rows)
        if (r.bytes == largest && r.dtype == rt && r.op == rop && mbw > 0 && r.skipped.empty())
          ev.print("#   {:>{}} {:>9} {:>9}: busbw/memcpy = {:.3f}\n", r.algo, aw, dtype_name(r.dtype),
                     op_name(r.op), r.busbw / mbw);
      if (world->kind() == "threads") print_traffic_bound(ev, o, result.rows, world->size(), largest, aw);
    }
  }
  if (slow && nodes > 1 && world->root()) print_model(ev, o, result.rows, world->size(), nodes);
  if (!o.against.empty() && world->root()) print_against(ev, o, result.rows);
  ev.print("#\n# Out of bounds values : {} {}\n", result.total_wrong, result.total_wrong ? "FAILED" : "OK");
  if (!o.against.empty()) {
    size_t peer_wrong = 0;
    for (const auto& r : result.rows)
      if (r.peer) peer_wrong += r.wrong;
    ev.print("# peers' rows: {} wrong elements (checked and printed; the exit code is the --algo rows')\n",
               peer_wrong);
  }
  ev.print("# {} rows, {} wrong elements\n", result.rows.size(), result.total_wrong);
  return result;
}

}  // namespace collcheck
