/*
 * An example collcheck plugin: the naive all-reduce. Every rank sends its
 * contribution to rank 0, rank 0 combines them in rank order, then sends the
 * result back to every rank. Simple, obviously correct, and slow: 2(p-1)
 * messages through one rank.
 *
 * Build it with the CMakeLists.txt next to this file, then:
 *   collcheck verify --impl plugin:./build/libnaive_allreduce.so
 */
#include <stdlib.h>
#include <string.h>

#include "collcheck/plugin.h"

int collcheck_plugin_abi_version(void) { return COLLCHECK_PLUGIN_ABI_VERSION; }

const char* collcheck_plugin_name(void) { return "naive reduce-then-broadcast"; }

/* Its ranks wait on each other only through the links and it keeps no
 * per-thread state, so they may run as fibers of one thread: collcheck then
 * runs it in the simulated world by default (virtual time, one seed giving
 * one output). Leave this out if your plugin has locks, barriers or
 * thread_local state of its own. */
int collcheck_plugin_fiber_safe(void) { return 1; }

/* Posts one transfer and waits for it. 0 on success. */
static int transfer(const collcheck_links* l, int send, int peer, uint64_t tag, void* buf, size_t bytes) {
  collcheck_request* req = NULL;
  int rc = send ? l->isend(l->ctx, peer, tag, buf, bytes, &req) : l->irecv(l->ctx, peer, tag, buf, bytes, &req);
  if (rc != 0) return rc;
  return l->wait(l->ctx, req);
}

/* The naive all-reduce of c, on tags tag_base + shift and + shift + 1. */
static int naive(const collcheck_call* c, const collcheck_links* l, uint64_t shift) {
  const size_t bytes = c->count * c->dtype_size;
  const uint64_t reduce_tag = c->tag_base + shift, bcast_tag = c->tag_base + shift + 1;
  /* This rank's contribution: the input, pre-multiplied where the op says so. */
  l->premul(l->ctx, c->recv, c->send, c->count);
  if (l->size == 1 || c->count == 0) {
    l->postdiv(l->ctx, c->recv, c->count);
    return 0;
  }
  if (l->rank != 0) {
    if (transfer(l, 1, 0, reduce_tag, c->recv, bytes) != 0) return 1;
    return transfer(l, 0, 0, bcast_tag, c->recv, bytes);
  }
  void* tmp = malloc(bytes);
  if (!tmp) {
    l->set_error(l->ctx, "out of memory");
    return 1;
  }
  int rc = 0;
  for (int r = 1; r < l->size && rc == 0; ++r) {
    rc = transfer(l, 0, r, reduce_tag, tmp, bytes);
    if (rc == 0) l->combine(l->ctx, c->recv, tmp, c->count);
  }
  free(tmp);
  if (rc != 0) return rc;
  l->postdiv(l->ctx, c->recv, c->count);
  for (int r = 1; r < l->size && rc == 0; ++r) rc = transfer(l, 1, r, bcast_tag, c->recv, bytes);
  return rc;
}

/* COLLCHECK_NAIVE_REPEAT > 1 (a test build) reduces a scratch copy of the
   input that many times less one first: the same result, that many times
   slower (collcheck's performance gate tests find it). */
#ifndef COLLCHECK_NAIVE_REPEAT
#define COLLCHECK_NAIVE_REPEAT 1
#endif

int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  for (int k = 1; k < COLLCHECK_NAIVE_REPEAT; ++k) {
    const size_t bytes = c->count * c->dtype_size;
    void* scratch = malloc(bytes ? bytes : 1);
    if (!scratch) {
      l->set_error(l->ctx, "out of memory");
      return 1;
    }
    collcheck_call again = *c;
    again.send = c->send;
    again.recv = scratch;
    const int rc = naive(&again, l, (uint64_t)(2 * k));
    free(scratch);
    if (rc != 0) return rc;
  }
  return naive(c, l, 0);
}
