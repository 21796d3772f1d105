// Point-to-point calls and the calls that complete requests. A send or a
// receive is recorded as "mpi:send a->b" / "mpi:recv a<-b" (ranks of its
// communicator; MPI_Sendrecv as its two halves, "mpi:sendrecv a->b" and
// "mpi:sendrecv a<-c"; "recvAnySource a<-any" for MPI_ANY_SOURCE, which
// becomes "a<-s" once it completed from s) with the communicator's
// point-to-point sequence number; a non-blocking one stays "started" until
// the MPI_Wait/MPI_Test family completes its request, so a request never
// waited is still open in the dump at MPI_Finalize.
#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "interpose/interpose.h"

namespace collcheck_mpi {

namespace {

std::mutex mu;
std::map<MPI_Request, uint64_t> open_requests;

uint64_t begin(MPI_Comm c, bool send, bool nonblocking, int peer, int n, MPI_Datatype t, const void* ra,
               bool sendrecv = false) {
  CommInfo& info = comm_info(c);
  int me = 0;
  PMPI_Comm_rank(c, &me);
  Entry e;
  e.group = info.name;
  e.p2p = true;
  e.p2p_seq = ++info.p2p_seq;
  e.coll_seq = info.coll_seq;
  const std::string verb = sendrecv ? "sendrecv" : std::string(nonblocking ? "i" : "") + (send ? "send" : "recv");
  if (peer == MPI_ANY_SOURCE) e.name = "mpi:" + verb + "AnySource " + std::to_string(me) + "<-any";
  else if (send) e.name = "mpi:" + verb + " " + std::to_string(me) + "->" + std::to_string(peer);
  else e.name = "mpi:" + verb + " " + std::to_string(me) + "<-" + std::to_string(peer);
  const auto [dtype, count] = dtype_of(t, n);
  e.dtype = dtype;
  e.count = count;
  e.site = site_of(ra);
  return record(e);
}

template <typename F>
int blocking(uint64_t id, F call) {
  blocking_enter(id);
  const int rc = call();
  blocking_leave();
  complete(id);
  return rc;
}

// The records of the requests that completed: done[i] for before[i] (the
// handles as the call got them; a persistent request's handle stays,
// inactive), with the source each matched (a wildcard receive learns it).
void settle(const std::vector<MPI_Request>& before, const std::vector<bool>& done, const std::vector<int>& source) {
  std::lock_guard lock(mu);
  for (size_t i = 0; i < before.size() && i < done.size(); ++i) {
    if (!done[i]) continue;
    if (auto it = open_requests.find(before[i]); it != open_requests.end()) {
      if (i < source.size()) matched_source(it->second, source[i]);
      complete(it->second);
      open_requests.erase(it);
    }
  }
}

// The statuses a call fills: the caller's, or ours when it passed
// MPI_STATUS(ES)_IGNORE, so that a wildcard receive's source is known.
struct Statuses {
  std::vector<MPI_Status> own;
  MPI_Status* use;
  Statuses(MPI_Status* given, int n) : own(given ? 0 : static_cast<size_t>(std::max(n, 1))), use(given ? given : own.data()) {}
  // The source of request i: statuses in request order (Wait, Test, *all).
  std::vector<int> by_request(int n) const {
    std::vector<int> s(static_cast<size_t>(std::max(n, 0)), MPI_ANY_SOURCE);
    for (int i = 0; i < n; ++i) s[static_cast<size_t>(i)] = use[i].MPI_SOURCE;
    return s;
  }
  // One status for request `index` (*any).
  std::vector<int> for_one(int n, int index) const {
    std::vector<int> s(static_cast<size_t>(std::max(n, 0)), MPI_ANY_SOURCE);
    if (index >= 0 && index < n) s[static_cast<size_t>(index)] = use[0].MPI_SOURCE;
    return s;
  }
  // Statuses in completion order (*some).
  std::vector<int> for_some(int n, int outcount, const int* idx) const {
    std::vector<int> s(static_cast<size_t>(std::max(n, 0)), MPI_ANY_SOURCE);
    for (int k = 0; idx && outcount != MPI_UNDEFINED && k < outcount; ++k)
      if (idx[k] >= 0 && idx[k] < n) s[static_cast<size_t>(idx[k])] = use[k].MPI_SOURCE;
    return s;
  }
};

std::vector<bool> all(int n, bool v = true) { return std::vector<bool>(static_cast<size_t>(std::max(n, 0)), v); }
std::vector<bool> one_of(int n, int index) {
  std::vector<bool> d = all(n, false);
  if (index >= 0 && index < n) d[static_cast<size_t>(index)] = true;
  return d;
}
std::vector<bool> some_of(int n, int outcount, const int* idx) {
  std::vector<bool> d = all(n, false);
  for (int k = 0; idx && outcount != MPI_UNDEFINED && k < outcount; ++k)
    if (idx[k] >= 0 && idx[k] < n) d[static_cast<size_t>(idx[k])] = true;
  return d;
}

// Persistent requests (MPI_Send_init and its kin, MPI_Recv_init): what each
// MPI_Start posts, recorded then as an isend or irecv.
struct Persistent {
  MPI_Comm comm;
  bool send;
  int peer, count;
  MPI_Datatype type;
  const void* site;
};
std::map<MPI_Request, Persistent> persistent;

int init(bool send, int peer, int n, MPI_Datatype t, MPI_Comm c, MPI_Request* q, const void* ra, int rc) {
  if (rc == MPI_SUCCESS && q && *q != MPI_REQUEST_NULL) {
    std::lock_guard lock(mu);
    persistent[*q] = Persistent{c, send, peer, n, t, ra};
  }
  return rc;
}

void start(MPI_Request q) {
  Persistent p;
  {
    std::lock_guard lock(mu);
    const auto it = persistent.find(q);
    if (it == persistent.end()) return;  // a persistent collective (MPI-4) or one made before the interposer
    p = it->second;
  }
  track_request(q, begin(p.comm, p.send, true, p.peer, p.count, p.type, p.site));
}

uint64_t first_open(const MPI_Request* q, int n) {
  std::lock_guard lock(mu);
  for (int i = 0; i < n; ++i)
    if (auto it = open_requests.find(q[i]); it != open_requests.end()) return it->second;
  return ~uint64_t{0};
}

}  // namespace

void track_request(MPI_Request q, uint64_t id) {
  if (q == MPI_REQUEST_NULL) return;
  std::lock_guard lock(mu);
  open_requests[q] = id;
}

}  // namespace collcheck_mpi

using namespace collcheck_mpi;

#define RA __builtin_return_address(0)

extern "C" {

int MPI_Send(const void* b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c) {
  return blocking(begin(c, true, false, to, n, t, RA), [&] { return PMPI_Send(b, n, t, to, tag, c); });
}
int MPI_Ssend(const void* b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c) {
  return blocking(begin(c, true, false, to, n, t, RA), [&] { return PMPI_Ssend(b, n, t, to, tag, c); });
}
int MPI_Bsend(const void* b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c) {
  return blocking(begin(c, true, false, to, n, t, RA), [&] { return PMPI_Bsend(b, n, t, to, tag, c); });
}
int MPI_Rsend(const void* b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c) {
  return blocking(begin(c, true, false, to, n, t, RA), [&] { return PMPI_Rsend(b, n, t, to, tag, c); });
}
int MPI_Sendrecv_replace(void* b, int n, MPI_Datatype t, int to, int stag, int from, int rtag, MPI_Comm c,
                         MPI_Status* st) {
  Statuses s(st == MPI_STATUS_IGNORE ? nullptr : st, 1);
  const uint64_t a = begin(c, true, false, to, n, t, RA, true);
  const uint64_t r = begin(c, false, false, from, n, t, RA, true);
  const int rc = blocking(a, [&] { return PMPI_Sendrecv_replace(b, n, t, to, stag, from, rtag, c, s.use); });
  if (rc == MPI_SUCCESS && from == MPI_ANY_SOURCE) matched_source(r, s.use[0].MPI_SOURCE);
  complete(r);
  return rc;
}
int MPI_Recv(void* b, int n, MPI_Datatype t, int from, int tag, MPI_Comm c, MPI_Status* st) {
  Statuses s(st == MPI_STATUS_IGNORE ? nullptr : st, 1);
  const uint64_t id = begin(c, false, false, from, n, t, RA);
  const int rc = blocking(id, [&] { return PMPI_Recv(b, n, t, from, tag, c, s.use); });
  if (rc == MPI_SUCCESS && from == MPI_ANY_SOURCE) matched_source(id, s.use[0].MPI_SOURCE);
  return rc;
}
int MPI_Sendrecv(const void* sb, int sn, MPI_Datatype st, int to, int stag, void* rb, int rn, MPI_Datatype rt,
                 int from, int rtag, MPI_Comm c, MPI_Status* status) {
  Statuses s(status == MPI_STATUS_IGNORE ? nullptr : status, 1);
  const uint64_t a = begin(c, true, false, to, sn, st, RA, true);
  const uint64_t b = begin(c, false, false, from, rn, rt, RA, true);
  const int rc = blocking(a, [&] { return PMPI_Sendrecv(sb, sn, st, to, stag, rb, rn, rt, from, rtag, c, s.use); });
  if (rc == MPI_SUCCESS && from == MPI_ANY_SOURCE) matched_source(b, s.use[0].MPI_SOURCE);
  complete(b);
  return rc;
}
int MPI_Isend(const void* b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c, MPI_Request* q) {
  const uint64_t id = begin(c, true, true, to, n, t, RA);
  const int rc = PMPI_Isend(b, n, t, to, tag, c, q);
  if (rc == MPI_SUCCESS) track_request(*q, id);
  return rc;
}
int MPI_Issend(const void* b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c, MPI_Request* q) {
  const uint64_t id = begin(c, true, true, to, n, t, RA);
  const int rc = PMPI_Issend(b, n, t, to, tag, c, q);
  if (rc == MPI_SUCCESS) track_request(*q, id);
  return rc;
}
int MPI_Irecv(void* b, int n, MPI_Datatype t, int from, int tag, MPI_Comm c, MPI_Request* q) {
  const uint64_t id = begin(c, false, true, from, n, t, RA);
  const int rc = PMPI_Irecv(b, n, t, from, tag, c, q);
  if (rc == MPI_SUCCESS) track_request(*q, id);
  return rc;
}
int MPI_Probe(int from, int tag, MPI_Comm c, MPI_Status* st) {
  blocking_enter(~uint64_t{0});
  const int rc = PMPI_Probe(from, tag, c, st);
  blocking_leave();
  return rc;
}

int MPI_Wait(MPI_Request* q, MPI_Status* st) {
  const std::vector<MPI_Request> before{*q};
  Statuses s(st == MPI_STATUS_IGNORE ? nullptr : st, 1);
  blocking_enter(first_open(q, 1));
  const int rc = PMPI_Wait(q, s.use);
  blocking_leave();
  if (rc == MPI_SUCCESS) settle(before, all(1), s.by_request(1));
  return rc;
}
int MPI_Waitall(int n, MPI_Request q[], MPI_Status st[]) {
  const std::vector<MPI_Request> before(q, q + n);
  Statuses s(st == MPI_STATUSES_IGNORE ? nullptr : st, n);
  blocking_enter(first_open(q, n));
  const int rc = PMPI_Waitall(n, q, s.use);
  blocking_leave();
  if (rc == MPI_SUCCESS) settle(before, all(n), s.by_request(n));
  return rc;
}
int MPI_Waitany(int n, MPI_Request q[], int* index, MPI_Status* st) {
  const std::vector<MPI_Request> before(q, q + n);
  Statuses s(st == MPI_STATUS_IGNORE ? nullptr : st, 1);
  blocking_enter(first_open(q, n));
  const int rc = PMPI_Waitany(n, q, index, s.use);
  blocking_leave();
  if (rc == MPI_SUCCESS && index) settle(before, one_of(n, *index), s.for_one(n, *index));
  return rc;
}
int MPI_Waitsome(int n, MPI_Request q[], int* outcount, int idx[], MPI_Status st[]) {
  const std::vector<MPI_Request> before(q, q + n);
  Statuses s(st == MPI_STATUSES_IGNORE ? nullptr : st, n);
  blocking_enter(first_open(q, n));
  const int rc = PMPI_Waitsome(n, q, outcount, idx, s.use);
  blocking_leave();
  if (rc == MPI_SUCCESS && outcount) settle(before, some_of(n, *outcount, idx), s.for_some(n, *outcount, idx));
  return rc;
}
int MPI_Test(MPI_Request* q, int* flag, MPI_Status* st) {
  const std::vector<MPI_Request> before{*q};
  Statuses s(st == MPI_STATUS_IGNORE ? nullptr : st, 1);
  const int rc = PMPI_Test(q, flag, s.use);
  if (rc == MPI_SUCCESS && *flag) settle(before, all(1), s.by_request(1));
  return rc;
}
int MPI_Testall(int n, MPI_Request q[], int* flag, MPI_Status st[]) {
  const std::vector<MPI_Request> before(q, q + n);
  Statuses s(st == MPI_STATUSES_IGNORE ? nullptr : st, n);
  const int rc = PMPI_Testall(n, q, flag, s.use);
  if (rc == MPI_SUCCESS && *flag) settle(before, all(n), s.by_request(n));
  return rc;
}
int MPI_Testany(int n, MPI_Request q[], int* index, int* flag, MPI_Status* st) {
  const std::vector<MPI_Request> before(q, q + n);
  Statuses s(st == MPI_STATUS_IGNORE ? nullptr : st, 1);
  const int rc = PMPI_Testany(n, q, index, flag, s.use);
  if (rc == MPI_SUCCESS && *flag && index) settle(before, one_of(n, *index), s.for_one(n, *index));
  return rc;
}
int MPI_Testsome(int n, MPI_Request q[], int* outcount, int idx[], MPI_Status st[]) {
  const std::vector<MPI_Request> before(q, q + n);
  Statuses s(st == MPI_STATUSES_IGNORE ? nullptr : st, n);
  const int rc = PMPI_Testsome(n, q, outcount, idx, s.use);
  if (rc == MPI_SUCCESS && outcount) settle(before, some_of(n, *outcount, idx), s.for_some(n, *outcount, idx));
  return rc;
}
int MPI_Request_free(MPI_Request* q) {
  {
    std::lock_guard lock(mu);
    if (auto it = open_requests.find(*q); it != open_requests.end()) {
      complete(it->second);  // freed: the program gave it up knowingly
      open_requests.erase(it);
    }
    persistent.erase(*q);
  }
  return PMPI_Request_free(q);
}


int MPI_Send_init(const void* b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c, MPI_Request* q) {
  return init(true, to, n, t, c, q, RA, PMPI_Send_init(b, n, t, to, tag, c, q));
}
int MPI_Ssend_init(const void* b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c, MPI_Request* q) {
  return init(true, to, n, t, c, q, RA, PMPI_Ssend_init(b, n, t, to, tag, c, q));
}
int MPI_Bsend_init(const void* b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c, MPI_Request* q) {
  return init(true, to, n, t, c, q, RA, PMPI_Bsend_init(b, n, t, to, tag, c, q));
}
int MPI_Rsend_init(const void* b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c, MPI_Request* q) {
  return init(true, to, n, t, c, q, RA, PMPI_Rsend_init(b, n, t, to, tag, c, q));
}
int MPI_Recv_init(void* b, int n, MPI_Datatype t, int from, int tag, MPI_Comm c, MPI_Request* q) {
  return init(false, from, n, t, c, q, RA, PMPI_Recv_init(b, n, t, from, tag, c, q));
}
int MPI_Start(MPI_Request* q) {
  if (q) start(*q);
  return PMPI_Start(q);
}
int MPI_Startall(int n, MPI_Request q[]) {
  for (int i = 0; q && i < n; ++i) start(q[i]);
  return PMPI_Startall(n, q);
}

}  // extern "C"
