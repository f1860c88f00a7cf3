/* libcollective network plugin interface, version 1.
 *
 * A network backend moves ordered messages between ranks over some fabric (InfiniBand
 * verbs, UCX, ...). The library's `net` transport turns a backend into links: it makes
 * one connection per direction to every peer it serves and maps each send and receive
 * of a collective onto one message. The built-in InfiniBand verbs
 * backend speaks this same interface; an external one is a shared library named by
 * COLL_NET_PLUGIN (a path, or a name that dlopen finds) that exports COLL_NET_SYMBOL, of
 * type collNetPlugin_v1_t.
 *
 * Model
 *  - A device is something the backend can send through (a NIC port, a UCX context).
 *  - A connection carries messages one way, from a send endpoint on one rank to a receive
 *    endpoint on another. It is made in two steps, and the library carries the blobs
 *    between the ranks over its own (authenticated) bootstrap, so a backend needs no
 *    side channel of its own:
 *      receiver: listen(dev)            -> handle (to the sender), listen endpoint
 *      sender:   connect(dev, handle)   -> reply  (to the receiver), send endpoint
 *      receiver: accept(listen, reply)  -> receive endpoint (the listen endpoint is used up)
 *    Handles and replies are COLL_NET_HANDLE_BYTES each. None of the three calls waits
 *    for the peer. After every rank's accept() has returned (the library runs a barrier
 *    over its bootstrap) messages may flow. closeListen() drops a listen endpoint that
 *    is never accepted (setup failed elsewhere). Where the fabric lets anyone reach a
 *    listening endpoint (a TCP port), the backend should accept only the sender that
 *    holds the handle (a random token in the handle, checked on arrival).
 *  - isend()/irecv() post one message and return a request; test() reports its progress.
 *    Messages on a connection match in order: the n-th isend lands in the n-th irecv.
 *    A message has any size from 0 bytes up (data may be NULL at size 0) and a 64-bit
 *    tag that the backend carries without looking at it. irecv() names the most bytes it takes; test() of a receive
 *    reports the size and the tag the sender gave. A message larger than its receive
 *    completes anyway, with its true size reported and only the receive's size written
 *    (the library then fails the call with a clear error, naming both sizes).
 *  - isend()/irecv() may set *request to NULL when they cannot take more messages now
 *    (more than maxRequests in flight, or resources exhausted); the library retries.
 *    A message's memory stays untouched by the library until test() says done.
 *  - test() makes progress. Backends that need a thread of their own run it themselves.
 *    Once test() reports done, the request is released: it is not tested again.
 *  - close*() may be called with requests still in flight (after a failure, an abort or
 *    a timeout): the backend drops them and touches none of their memory after close
 *    returns. The peer's endpoint then fails its requests in test() (or waits, when the
 *    fabric cannot tell; the library's timeout covers that).
 *
 * Errors: every call returns 0 on success and non-zero on failure. After a failure
 * lastError() gives a text for the user (it should name the device and what failed,
 * e.g. "ibv_post_send on mlx5_0:1: Cannot allocate memory"). A failed endpoint is
 * closed and not used again; a failure in test() fails the collective on this rank and
 * the job then fails it on every rank. A dead peer must turn into an error in test()
 * (or the library's COLL_TIMEOUT does it).
 *
 * Threads: the library calls one endpoint (and its requests) from one thread at a time,
 * but different endpoints and devices from different threads at once.
 *
 * Memory: messages live in ordinary host memory that the backend has not seen before;
 * a backend that needs registered memory registers it itself (or copies through
 * buffers of its own).
 *
 * Versioning: by the symbol name and the `version` field. A future version 2 adds a new
 * symbol; the library looks for the newest it understands.
 */
#ifndef COLL_NET_H_
#define COLL_NET_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COLL_NET_PLUGIN_VERSION 1
#define COLL_NET_SYMBOL "collNetPlugin_v1"
#define COLL_NET_HANDLE_BYTES 512

typedef enum {
  collNetLogWarn = 0,
  collNetLogInfo = 1,
  collNetLogDebug = 2,
} collNetLogLevel_t;

/* What the library hands a backend at init. */
typedef struct {
  /* Writes one line to the library's log (COLL_DEBUG decides what is shown). */
  void (*log)(collNetLogLevel_t level, const char* message);
} collNetInit_t;

typedef struct {
  char name[64];          /* for logs and collective-info: "mlx5_0:1", "ucx:tcp" */
  char pciPath[128];      /* PCI bus id ("0000:3b:00.0"), or "" when unknown */
  int speedMbps;          /* link speed, 0 when unknown */
  double latencyUs;       /* one-way latency estimate, 0 when unknown */
  int maxRequests;        /* most requests in flight per endpoint (>= 1) */
} collNetProperties_t;

typedef struct {
  int version;      /* COLL_NET_PLUGIN_VERSION */
  const char* name; /* for logs: "ib", "ucx" */
  /* Called once per process before anything else (the library serialises it). Returns
   * non-zero, with lastError() saying why, when the backend cannot work here (no device,
   * missing driver). *context goes to the calls that take one. */
  int (*init)(const collNetInit_t* in, void** context);
  int (*devices)(void* context, int* ndev);
  int (*getProperties)(void* context, int dev, collNetProperties_t* props);
  /* handle and reply: COLL_NET_HANDLE_BYTES bytes each (to fill, or as filled by the
   * peer). On success the endpoint is set (never NULL). */
  int (*listen)(void* context, int dev, void* handle, void** listenComm);
  int (*connect)(void* context, int dev, const void* handle, void* reply, void** sendComm);
  int (*accept)(void* listenComm, const void* reply, void** recvComm);
  int (*isend)(void* sendComm, const void* data, size_t size, uint64_t tag, void** request);
  int (*irecv)(void* recvComm, void* data, size_t size, void** request);
  /* *done: 1 when the message moved completely (then *size and, for receives, *tag are
   * set; size and tag may be NULL when not wanted). */
  int (*test)(void* request, int* done, size_t* size, uint64_t* tag);
  int (*closeSend)(void* sendComm);
  int (*closeRecv)(void* recvComm);
  int (*closeListen)(void* listenComm);
  /* The text of this thread's last failure; never NULL. */
  const char* (*lastError)(void* context);
  /* Called once when the process no longer uses the backend (may be never). */
  void (*finalize)(void* context);
} collNetPlugin_v1_t;

#ifdef __cplusplus
}
#endif

#endif /* COLL_NET_H_ */
