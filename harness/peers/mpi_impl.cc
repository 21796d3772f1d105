// MPI_Allreduce of the MPI library as an implementation (--impl / --against mpi).
// It runs only in the MPI world (one rank per process), on the world's
// communicator for the case's ranks.
//
// Native and user-defined (see mpi_support() and the README table):
// - native MPI types and ops: int8..uint64 (MPI_INT8_T..MPI_UINT64_T), float32
//   (MPI_FLOAT) and float64 (MPI_DOUBLE) with MPI_SUM, MPI_PROD, MPI_MAX, MPI_MIN.
// - user-defined: Open MPI 4.1 has no float16, bfloat16 or fp8 type. These
//   travel as contiguous byte types of the element size, reduced by
//   MPI_Op_create'd functions that apply collcheck's NCCL semantics
//   (impl/kernels.h), so the ops are NCCL's and only the reduction order is MPI's.
// - avg and premulsum (MPI has neither) are composed as NCCL executes them:
//   collcheck pre-multiplies each input (apply_pre), MPI sums (native or
//   user-defined as above), and collcheck divides integer avg (apply_post).
// Known deviations, checked as such (README, Findings):
// - Open MPI's MPI_MAX/MPI_MIN on floats compare with > and <, so NaN and
//   signed-zero handling depends on the order ("mpi-nan-order", the same
//   outcome set as Gloo's);
// - Open MPI 4.1's op/avx saturates int8/uint8 sums ("ompi-avx-saturating-int8",
//   "-mixed" where the algorithm reduces an element on both paths).
//
// MPI_Allreduce cannot be given a deadline. The MPI world runs every case on a
// watched thread: a call that never returns is reported by rank 0 when the
// case's deadline passes, and the job is ended (MPI_Abort); it never hangs.
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <bitset>
#include <climits>
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>

#include "harness/peers/implementation.h"
#include "harness/world/mpi_world.h"
#include "harness/peers/mpi_impl.h"
#include "harness/check/oracle.h"
#include "impl/kernels.h"

namespace collcheck {

namespace {

MPI_Datatype native_type(DType t) {
  switch (t) {
    case DType::Int8: return MPI_INT8_T;
    case DType::Uint8: return MPI_UINT8_T;
    case DType::Int32: return MPI_INT32_T;
    case DType::Uint32: return MPI_UINT32_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::Uint64: return MPI_UINT64_T;
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    default: return MPI_DATATYPE_NULL;
  }
}

MPI_Op native_op(Combine c) {
  switch (c) {
    case Combine::Sum: return MPI_SUM;
    case Combine::Prod: return MPI_PROD;
    case Combine::Max: return MPI_MAX;
    case Combine::Min: return MPI_MIN;
  }
  return MPI_OP_NULL;
}

// User-defined types and ops for the dtypes MPI lacks: one contiguous byte
// type per such dtype, one op per combine step. The op function finds the
// dtype from the datatype handle.
struct UserDefined {
  std::once_flag once;
  MPI_Datatype type[kAllDTypes.size()];
  MPI_Op op[4];
};
UserDefined g_user;

DType dtype_of(MPI_Datatype t) {
  for (DType d : kAllDTypes)
    if (g_user.type[static_cast<int>(d)] == t) return d;
  return DType::Float32;  // unreachable: only our types reach our ops
}

template <Combine C>
void user_fn(void* in, void* inout, int* len, MPI_Datatype* type) {
  reduce(inout, in, static_cast<size_t>(*len), dtype_of(*type), C);
}

void make_user_defined() {
  std::call_once(g_user.once, [] {
    for (DType d : kAllDTypes) {
      auto& t = g_user.type[static_cast<int>(d)];
      MPI_Type_contiguous(static_cast<int>(dtype_size(d)), MPI_BYTE, &t);
      MPI_Type_commit(&t);
    }
    MPI_Op_create(&user_fn<Combine::Sum>, 1, &g_user.op[0]);
    MPI_Op_create(&user_fn<Combine::Prod>, 1, &g_user.op[1]);
    MPI_Op_create(&user_fn<Combine::Max>, 1, &g_user.op[2]);
    MPI_Op_create(&user_fn<Combine::Min>, 1, &g_user.op[3]);
  });
}

const Deviation kMpiNanOrder{
    "mpi-nan-order",
    "Open MPI's MPI_MAX/MPI_MIN on float and double compare with > and <: with a NaN among the inputs the "
    "result can be the NaN or any input, and of +0 and -0 either may come out, depending on the reduction order "
    "(NCCL: fmax/fmin, NaN dropped, +0 > -0)",
    &compare_select_outcomes};

// Open MPI 4.1's vectorized op component (op/avx) adds int8 and uint8 with
// saturating instructions on its vector path (blocks of 16 elements or more),
// where NCCL and its own scalar path wrap. Which path a step takes depends on
// where the element falls in the block that step reduces, so the model depends
// on the algorithm (mpi_int8_deviation):
// - uniform: every step of an element takes the same path (algorithms 1 to 5
//   reduce the same block of an element at every step): NCCL's wrapped sum, or
//   a saturating sum in some order. For uint8 every order saturates alike:
//   min(255, sum). For int8 any order lies between the fold that adds every
//   positive term first and the one that adds every negative term first.
// - mixed: each binary step may take either path (Rabenseifner's recursive
//   halving reduces an element in blocks of a different length at each step;
//   the default decision may pick it): every binary tree, each step wrapping or
//   saturating, exact up to 8 ranks, any value above.
int sat8(bool is_signed, int v) { return is_signed ? std::clamp(v, -128, 127) : std::clamp(v, 0, 255); }

struct Int8Terms {
  bool sgn;
  std::vector<int> terms;  // each rank's value after the pre-multiply, as an integer
};

Int8Terms int8_terms(const Reduction& red, std::span<const uint64_t> values) {
  Int8Terms t{red.dtype == DType::Int8, {}};
  const int scalar = t.sgn ? static_cast<int8_t>(red.scalar_bits) : static_cast<uint8_t>(red.scalar_bits);
  for (uint64_t v : values) {
    int x = t.sgn ? static_cast<int8_t>(v) : static_cast<uint8_t>(v);
    if (red.premul) x = t.sgn ? static_cast<int8_t>(static_cast<uint8_t>(x * scalar)) : static_cast<uint8_t>(x * scalar);
    t.terms.push_back(x);
  }
  return t;
}

uint64_t int8_post(const Reduction& red, int v) {
  if (red.postdiv) v /= static_cast<int>(red.divisor);  // truncates toward zero, as NCCL's integer avg
  return static_cast<uint64_t>(static_cast<uint8_t>(v));
}

std::vector<uint64_t> saturating_sum_outcomes(const Reduction& red, std::span<const uint64_t> values) {
  const Int8Terms t = int8_terms(red, values);
  auto fold = [&](bool positives_first) {
    int acc = 0;
    for (int pass = 0; pass < 2; ++pass)
      for (int x : t.terms)
        if ((x >= 0) == (pass == 0 ? positives_first : !positives_first)) acc = sat8(t.sgn, acc + x);
    return acc;
  };
  const int lo = std::min(fold(true), fold(false)), hi = std::max(fold(true), fold(false));
  std::vector<uint64_t> out;
  for (int v = lo; v <= hi; ++v) out.push_back(int8_post(red, v));
  add_nccl_result(red, values, out);
  return out;
}

// The mixed model's sums before the post-divide, as a set over the 256 byte
// values (bit v + 128 for int8, v for uint8), by dynamic programming over
// subsets of the ranks: a subset's set is every split's pairwise wrap or
// saturation. p > 8: every value.
std::bitset<256> mixed_sums(const Int8Terms& t) {
  const size_t p = t.terms.size();
  if (p > 8) return std::bitset<256>().set();
  const int base = t.sgn ? 128 : 0;
  std::vector<std::bitset<256>> set(size_t{1} << p);
  for (size_t r = 0; r < p; ++r) set[size_t{1} << r].set(static_cast<size_t>(t.terms[r] + base));
  for (size_t s = 1; s < set.size(); ++s) {
    if ((s & (s - 1)) == 0) continue;
    // Each unordered split once: the part holding the lowest rank is `a`.
    const size_t low = s & (~s + 1);
    for (size_t a = (s - 1) & s; a > 0; a = (a - 1) & s) {
      if (!(a & low)) continue;
      const auto& A = set[a];
      const auto& B = set[s ^ a];
      for (size_t i = 0; i < 256; ++i) {
        if (!A[i]) continue;
        const int x = static_cast<int>(i) - base;  // the value added to each of B's
        const size_t k = static_cast<size_t>(x & 255);
        set[s] |= (B << k) | (B >> ((256 - k) & 255));  // wraps: a rotation by x mod 256
        if (k == 0) continue;
        if (x > 0) {
          set[s] |= B << static_cast<size_t>(x);
          if ((B >> static_cast<size_t>(256 - x)).any()) set[s].set(255);  // saturates at the top
        } else {
          set[s] |= B >> static_cast<size_t>(-x);
          if ((B << static_cast<size_t>(256 + x)).any()) set[s].set(0);  // saturates at the bottom
        }
      }
    }
  }
  return set.back();
}

bool mixed_admits(const Reduction& red, std::span<const uint64_t> values, uint64_t got) {
  const auto uniform = saturating_sum_outcomes(red, values);  // the common case, cheaply
  if (std::find(uniform.begin(), uniform.end(), got) != uniform.end()) return true;
  const Int8Terms t = int8_terms(red, values);
  const auto sums = mixed_sums(t);
  for (size_t i = 0; i < 256; ++i)
    if (sums[i] && int8_post(red, static_cast<int>(i) - (t.sgn ? 128 : 0)) == got) return true;
  return false;
}

std::vector<uint64_t> mixed_sum_outcomes(const Reduction& red, std::span<const uint64_t> values) {
  const Int8Terms t = int8_terms(red, values);
  const auto sums = mixed_sums(t);
  std::vector<uint64_t> out;
  for (size_t i = 0; i < 256; ++i)
    if (sums[i]) out.push_back(int8_post(red, static_cast<int>(i) - (t.sgn ? 128 : 0)));
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

const Deviation kMpiSaturatingInt8{
    "ompi-avx-saturating-int8",
    "Open MPI 4.1's op/avx adds int8 and uint8 with saturating vector instructions (16 or more elements): "
    "200+100 gives 255, not 44 (NCCL and the scalar path wrap); it also reaches avg and premulsum, which "
    "collcheck composes from MPI's sum",
    &saturating_sum_outcomes};

const Deviation kMpiSaturatingInt8Mixed{
    "ompi-avx-saturating-int8-mixed",
    "Open MPI 4.1's op/avx adds int8 and uint8 with saturating vector instructions (16 or more elements), its "
    "scalar path wraps, and this algorithm (Rabenseifner, or the default's choice) reduces an element in blocks of "
    "different lengths, so each step may saturate or wrap: 0 + 1 + 73 + 127 can give -128; it also reaches avg "
    "and premulsum, which collcheck composes from MPI's sum",
    &mixed_sum_outcomes, &mixed_admits};

// The coll/tuned allreduce algorithm in effect, read from Open MPI's control
// variables (whoever set them: --mpi-algo, mpirun --mca, a parameter file):
// 0 when the default decision picks it per call, -1 when they cannot be read.
int tuned_allreduce_algorithm() {
  int provided = 0;
  if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) return -1;
  // A bool variable is read as one byte, an int as four: into a zeroed
  // int64, either reads back as its value (x86 is little-endian).
  auto read_int = [](const char* name) {
    int index = -1, count = 0;
    int64_t value = 0;
    MPI_T_cvar_handle h;
    if (MPI_T_cvar_get_index(name, &index) != MPI_SUCCESS) return -1;
    if (MPI_T_cvar_handle_alloc(index, nullptr, &h, &count) != MPI_SUCCESS) return -1;
    const bool ok = count == 1 && MPI_T_cvar_read(h, &value) == MPI_SUCCESS;
    MPI_T_cvar_handle_free(&h);
    return ok ? static_cast<int>(value & 0x7fffffff) : -1;
  };
  const int dynamic = read_int("coll_tuned_use_dynamic_rules");
  const int algo = read_int("coll_tuned_allreduce_algorithm");
  MPI_T_finalize();
  if (dynamic < 0 || algo < 0) return -1;
  return dynamic ? algo : 0;
}

class MpiImplementation final : public Implementation {
 public:
  bool forks_cleanly_after_use() const override { return false; }  // MPI does not survive fork()
  const std::string& name() const override { return name_; }

  std::optional<std::string> unsupported_world(WorldKind w) const override {
    if (w != WorldKind::Mpi)
      return "mpi (MPI_Allreduce) needs one process per rank: run under mpirun with --world mpi";
    return std::nullopt;
  }
  std::optional<std::string> threads_by_default() const override { return unsupported_world(WorldKind::Sim); }

  const Deviation* deviation(DType t, RedOp op) const override {
    if ((t == DType::Int8 || t == DType::Uint8) && (op == RedOp::Sum || op == RedOp::Avg || op == RedOp::PreMulSum)) {
      return &mpi_int8_deviation(algorithm());
    }
    return mpi_support(t, op) == MpiSupport::Native && dtype_is_float(t) && (op == RedOp::Max || op == RedOp::Min)
               ? &kMpiNanOrder
               : nullptr;
  }

  // Open MPI's nonoverlapping algorithm (a reduce to rank 0, then a
  // broadcast) combines operands in another order when the root's buffer is
  // MPI_IN_PLACE: max(0, NaN) gives 0 out of place and the NaN in place, and
  // NaN payloads of a float sum differ. The default decision may pick it.
  std::optional<std::string> placement_reorders() const override {
    const int a = algorithm();
    if (a == 2 || a <= 0) return std::string("ompi-inplace-order");
    return std::nullopt;
  }

  void all_reduce(const AllReduceArgs& a) const override {
    // The world's communicator comes with its links (a process group's links
    // have none: MPI_Allreduce runs on the whole world only).
    MpiLinks* l = a.links.mpi();
    if (!l)
      throw std::runtime_error("mpi (MPI_Allreduce) runs on a whole MPI world's communicator, and these links are not "
                               "one's (ranks as threads, or a process group's subset): run under mpirun with --world "
                               "mpi, in the world's group");
    const MPI_Comm comm = l->collectives();
    if (comm == MPI_COMM_NULL)
      throw std::runtime_error(fmt::format("rank {} has no MPI communicator for the world of {} ranks", l->rank(), a.links.size()));
    const DType t = a.red.dtype;
    const bool native = native_type(t) != MPI_DATATYPE_NULL;
    if (!native) make_user_defined();
    const MPI_Datatype type = native ? native_type(t) : g_user.type[static_cast<int>(t)];
    const MPI_Op op = native ? native_op(a.red.combine) : g_user.op[static_cast<int>(a.red.combine)];
    if (a.count > static_cast<size_t>(INT_MAX))
      throw std::runtime_error(fmt::format("MPI_Allreduce takes an int count; {} elements do not fit", a.count));
    const int n = static_cast<int>(a.count);
    int rc;
    if (a.red.premul || a.red.postdiv) {
      apply_pre(a.red, a.recv, a.send, a.count);
      rc = MPI_Allreduce(MPI_IN_PLACE, a.recv, n, type, op, comm);
      if (rc == MPI_SUCCESS) apply_post(a.red, a.recv, a.count);
    } else {
      rc = MPI_Allreduce(a.send == a.recv ? MPI_IN_PLACE : a.send, a.recv, n, type, op, comm);
    }
    if (rc != MPI_SUCCESS) throw std::runtime_error(fmt::format("MPI_Allreduce failed: {}", mpi_error_string(rc)));
  }

 private:
  std::string name_ = "mpi";
  // The coll/tuned algorithm in effect, read once (tuned_allreduce_algorithm).
  int algorithm() const {
    std::call_once(algo_once_, [this] { algo_ = mpi_running() ? tuned_allreduce_algorithm() : -1; });
    return algo_;
  }
  mutable std::once_flag algo_once_;
  mutable int algo_ = -1;
};

}  // namespace

MpiSupport mpi_support(DType t, RedOp op) {
  if (op == RedOp::Avg || op == RedOp::PreMulSum) return MpiSupport::Composed;
  return native_type(t) != MPI_DATATYPE_NULL ? MpiSupport::Native : MpiSupport::UserDefined;
}

const Deviation& mpi_int8_deviation(int algorithm) {
  return algorithm >= 1 && algorithm <= 5 ? kMpiSaturatingInt8 : kMpiSaturatingInt8Mixed;
}

ImplPtr make_mpi_implementation() { return std::make_shared<MpiImplementation>(); }

std::string mpi_library_version() {
  char v[MPI_MAX_LIBRARY_VERSION_STRING];
  int len = 0;
  MPI_Get_library_version(v, &len);
  std::string s(v, static_cast<size_t>(len));
  const auto nl = s.find_first_of(",\n");
  return s.substr(0, nl);
}

std::string mpi_algo_choices() {
  std::string s;
  for (size_t i = 0; i < std::size(kMpiAllreduceAlgos); ++i)
    s += fmt::format("{}{} {}", i ? ", " : "", i, i ? kMpiAllreduceAlgos[i] : "default");
  return s;
}

void choose_mpi_allreduce_algorithm(int algo) {
  if (algo == -1) return;
  if (algo < 0 || algo >= static_cast<int>(std::size(kMpiAllreduceAlgos)))
    throw std::invalid_argument(fmt::format("--mpi-algo must be 0..{} ({}), got {}", std::size(kMpiAllreduceAlgos) - 1,
                                            mpi_algo_choices(), algo));
  ::setenv("OMPI_MCA_coll_tuned_use_dynamic_rules", "1", 1);
  ::setenv("OMPI_MCA_coll_tuned_allreduce_algorithm", std::to_string(algo).c_str(), 1);
}

}  // namespace collcheck
