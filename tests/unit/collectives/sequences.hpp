// The random call sequences of collectives-sequences (test_sequences.cpp, ranks as
// threads) and mp_sequences (tests/mp, one process per rank): what a step draws, how each
// call is issued and how its output is checked against the reference. Every rank draws
// the same step from the same seed. Needs the library's internal headers (reference.hpp).
#pragma once

#include <sched.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "collective.h"
#include "reference.hpp"

namespace testing_coll::seq {

struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  size_t below(size_t n) { return static_cast<size_t>(next() % n); }
  bool chance(int percent) { return below(100) < static_cast<size_t>(percent); }
};

enum class K { AllReduce, Broadcast, Reduce, AllGather, ReduceScatter, AllToAll, Gather, Scatter, SendRecv, Barrier, Count };
const char* const kNames[] = {"allreduce", "broadcast", "reduce",  "allgather", "reducescatter",
                              "alltoall",  "gather",    "scatter", "sendrecv",  "barrier"};

struct Call {
  K k;
  size_t count;
  collDataType_t dt;
  collRedOp_t op;
  int root;
  bool inPlace;
  uint32_t seed;
};

inline Call draw(Rng& g, int n, uint32_t seed) {
  static const size_t kCounts[] = {0, 1, 2, 3, 7, 31, 64, 100, 1000, 4097, 33000, 70001, 300000};
  Call c;
  c.k = static_cast<K>(g.below(static_cast<size_t>(K::Count)));
  if (n == 1 && c.k == K::SendRecv) c.k = K::AllReduce;  // nonblocking send/recv with self never completes
  // Mostly small: the large counts take the pipelined, chunked and single-copy paths.
  c.count = kCounts[g.chance(80) ? g.below(9) : g.below(std::size(kCounts))];
  c.dt = kTypes[g.below(std::size(kTypes))];
  const auto ops = opsFor(c.dt);
  c.op = ops[g.below(ops.size())];
  c.root = static_cast<int>(g.below(static_cast<size_t>(n)));
  c.inPlace = c.k != K::AllToAll && c.k != K::SendRecv && g.chance(35);
  c.seed = seed;
  return c;
}

inline bool reduces(K k) { return k == K::AllReduce || k == K::Reduce || k == K::ReduceScatter; }

// One rank's buffers for one call: a holds the input, b the output; send and recv are
// what the rank passes (in place: both point into one of them).
struct Bufs {
  std::vector<char> a, b;
  const void* send = nullptr;
  void* recv = nullptr;
};

// Element counts of the input and output buffers.
inline void sizes(const Call& c, int n, size_t* in, size_t* out) {
  const size_t cn = c.count * n;
  switch (c.k) {
    case K::AllGather: case K::Gather: *in = c.count; *out = cn; break;
    case K::ReduceScatter: case K::Scatter: *in = cn; *out = c.count; break;
    case K::AllToAll: *in = cn; *out = cn; break;
    default: *in = c.count; *out = c.count; break;
  }
}

inline void prepare(const Call& c, int rank, int n, Bufs& b) {
  const size_t es = collTypeSize(c.dt);
  size_t in, out;
  sizes(c, n, &in, &out);
  const collRedOp_t fillOp = reduces(c.k) ? c.op : collSum;
  b.a.assign(in * es + 1, 0);
  fillInput(b.a, 0, in, c.dt, fillOp, c.seed, rank);
  b.b.assign(out * es + 1, static_cast<char>(0x5a));
  b.send = b.a.data();
  b.recv = b.b.data();
  if (!c.inPlace) return;
  const size_t off = static_cast<size_t>(rank) * c.count * es;
  switch (c.k) {
    case K::AllReduce: case K::Broadcast: case K::Reduce:
      memcpy(b.b.data(), b.a.data(), in * es);
      b.send = b.recv;
      break;
    case K::AllGather:  // own block already in place
      memcpy(b.b.data() + off, b.a.data(), in * es);
      b.send = b.b.data() + off;
      break;
    case K::Gather:  // in place on the root only
      if (rank == c.root) {
        memcpy(b.b.data() + off, b.a.data(), in * es);
        b.send = b.b.data() + off;
      }
      break;
    case K::ReduceScatter:
      b.recv = b.a.data() + off;
      break;
    case K::Scatter:
      if (rank == c.root) b.recv = b.a.data() + off;
      break;
    default: break;
  }
}

// Issues the call: with req == nullptr the blocking form (alone, or deferred inside a
// group the caller opened), otherwise the nonblocking one.
inline collResult_t issue(const Call& c, collComm_t comm, int rank, int n, Bufs& b, collRequest_t* req) {
  const void* s = b.send;
  void* r = b.recv;
  switch (c.k) {
    case K::AllReduce:
      return req ? collIallReduce(s, r, c.count, c.dt, c.op, comm, req) : collAllReduce(s, r, c.count, c.dt, c.op, comm, nullptr);
    case K::Broadcast:
      return req ? collIbroadcast(s, r, c.count, c.dt, c.root, comm, req)
                 : collBroadcast(s, r, c.count, c.dt, c.root, comm, nullptr);
    case K::Reduce:
      return req ? collIreduce(s, r, c.count, c.dt, c.op, c.root, comm, req)
                 : collReduce(s, r, c.count, c.dt, c.op, c.root, comm, nullptr);
    case K::AllGather:
      return req ? collIallGather(s, r, c.count, c.dt, comm, req) : collAllGather(s, r, c.count, c.dt, comm, nullptr);
    case K::ReduceScatter:
      return req ? collIreduceScatter(s, r, c.count, c.dt, c.op, comm, req)
                 : collReduceScatter(s, r, c.count, c.dt, c.op, comm, nullptr);
    case K::AllToAll:
      return req ? collIallToAll(s, r, c.count, c.dt, comm, req) : collAllToAll(s, r, c.count, c.dt, comm, nullptr);
    case K::Gather:
      return req ? collIgather(s, r, c.count, c.dt, c.root, comm, req)
                 : collGather(s, r, c.count, c.dt, c.root, comm, nullptr);
    case K::Scatter:
      return req ? collIscatter(s, r, c.count, c.dt, c.root, comm, req)
                 : collScatter(s, r, c.count, c.dt, c.root, comm, nullptr);
    case K::Barrier:
      return req ? collIbarrier(comm, req) : collBarrier(comm);
    case K::SendRecv: {
      // A ring: to the next rank, from the previous one. Blocking forms need a group
      // (the caller opens one); nonblocking ones are two requests (the caller's req gets
      // the receive, the send's request is waited here after it).
      const int next = (rank + 1) % n, prev = (rank + n - 1) % n;
      if (!req) {
        collResult_t rc = collSend(s, c.count, c.dt, next, comm, nullptr);
        return rc != collSuccess ? rc : collRecv(r, c.count, c.dt, prev, comm, nullptr);
      }
      collRequest_t sreq = nullptr;
      collResult_t rc = collIsend(s, c.count, c.dt, next, comm, &sreq);
      if (rc != collSuccess) return rc;
      rc = collIrecv(r, c.count, c.dt, prev, comm, req);
      collResult_t w = collWait(&sreq);
      return rc != collSuccess ? rc : w;
    }
    default: return collInternalError;
  }
}

// Checks rank `rank`'s output of call c; "" when right.
inline std::string check(const Call& c, int rank, int n, const Bufs& b) {
  const size_t es = collTypeSize(c.dt);
  const char* got = static_cast<const char*>(b.recv);
  auto theirs = [&](int src, size_t elems) {
    std::vector<char> v(elems * es + 1);
    fillInput(v, 0, elems, c.dt, collSum, c.seed, src);
    return v;
  };
  auto differs = [&](const char* at, const std::vector<char>& want, size_t from, size_t elems) {
    return memcmp(at, want.data() + from * es, elems * es) != 0;
  };
  auto reducedFrom = [&](size_t first, size_t elems) -> std::string {
    std::vector<char> want((first + elems) * es + 1);
    for (size_t i = 0; i < elems; ++i) {
      expectedValue(want.data(), first + i, c.dt, c.op, c.seed, n);
      if (!sameValue(got - first * es, want.data(), first + i, c.dt, c.op))
        return "element " + std::to_string(first + i) + " is " + std::to_string(loadValue(got - first * es, first + i, c.dt)) +
               ", expected " + std::to_string(loadValue(want.data(), first + i, c.dt));
    }
    return "";
  };
  switch (c.k) {
    case K::AllReduce: return reducedFrom(0, c.count);
    case K::Reduce: return rank == c.root ? reducedFrom(0, c.count) : "";
    case K::ReduceScatter: return reducedFrom(static_cast<size_t>(rank) * c.count, c.count);
    case K::Broadcast: return differs(got, theirs(c.root, c.count), 0, c.count) ? "not the root's data" : "";
    case K::AllGather:
    case K::Gather:
      if (c.k == K::Gather && rank != c.root) return "";
      for (int p = 0; p < n; ++p)
        if (differs(got + p * c.count * es, theirs(p, c.count), 0, c.count)) return "block of rank " + std::to_string(p);
      return "";
    case K::Scatter: return differs(got, theirs(c.root, c.count * n), rank * c.count, c.count) ? "not the root's block" : "";
    case K::AllToAll:
      for (int p = 0; p < n; ++p)
        if (differs(got + p * c.count * es, theirs(p, c.count * n), rank * c.count, c.count))
          return "block from rank " + std::to_string(p);
      return "";
    case K::SendRecv:
      return differs(got, theirs((rank + n - 1) % n, c.count), 0, c.count) ? "not the previous rank's data" : "";
    default: return "";
  }
}

inline std::string describe(const Call& c) {
  return std::string(kNames[static_cast<int>(c.k)]) + " count=" + std::to_string(c.count) + " type=" +
         std::to_string(c.dt) + " op=" + std::to_string(c.op) + " root=" + std::to_string(c.root) +
         (c.inPlace ? " in place" : "");
}

// A bad argument, alike on every rank; the call must fail without touching the peers.
inline collResult_t badCall(size_t which, collComm_t comm, int rank, int n, std::vector<char>& buf) {
  float* f = reinterpret_cast<float*>(buf.data());
  switch (which % 7) {
    case 0: return collAllReduce(f, f, 4, static_cast<collDataType_t>(77), collSum, comm, nullptr);
    case 1: return collAllReduce(f, f, 4, collFloat32, static_cast<collRedOp_t>(99), comm, nullptr);
    case 2: return collBroadcast(f, f, 4, collFloat32, n, comm, nullptr);
    case 3: return collReduce(f, f, 4, collFloat32, collSum, -1, comm, nullptr);
    case 4: return collAllReduce(f, nullptr, 4, collFloat32, collSum, comm, nullptr);
    case 5: return collAllGather(f, f, SIZE_MAX / 2, collFloat32, comm, nullptr);
    default: return collSend(f, 4, collFloat32, rank, comm, nullptr);  // to self outside a group
  }
}

// What one rank did in one step: its calls with their buffers, its rank and size in the
// communicator they ran on, and that communicator when it was split off (the caller
// checks the outputs, then destroys it).
struct StepOut {
  int mode = 0;
  bool split = false;
  int rank = 0, size = 0;
  collComm_t sub = nullptr;
  std::vector<Call> calls;
  std::vector<std::unique_ptr<Bufs>> bufs;
};

// A step's kind, from its mode (drawn first): a bad argument then one call, a group,
// nonblocking calls, or blocking calls one after another.
inline bool badArgStep(int mode) { return mode < 8; }
inline bool groupStep(int mode) { return mode >= 8 && mode < 40; }
inline bool nonblockingStep(int mode) { return mode >= 40 && mode < 70; }

// Runs step `seed` on this rank (world rank r of n) and reports what went wrong through
// fail (messages start with `where`).
inline void runStep(uint64_t seed, collComm_t world, int r, int n, const std::string& where0, StepOut& out,
                    const std::function<void(const std::string&)>& fail) {
  Rng rg{seed};
  out.mode = static_cast<int>(rg.below(100));
  out.split = n > 2 && rg.chance(8);
  collComm_t comm = world;
  out.rank = r;
  out.size = n;
  if (out.split) {
    // Even and odd ranks, each in reverse order of rank.
    if (collCommSplit(world, r % 2, -r, &out.sub) != collSuccess) {
      fail(where0 + "split: " + collGetLastError(world));
      return;
    }
    comm = out.sub;
    collCommUserRank(comm, &out.rank);
    collCommCount(comm, &out.size);
  }
  const int rank = out.rank, size = out.size, mode = out.mode;
  const std::string where = where0 + (out.split ? "(split) " : "");
  if (badArgStep(mode)) {  // a bad argument, then one good call that must work
    std::vector<char> scratch(64);
    if (badCall(rg.below(7), comm, rank, size, scratch) == collSuccess) fail(where + "bad argument accepted");
    if (std::string(collGetLastError(comm)).empty()) fail(where + "no error message");
  }
  const int ncalls = badArgStep(mode) ? 1 : 1 + static_cast<int>(rg.below(4));
  auto& calls = out.calls;
  auto& bufs = out.bufs;
  for (int i = 0; i < ncalls; ++i) {
    calls.push_back(draw(rg, size, static_cast<uint32_t>(rg.next())));
    bufs.push_back(std::make_unique<Bufs>());
    prepare(calls.back(), rank, size, *bufs.back());
  }
  auto failed = [&](int i, const char* how, collResult_t rc) {
    fail(where + describe(calls[i]) + how + ": " + collGetErrorString(rc) + ": " + collGetLastError(comm));
  };
  const bool hasP2P = std::any_of(calls.begin(), calls.end(), [](const Call& c) { return c.k == K::SendRecv; });
  if (groupStep(mode) || (!nonblockingStep(mode) && hasP2P)) {
    // Some groups hold a call with a bad argument too: it fails at the call, and the rest
    // of the group still runs (doc/cuda.md, "Groups").
    const int badAt = rg.chance(25) ? static_cast<int>(rg.below(ncalls + 1)) : -1;
    const size_t badWhich = rg.below(6);  // not the self-send: inside a group it is allowed
    std::vector<char> scratch(64);
    collGroupStart();
    for (int i = 0; i <= ncalls; ++i) {
      if (i == badAt && badCall(badWhich, comm, rank, size, scratch) == collSuccess)
        fail(where + "bad argument accepted inside a group");
      if (i < ncalls)
        if (collResult_t rc = issue(calls[i], comm, rank, size, *bufs[i], nullptr); rc != collSuccess) failed(i, " in a group", rc);
    }
    if (collResult_t rc = collGroupEnd(); rc != collSuccess)
      fail(where + "group end" + (badAt >= 0 ? " (after a refused call)" : "") + ": " + collGetErrorString(rc) + ": " +
           collGetLastError(comm));
  } else if (nonblockingStep(mode)) {
    std::vector<collRequest_t> reqs(ncalls, nullptr);
    for (int i = 0; i < ncalls; ++i)
      if (collResult_t rc = issue(calls[i], comm, rank, size, *bufs[i], &reqs[i]); rc != collSuccess) failed(i, " nonblocking", rc);
    // Waited in a random order (the same on every rank), or polled to the end.
    std::vector<int> order(ncalls);
    for (int i = 0; i < ncalls; ++i) order[i] = i;
    for (int i = ncalls - 1; i > 0; --i) std::swap(order[i], order[rg.below(i + 1)]);
    const bool poll = rg.chance(50);
    for (int i : order) {
      if (!reqs[i]) continue;
      collResult_t rc;
      if (poll) {
        int done = 0;
        while ((rc = collTest(&reqs[i], &done)) == collInProgress || (rc == collSuccess && !done)) sched_yield();
      } else {
        rc = collWait(&reqs[i]);
      }
      if (rc != collSuccess) failed(i, " wait", rc);
      if (reqs[i]) fail(where + "request not released");
    }
  } else {
    for (int i = 0; i < ncalls; ++i)
      if (collResult_t rc = issue(calls[i], comm, rank, size, *bufs[i], nullptr); rc != collSuccess) failed(i, "", rc);
  }
}

// The step seeds of a sequence.
inline std::vector<uint64_t> stepSeeds(uint64_t seed, int steps) {
  std::vector<uint64_t> out(steps);
  Rng top{seed};
  for (auto& s : out) s = top.next();
  return out;
}

}  // namespace testing_coll::seq
