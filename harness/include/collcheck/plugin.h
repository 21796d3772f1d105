/*
 * collcheck plugin ABI, version 2: how a user's all-reduce is put under test.
 *
 * A plugin is a shared library that exports the functions at the bottom of
 * this file. `collcheck verify --impl plugin:/path/libmine.so` loads it with
 * dlopen and calls collcheck_all_reduce once per rank and call, on that rank's
 * thread (or process). The plugin moves bytes only through the links it is
 * given, so the same plugin runs in the thread world, in the MPI world, and
 * under the fault injectors' link wrappers.
 *
 * Rules (the harness checks them and names the one that was broken):
 *  - Tags: a call owns the 256 tags [call->tag_base, call->tag_base + 256).
 *  - A send matches the oldest recv the peer posted with the same tag; the
 *    byte counts must agree exactly.
 *  - Every request is finished with wait() or cancel() before the call
 *    returns; wait() and cancel() free it.
 *  - wait() never blocks past the call's deadline: it then fails, and the
 *    error text says which peer and tag were missing.
 *  - Time: a plugin that bounds a poll or a back-off reads the world's clock
 *    (now_ns, ns_left), not the host's. In the simulated world (--world sim)
 *    that clock is virtual: it moves only when ranks wait, so a bound in it
 *    gives the same run on an idle and a busy host; the host's clock does not.
 *  - Return 0 on success. On failure, call links->set_error() with a message
 *    and return nonzero. Returning 0 after a link operation failed is itself
 *    reported as a bug.
 *
 * Semantics: the result must be what NCCL 2.28 computes (see collcheck's
 * impl/semantics.h). The combine/premul/postdiv helpers apply exactly those
 * semantics for the call's dtype and op; a plugin may use them or bring its
 * own arithmetic (which is then what gets tested).
 *
 * Versioning: fields are only ever added at the end of the structs, with a
 * version bump, so collcheck runs a plugin built for its version or an older
 * one (which never reads the newer fields), and refuses a newer one.
 * Version 2 added collcheck_links.now_ns.
 */
#ifndef COLLCHECK_PLUGIN_H_
#define COLLCHECK_PLUGIN_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COLLCHECK_PLUGIN_ABI_VERSION 2

/* The same numbering as ncclDataType_t. */
typedef enum {
  COLLCHECK_INT8 = 0,
  COLLCHECK_UINT8 = 1,
  COLLCHECK_INT32 = 2,
  COLLCHECK_UINT32 = 3,
  COLLCHECK_INT64 = 4,
  COLLCHECK_UINT64 = 5,
  COLLCHECK_FLOAT16 = 6,
  COLLCHECK_FLOAT32 = 7,
  COLLCHECK_FLOAT64 = 8,
  COLLCHECK_BFLOAT16 = 9,
  COLLCHECK_FP8_E4M3 = 10,
  COLLCHECK_FP8_E5M2 = 11
} collcheck_dtype;

/* The same numbering as ncclRedOp_t for the first five. */
typedef enum {
  COLLCHECK_SUM = 0,
  COLLCHECK_PROD = 1,
  COLLCHECK_MAX = 2,
  COLLCHECK_MIN = 3,
  COLLCHECK_AVG = 4,
  COLLCHECK_PREMULSUM = 5
} collcheck_op;

typedef struct collcheck_request collcheck_request; /* opaque */

/* One all-reduce call on one rank. */
typedef struct collcheck_call {
  const void* send; /* count elements; may equal recv (in-place) */
  void* recv;       /* count elements */
  size_t count;
  int dtype;          /* collcheck_dtype */
  int op;             /* collcheck_op */
  size_t dtype_size;  /* bytes per element */
  const void* scalar; /* premulsum: the multiplier, one element of dtype; else NULL */
  uint64_t tag_base;  /* this call's tags are [tag_base, tag_base + 256);
                         tag_base >> 8 is the call's sequence number on its
                         communicator, from 1: a new communicator starts at 1 */
} collcheck_call;

/* This rank's view of the world, valid for the duration of one call. */
typedef struct collcheck_links {
  void* ctx; /* pass back to every function below */
  int rank;
  int size;
  /* Post a transfer of `bytes` bytes. 0 on success, nonzero on error. */
  int (*isend)(void* ctx, int peer, uint64_t tag, const void* buf, size_t bytes, collcheck_request** req);
  int (*irecv)(void* ctx, int peer, uint64_t tag, void* buf, size_t bytes, collcheck_request** req);
  /* *done = 1 once the transfer completed. Does not free the request. */
  int (*test)(void* ctx, collcheck_request* req, int* done);
  /* Blocks until the transfer completes or the call's deadline passes, then
     frees the request. Nonzero on failure (timeout, abort, size mismatch). */
  int (*wait)(void* ctx, collcheck_request* req);
  /* Cancels a pending transfer and frees the request. */
  void (*cancel)(void* ctx, collcheck_request* req);
  /* Records why the call is failing; shown in collcheck's report. */
  void (*set_error)(void* ctx, const char* message);
  /* NCCL semantics for this call's dtype and op:
     combine: inout[i] = inout[i] (op) in[i], rounded to the element type;
     premul:  out[i] = in[i] * s where the op pre-multiplies (float avg: 1/p,
              premulsum: the scalar), else a copy; out may equal in;
     postdiv: the final step on a fully reduced buffer (integer avg divides
              by p, truncating toward zero); a no-op otherwise. */
  void (*combine)(void* ctx, void* inout, const void* in, size_t count);
  void (*premul)(void* ctx, void* out, const void* in, size_t count);
  void (*postdiv)(void* ctx, void* buf, size_t count);
  /* Nanoseconds left until the call's deadline (0 once it has passed), on the
     world's clock. */
  uint64_t (*ns_left)(void* ctx);
  /* The world's clock, in nanoseconds from an origin fixed for the run:
     virtual time in the simulated world, the steady clock otherwise.
     Version 2. */
  uint64_t (*now_ns)(void* ctx);
} collcheck_links;

/* ---- What a plugin exports ---- */

/* Must return COLLCHECK_PLUGIN_ABI_VERSION. Required. */
int collcheck_plugin_abi_version(void);
/* A short name for reports. Optional. */
const char* collcheck_plugin_name(void);
/* One rank's part of one all-reduce. Required. */
int collcheck_all_reduce(const collcheck_call* call, const collcheck_links* links);
/* The reduction order of element `index` of a `count`-element all-reduce over
   `p` ranks, as a postfix program written to postfix[0..n): r >= 0 pushes rank
   r's contribution, -1 replaces the top two entries by their combination.
   Returns n (at most `capacity`, which is 2p - 1), or -1 when unknown.
   Optional (ABI version 1 stays): when exported, collcheck replays that order
   with NCCL's semantics and checks float sums and products bit for bit
   (property matches-declared-order), which catches rounding bugs that the
   all-orders error bound cannot see. */
int collcheck_plugin_reduction_order(int p, size_t count, size_t index, int* postfix, size_t capacity);
/* Whether the plugin's ranks may run as fibers of one thread. Return 1 when
   (a) its ranks wait on each other only through these links: no lock held
   across a link call, no condition variable, barrier, sleep or spin on memory
   that another rank writes, and no thread of its own that calls them (refused
   there); and (b) it keeps no per-thread state
   (thread_local): the fibers of a world share one thread. collcheck then runs
   it in the simulated world by default (`verify`, `replay`, `faults`,
   scenarios, soak units): ranks as fibers in virtual time, one seed giving one
   output however busy the host, and several times as fast as threads. Not
   exported, or 0: threads by default. `--world` overrides either way.
   Optional (ABI version 2 stays). A plugin that declares it wrongly blocks the
   one thread: the case then ends at the isolated child's wall-clock limit
   (verify) and says so. */
int collcheck_plugin_fiber_safe(void);

#ifdef __cplusplus
}
#endif

#endif /* COLLCHECK_PLUGIN_H_ */
