/*
 * libcollective: collective communication for host and device buffers.
 *
 * C ABI. Every call returns a collResult_t; on failure a human-readable
 * explanation is available from collGetLastError(comm) (or collGetLastError(NULL)
 * for calls that have no communicator yet). All handles are opaque.
 */
#ifndef COLLECTIVE_H_
#define COLLECTIVE_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define COLL_MAJOR 0
#define COLL_MINOR 1
#define COLL_PATCH 0
/* collGetVersion returns COLL_VERSION_CODE: major*10000 + minor*100 + patch. */
#define COLL_VERSION_CODE (COLL_MAJOR * 10000 + COLL_MINOR * 100 + COLL_PATCH)

/* In C++ these enums get int as their fixed underlying type, so that every int value is
 * a value of the type there as in C: a bad value passed in, say (collDataType_t)42, is
 * refused with collInvalidArgument rather than being undefined behaviour. The size and
 * the calling convention are those of int either way. */
#ifdef __cplusplus
#define COLL_ENUM_BASE : int
#else
#define COLL_ENUM_BASE
#endif

typedef enum COLL_ENUM_BASE {
  collSuccess = 0,
  collInvalidArgument = 1,   /* a bad value was passed (null buffer, bad type, rank out of range...) */
  collInvalidUsage = 2,      /* a call in the wrong state (use after destroy, mismatched group...) */
  collSystemError = 3,       /* the OS refused something (socket, shared memory, thread) */
  collRemoteError = 4,       /* a peer died, closed its connection or sent malformed data */
  collTimeout = 5,           /* a wait exceeded COLL_TIMEOUT */
  collInternalError = 6,     /* a bug in libcollective */
  collInProgress = 7,        /* a nonblocking operation has not completed yet */
  collUnhandledCudaError = 8,/* a CUDA call failed; the message carries CUDA's text */
  collRevoked = 9,           /* the communicator was revoked (collCommRevoke, here or on a peer) */
  collNumResults = 10
} collResult_t;

/* Same numbering as NCCL so that code written for one ports to the other. */
typedef enum COLL_ENUM_BASE {
  collInt8 = 0, collChar = 0,
  collUint8 = 1,
  collInt32 = 2, collInt = 2,
  collUint32 = 3,
  collInt64 = 4,
  collUint64 = 5,
  collFloat16 = 6, collHalf = 6,
  collFloat32 = 7, collFloat = 7,
  collFloat64 = 8, collDouble = 8,
  collBfloat16 = 9,
  /* Beyond NCCL's list (as Gloo, MPI and torch have them). */
  collInt16 = 10,
  collUint16 = 11,
  collNumTypes = 12
} collDataType_t;

typedef enum COLL_ENUM_BASE {
  collSum = 0,
  collProd = 1,
  collMax = 2,
  collMin = 3,
  collAvg = 4,
  /* Bitwise and, or and exclusive or (as MPI_BAND/BOR/BXOR): integer types only. */
  collBand = 5,
  collBor = 6,
  collBxor = 7,
  /* Reproducible sum and average of float16, bfloat16, float32 and float64: the result
   * is a function of the set of inputs alone, the same bits whatever the algorithm,
   * transport, chunk size, topology, rank count (zero inputs aside) or assignment of
   * inputs to ranks (doc/algorithms.md, "Reproducible reductions", gives the method and
   * its error bound). Integer types take them as collSum and collAvg, which are exact
   * and so reproducible already. At most 4096 ranks. COLL_REPRODUCIBLE=1 makes collSum
   * and collAvg of floating types on a communicator behave like these. */
  collSumReproducible = 8,
  collAvgReproducible = 9,
  collNumOps = 10
} collRedOp_t;

/* Where the scalar of a pre-multiplied sum lives (collRedOpCreatePreMulSum); same
 * numbering as NCCL's ncclScalarResidence_t. */
typedef enum COLL_ENUM_BASE {
  collScalarDevice = 0,        /* a pointer to device memory, read at each call */
  collScalarHostImmediate = 1, /* a pointer to host memory, read once at creation */
  collNumScalarResidences = 2
} collScalarResidence_t;

typedef struct collComm* collComm_t;
typedef struct collRequest* collRequest_t;

/* A CUDA stream (cudaStream_t) for device buffers; pass NULL for host buffers. */
typedef void* collStream_t;

#define COLL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[COLL_UNIQUE_ID_BYTES];
} collUniqueId;

/* Pass as color to collCommSplit to take no part in any new communicator. */
#define COLL_SPLIT_NOCOLOR (-1)

/* Options for collCommInitRankConfig. Initialise with COLL_CONFIG_INITIALIZER, then set
 * the fields wanted; a field left at its initial value (COLL_CONFIG_UNDEF_INT) takes the
 * library's default (the environment's COLL_* variable). size, magic and version let
 * later releases add fields: a program built against an older header still passes a
 * valid (shorter) struct.
 *   timeoutSec: bound of every wait of the communicator and of the communicators split
 *     from it, in seconds, in [1, 1000000000], in place of COLL_TIMEOUT.
 *   tunables: NULL, or an array of "NAME=value" strings ended by NULL, any of the COLL_*
 *     tunables (COLL_DEBUG=INFO lists them), each in place of its environment
 *     variable for this communicator and those split from it, e.g.
 *     { "COLL_ALGO=allreduce:ring", "COLL_TRANSPORT=tcp", NULL }. An unknown name or a bad
 *     value is collInvalidArgument. The strings are read during the call only. */
#define COLL_CONFIG_UNDEF_INT INT32_MIN
#define COLL_CONFIG_MAGIC 0xC0119F16u
typedef struct {
  size_t size;           /* sizeof(collConfig_t) as the caller compiled it */
  unsigned int magic;    /* COLL_CONFIG_MAGIC */
  unsigned int version;  /* COLL_VERSION_CODE of the caller's header */
  int timeoutSec;
  const char* const* tunables;
} collConfig_t;
#define COLL_CONFIG_INITIALIZER \
  { sizeof(collConfig_t), COLL_CONFIG_MAGIC, COLL_VERSION_CODE, COLL_CONFIG_UNDEF_INT, NULL }

/* ---- library and errors ---- */
collResult_t collGetVersion(int* version);
const char* collGetErrorString(collResult_t result);
/* Last error text for this communicator, or for the calling thread when comm is NULL
 * (or when the comm handle itself was invalid). Never returns NULL. */
const char* collGetLastError(collComm_t comm);

/* ---- memory that same-host peers reach directly ----
 * collMemAlloc returns `size` bytes (> 0) of zero-filled, page-aligned host memory backed
 * by an anonymous shared-memory file. Buffers inside it (all of a buffer, at any offset)
 * are copied by ranks of the same host through a mapping of their own, with plain loads
 * and streaming stores, instead of through the kernel (process_vm_readv/writev): large
 * collectives on such buffers move fewer bytes through memory. Any other host buffer
 * works as before. Free with collMemFree (NULL is a no-op); a pointer collMemAlloc did
 * not return is collInvalidArgument. Thread-safe; needs no communicator. */
collResult_t collMemAlloc(void** ptr, size_t size);
collResult_t collMemFree(void* ptr);

/* ---- communicators ---- */
/* Makes a new job id: the root address of a rendezvous served by this process and a
 * random job secret. Pass it to every rank by any means (MPI_Bcast, a file, a socket). */
collResult_t collGetUniqueId(collUniqueId* uniqueId);
collResult_t collCommInitRank(collComm_t* comm, int nranks, collUniqueId commId, int rank);
/* As collCommInitRank, with the options of *config (NULL: all defaults). A config not made
 * with COLL_CONFIG_INITIALIZER (wrong magic or size) or a field out of range is
 * collInvalidArgument. */
collResult_t collCommInitRankConfig(collComm_t* comm, int nranks, collUniqueId commId, int rank,
                                    const collConfig_t* config);
/* Reads rank, size and rendezvous from collectiverun's COLL_* variables, Open MPI's
 * OMPI_COMM_WORLD_* (through MPI when built with it) or Slurm's SLURM_* variables.
 * Without any of them the process is a job of one rank (rank 0 of 1). */
collResult_t collCommInitFromEnv(collComm_t* comm);
collResult_t collCommDestroy(collComm_t comm);
/* Stops all pending work, wakes every waiter with an error and frees the communicator.
 * Always returns. */
collResult_t collCommAbort(collComm_t comm);
/* Collective over comm. Ranks with the same color form a new communicator, ordered by
 * key then by old rank. color == COLL_SPLIT_NOCOLOR yields *newcomm == NULL. */
collResult_t collCommSplit(collComm_t comm, int color, int key, collComm_t* newcomm);
collResult_t collCommCount(const collComm_t comm, int* count);
collResult_t collCommUserRank(const collComm_t comm, int* rank);
/* The first error seen by the communicator's background work (collSuccess if none). */
collResult_t collCommGetAsyncError(collComm_t comm, collResult_t* asyncError);

/* ---- surviving failed ranks (doc/recovery.md) ----
 * collCommRevoke: every operation on comm in flight or issued later fails with
 * collRevoked, on this rank at once and on every other live rank within a health check
 * (COLL_HEALTH_CHECK_MS), wherever it waits. Needs no peer to answer; safe to call from
 * another thread while an operation runs. Afterwards only collCommGetFailedRanks,
 * collCommShrink, collCommDestroy and collCommAbort are of use on comm. */
collResult_t collCommRevoke(collComm_t comm);
/* The ranks of comm whose process is gone, as this rank sees it now (it asks: a peer on
 * this kernel by its pid, any other through its notice port), in increasing order. At
 * most `capacity` ranks are written to `ranks` (may be NULL when capacity is 0); *nFailed
 * gets how many there are. collCommFailureReason says what showed rank `rank` dead ("" for
 * a rank not found dead); the text lives until this thread calls it again. */
collResult_t collCommGetFailedRanks(collComm_t comm, int* ranks, int capacity, int* nFailed);
const char* collCommFailureReason(collComm_t comm, int rank);
/* Collective over the surviving ranks of comm (revoked or not): a new communicator
 * without the nExclude ranks in excludeRanks, which every caller must pass alike (any
 * order; collCommGetFailedRanks gives it). Survivors keep their order and are renumbered
 * 0..n-1. The lowest surviving rank hosts the new rendezvous on a port every rank learned
 * when comm was made, so it works whichever ranks died (rank 0 and the process of the
 * original rendezvous root included). Excluding oneself, a rank out of range, a duplicate,
 * or a rank whose process is still alive is collInvalidArgument; callers passing different
 * sets get collInvalidUsage; a rank that fails meanwhile makes it fail on the others
 * (collRemoteError, or collTimeout after COLL_TIMEOUT) and it may be called again.
 * comm stays allocated: destroy it afterwards. */
collResult_t collCommShrink(collComm_t comm, const int* excludeRanks, int nExclude, collComm_t* newcomm);
/* Collective over comm (not revoked, no error): a new communicator of nranks + nNew ranks.
 * Ranks of comm keep their numbers; new processes take ranks nranks .. nranks+nNew-1 by
 * calling collCommInitRank(&c, nranks + nNew, id, rank) with the id of
 * collCommGetGrowId(comm, &id) (any rank of comm gives the same; pass it as for
 * collGetUniqueId, e.g. as COLL_JOIN_ID, see collCommInitFromEnv), before or after the
 * ranks of comm call collCommGrow. nNew < 1 or a total beyond 65536 is
 * collInvalidArgument. comm stays usable; destroy it when done. */
collResult_t collCommGrow(collComm_t comm, int nNew, collComm_t* newcomm);
collResult_t collCommGetGrowId(collComm_t comm, collUniqueId* id);

/* ---- collectives (blocking for host buffers) ----
 * sendbuff == recvbuff is an in-place operation. Counts are in elements. */
collResult_t collAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           collDataType_t datatype, collRedOp_t op, collComm_t comm,
                           collStream_t stream);
collResult_t collBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           collDataType_t datatype, int root, collComm_t comm,
                           collStream_t stream);
collResult_t collReduce(const void* sendbuff, void* recvbuff, size_t count,
                        collDataType_t datatype, collRedOp_t op, int root, collComm_t comm,
                        collStream_t stream);
/* recvbuff holds nranks * sendcount elements; rank r's part lands at offset r*sendcount.
 * In place when sendbuff == recvbuff + rank*sendcount. */
collResult_t collAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           collDataType_t datatype, collComm_t comm, collStream_t stream);
/* sendbuff holds nranks * recvcount elements. In place when recvbuff == sendbuff + rank*recvcount. */
collResult_t collReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               collDataType_t datatype, collRedOp_t op, collComm_t comm,
                               collStream_t stream);
/* Each rank sends count elements to every rank (nranks*count in each buffer). */
collResult_t collAllToAll(const void* sendbuff, void* recvbuff, size_t count,
                          collDataType_t datatype, collComm_t comm, collStream_t stream);
/* Uneven all-to-all: this rank sends sendcounts[p] elements from sendbuff + sdispls[p]
 * to rank p, and receives recvcounts[p] elements from rank p into recvbuff + rdispls[p]
 * (counts and displacements in elements, arrays of nranks entries). recvcounts[p] here
 * must equal sendcounts[me] on rank p. Parts may be empty; sendbuff == recvbuff is in
 * place (what is sent is what the buffer held before the call). Host buffers only:
 * stream must be NULL. Inside a group it is deferred like collSend/collRecv. */
collResult_t collAllToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                           void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
                           collDataType_t datatype, collComm_t comm, collStream_t stream);
/* Every rank sends sendcount elements to root. On the root, recvbuff holds
 * nranks * sendcount elements, rank r's part at offset r*sendcount; on the other ranks
 * recvbuff is not used and may be NULL. In place on the root when
 * sendbuff == recvbuff + root*sendcount. */
collResult_t collGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                        collDataType_t datatype, int root, collComm_t comm, collStream_t stream);
/* root sends recvcount elements to every rank. On the root, sendbuff holds
 * nranks * recvcount elements, rank r's part at offset r*recvcount; on the other ranks
 * sendbuff is not used and may be NULL. In place on the root when
 * recvbuff == sendbuff + root*recvcount. */
collResult_t collScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                         collDataType_t datatype, int root, collComm_t comm, collStream_t stream);
collResult_t collSend(const void* sendbuff, size_t count, collDataType_t datatype, int peer,
                      collComm_t comm, collStream_t stream);
collResult_t collRecv(void* recvbuff, size_t count, collDataType_t datatype, int peer,
                      collComm_t comm, collStream_t stream);
collResult_t collBarrier(collComm_t comm);

/* Calls between GroupStart and GroupEnd are deferred and issued together at GroupEnd
 * (so that matching sends and receives between two ranks cannot deadlock). Groups nest.
 * Calls with device buffers or a stream are launched as one stream-ordered unit per
 * communicator, after the earlier work on every stream they name (doc/cuda.md). */
collResult_t collGroupStart(void);
collResult_t collGroupEnd(void);

/* ---- nonblocking collectives ----
 * They progress on the communicator's own thread; operations on one communicator are
 * executed in the order they were issued, blocking and nonblocking alike. Collectives
 * take device buffers too (the input must be ready; see doc/cuda.md); collIsend and
 * collIrecv take host buffers only. */
collResult_t collIallReduce(const void* sendbuff, void* recvbuff, size_t count,
                            collDataType_t datatype, collRedOp_t op, collComm_t comm,
                            collRequest_t* request);
collResult_t collIbroadcast(const void* sendbuff, void* recvbuff, size_t count,
                            collDataType_t datatype, int root, collComm_t comm,
                            collRequest_t* request);
collResult_t collIreduce(const void* sendbuff, void* recvbuff, size_t count,
                         collDataType_t datatype, collRedOp_t op, int root, collComm_t comm,
                         collRequest_t* request);
collResult_t collIallGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                            collDataType_t datatype, collComm_t comm, collRequest_t* request);
collResult_t collIreduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                collDataType_t datatype, collRedOp_t op, collComm_t comm,
                                collRequest_t* request);
collResult_t collIallToAll(const void* sendbuff, void* recvbuff, size_t count,
                           collDataType_t datatype, collComm_t comm, collRequest_t* request);
collResult_t collIallToAllv(const void* sendbuff, const size_t sendcounts[], const size_t sdispls[],
                            void* recvbuff, const size_t recvcounts[], const size_t rdispls[],
                            collDataType_t datatype, collComm_t comm, collRequest_t* request);
collResult_t collIgather(const void* sendbuff, void* recvbuff, size_t sendcount,
                         collDataType_t datatype, int root, collComm_t comm, collRequest_t* request);
collResult_t collIscatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                          collDataType_t datatype, int root, collComm_t comm, collRequest_t* request);
collResult_t collIsend(const void* sendbuff, size_t count, collDataType_t datatype, int peer,
                       collComm_t comm, collRequest_t* request);
collResult_t collIrecv(void* recvbuff, size_t count, collDataType_t datatype, int peer,
                       collComm_t comm, collRequest_t* request);
collResult_t collIbarrier(collComm_t comm, collRequest_t* request);

/* *done becomes 1 when the request finished; the request is then released and *request
 * set to NULL. The request's own result is returned (collInProgress while running). */
collResult_t collTest(collRequest_t* request, int* done);
/* Waits (at most COLL_TIMEOUT), releases the request and sets *request to NULL. */
collResult_t collWait(collRequest_t* request);

/* ---- user-defined reduction operators ----
 * collRedOpCreatePreMulSum makes a reduction operator for comm: every rank multiplies
 * each element of its own input by its own scalar (ranks may pass different scalars),
 * then the products are summed as by collSum. The op is a new collRedOp_t value (from
 * collNumOps upward, never reused) accepted by the reducing collectives of comm alone
 * (collAllReduce, collReduce, collReduceScatter and their nonblocking forms), with
 * `datatype` alone. scalar points to one element of `datatype`. Integer types multiply
 * in that type, wrapping modulo 2^bits as their sums do; float16 and bfloat16 products
 * are rounded to the type once. Every rank of a call must pass such an op (another
 * reduction on another rank is a mismatch); the scalars may differ.
 *   collScalarHostImmediate: *scalar is read here; the pointer need not outlive the call.
 *   collScalarDevice: not supported yet; refused with collInvalidUsage.
 * At most 1024 ops may be live on one communicator. A call takes the op's scalar when it
 * is issued: destroying the op afterwards (even while a nonblocking call or a group that
 * uses it is pending) does not affect that call. Ops die with their communicator. */
collResult_t collRedOpCreatePreMulSum(collRedOp_t* op, void* scalar, collDataType_t datatype,
                                      collScalarResidence_t residence, collComm_t comm);
/* Destroys an op made by collRedOpCreatePreMulSum on comm; a built-in op, an op of
 * another communicator or an op already destroyed is an error. */
collResult_t collRedOpDestroy(collRedOp_t op, collComm_t comm);

/* Size in bytes of one element of datatype, or 0 for an invalid type. */
size_t collTypeSize(collDataType_t datatype);

#ifdef __cplusplus
}
#endif
#endif /* COLLECTIVE_H_ */
