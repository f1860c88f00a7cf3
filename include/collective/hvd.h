/* C interface to the Horovod-style engine of <collective/hvd.hpp>, for language bindings
 * (the Python package `collective.torch` drives it through ctypes) and for C programs.
 *
 * It acts on the one process-wide engine of the C++ free functions (collective::hvd::init
 * and friends): collHvdInit here and hvd::init() there start the same engine.
 *
 * Every call returns a collResult_t. On failure collHvdLastError() returns the reason as
 * text (kept per thread, valid until this thread's next call into this interface); on
 * success it returns "". No call throws or aborts on bad input.
 *
 * Tensors are views: the engine reads `data` (and writes `data` of the output) until the
 * operation's handle has finished; the caller keeps that memory alive until then.
 * A handle stays valid until collHvdRelease(), also after it finished.
 */
#ifndef COLLECTIVE_HVD_H_
#define COLLECTIVE_HVD_H_

#include <stddef.h>
#include <stdint.h>

#include "../collective.h"

#ifdef __cplusplus
extern "C" {
#endif

#define COLL_HVD_MAX_DIMS 16

typedef enum {
  collHvdSum = 0,
  collHvdAverage = 1,
  collHvdMin = 2,
  collHvdMax = 3,
  collHvdProduct = 4,
  /* Reproducible Sum and Average of floating types (collSumReproducible and
   * collAvgReproducible of collective.h); integer types take them as Sum and Average. */
  collHvdSumReproducible = 5,
  collHvdAverageReproducible = 6
} collHvdOp_t;

typedef enum {
  collHvdCompressNone = 0,
  collHvdCompressFP16 = 1,
  collHvdCompressBF16 = 2,
  collHvdCompressInt8 = 3,
  collHvdCompressTopK = 4
} collHvdCompressor_t;

typedef enum { collHvdCPU = 0, collHvdCUDA = 1 } collHvdDeviceType_t;

/* A view of caller memory. ndim 0 is a scalar (one element). */
typedef struct {
  void* data;
  collDataType_t dtype;
  int ndim;              /* 0..COLL_HVD_MAX_DIMS */
  const int64_t* shape;  /* ndim entries, each >= 0; may be NULL when ndim == 0 */
  int deviceType;        /* collHvdDeviceType_t */
  int deviceIndex;
} collHvdTensor_t;

/* Compression of an allreduce (float32 tensors, Sum or Average). NULL means none. */
typedef struct {
  int compressor;      /* collHvdCompressor_t */
  int blockSize;       /* Int8: elements sharing one scale (e.g. 256) */
  int stochastic;      /* Int8: 1 stochastic rounding, 0 nearest */
  double density;      /* TopK: fraction of elements sent, in (0, 1] */
  int errorFeedback;   /* Int8, TopK: 1 keeps what was not sent and adds it next step */
} collHvdCompression_t;

typedef int64_t collHvdHandle_t; /* > 0 */

/* The reason for this thread's last failure, "" after a success. Never NULL. */
const char* collHvdLastError(void);

/* Starts the process-wide engine from the environment (collectiverun, mpirun, Slurm:
 * as collCommInitFromEnv). collInvalidUsage if it already runs. */
collResult_t collHvdInit(void);
/* Starts it on `comm` instead (every rank of comm calls it); comm is not taken over:
 * destroy it after collHvdShutdown. Used by the elastic mode of collective.torch, which
 * replaces a shrunk or grown communicator (doc/recovery.md). */
collResult_t collHvdInitComm(collComm_t comm);
/* Stops it on every rank at their next round; pending operations fail. No-op when not
 * running. Handles stay readable until released. */
collResult_t collHvdShutdown(void);
/* 1 when running, 0 otherwise. */
int collHvdIsInitialized(void);
/* Any pointer may be NULL. collInvalidUsage when not initialized. */
collResult_t collHvdTopology(int* rank, int* size, int* localRank, int* localSize,
                             int* crossRank, int* crossSize);

/* Process sets: 0 is the global one. Adding and removing are collective over all ranks. */
collResult_t collHvdAddProcessSet(const int* ranks, int nranks, int* id);
collResult_t collHvdRemoveProcessSet(int id);
/* rank: this process's rank in the set, -1 when not a member; size: the set's size. */
collResult_t collHvdProcessSetInfo(int id, int* rank, int* size);

/* Asynchronous collectives. Names identify a tensor across ranks (the same name on every
 * rank; not used twice while in flight). op is a collHvdOp_t; prescale multiplies the
 * input before, postscale the result after the reduction (Average's division included).
 * input and output may be the same view (in place). */
collResult_t collHvdAllreduceAsync(const collHvdTensor_t* input, const collHvdTensor_t* output,
                                   const char* name, int op, double prescale, double postscale,
                                   const collHvdCompression_t* compression, int processSet,
                                   collHvdHandle_t* handle);
/* n tensors fused and finished together; members are named name.0, name.1, ... */
collResult_t collHvdGroupedAllreduceAsync(int n, const collHvdTensor_t* inputs,
                                          const collHvdTensor_t* outputs, const char* name,
                                          int op, double prescale, double postscale,
                                          const collHvdCompression_t* compression,
                                          int processSet, collHvdHandle_t* handle);
collResult_t collHvdBroadcastAsync(const collHvdTensor_t* input, const collHvdTensor_t* output,
                                   int rootRank, const char* name, int processSet,
                                   collHvdHandle_t* handle);
/* The first dimension may differ per rank; the output (collHvdOutput*) stacks every
 * rank's rows in rank order. */
collResult_t collHvdAllgatherAsync(const collHvdTensor_t* input, const char* name, int processSet,
                                   collHvdHandle_t* handle);
/* splits[r] rows of input go to rank r; nsplits 0 (splits NULL) splits evenly. */
collResult_t collHvdAlltoallAsync(const collHvdTensor_t* input, const int64_t* splits,
                                  int nsplits, const char* name, int processSet,
                                  collHvdHandle_t* handle);
/* Reduces and leaves this rank its share of the first dimension (the first dim % size
 * ranks get one more row). */
collResult_t collHvdReducescatterAsync(const collHvdTensor_t* input, const char* name, int op,
                                       double prescale, double postscale, int processSet,
                                       collHvdHandle_t* handle);

/* *done = 1 once the operation finished, successfully or not; never blocks. */
collResult_t collHvdPoll(collHvdHandle_t handle, int* done);
/* Waits until it finished; returns its result (collSuccess or the failure's code, with
 * the reason in collHvdLastError()). */
collResult_t collHvdWait(collHvdHandle_t handle);
/* After a successful wait, for allgather, alltoall and reducescatter: the output's shape
 * (ndim entries written to shape, which has room for COLL_HVD_MAX_DIMS) and a copy of its
 * bytes (bytes must equal its size). */
collResult_t collHvdOutputShape(collHvdHandle_t handle, int* ndim, int64_t* shape);
collResult_t collHvdOutputCopy(collHvdHandle_t handle, void* dst, size_t bytes);
/* Instead of a copy: hands the output's memory (host outputs only) to the caller. *data
 * stays valid until collHvdOutputFree(*data), before or after collHvdRelease; the engine
 * never touches it again. Once per handle. A zero-byte output gives *data = NULL. */
collResult_t collHvdOutputTake(collHvdHandle_t handle, void** data);
/* Frees memory from collHvdOutputTake (NULL: nothing to do); anything else is refused. */
collResult_t collHvdOutputFree(void* data);
/* alltoall: rows received from each rank (n must be the process set's size). */
collResult_t collHvdReceivedSplits(collHvdHandle_t handle, int64_t* splits, int n);
/* Forgets the handle and frees its output. An unfinished operation still completes; the
 * caller must keep its tensors alive until then (wait first). */
collResult_t collHvdRelease(collHvdHandle_t handle);

/* The engine's timeline (Chrome trace JSON, as COLL_TIMELINE), switched at run time on
 * this rank: "%r" in path becomes the rank, and without it only rank 0 writes;
 * markCycles != 0 marks every engine round that ran operations. collInvalidUsage while
 * one is being written or when not initialized, collInvalidArgument for a NULL or empty
 * path, collSystemError when the file cannot be created. Stopping when none is being
 * written does nothing. */
collResult_t collHvdStartTimeline(const char* path, int markCycles);
collResult_t collHvdStopTimeline(void);

collResult_t collHvdBarrier(int processSet);
/* This rank has no more data (see hvd::join); *lastRank: the last rank to join. */
collResult_t collHvdJoin(int processSet, int* lastRank);

#ifdef __cplusplus
}
#endif

#endif /* COLLECTIVE_HVD_H_ */
