// Pure parts of the nccl-tests compatible *_perf tools: command-line parsing, the size
// sweep, the bytes -> element-count mapping and the bus-bandwidth factors. Nothing here
// talks to the library, so the unit tests link it without a communicator.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "collective.h"

namespace perf {

// A bad command line. The message names the flag and the value.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// HyperCube is not a library collective: its tool builds it from grouped collSend/collRecv
// calls. Gather and Scatter are built the same way by default, as nccl-tests builds them;
// with --native 1 their tools time the library's collGather/collScatter instead.
enum class Coll {
  AllReduce, AllGather, Broadcast, Reduce, ReduceScatter, AllToAll, SendRecv,
  Gather, Scatter, HyperCube
};

const char* collName(Coll c);   // "allreduce"...
bool collHasOp(Coll c);         // reductions print and loop over -o
bool collHasRoot(Coll c);       // broadcast, reduce, gather and scatter loop over -r

// How nccl-tests folds the per-rank time into the printed one (-a).
enum class AvgMode { Rank0 = 0, Mean = 1, Min = 2, Max = 3 };

constexpr int kDefaultBlocking = -1;

struct Options {
  size_t minBytes = 8;
  size_t maxBytes = size_t{128} << 20;
  double stepFactor = 2.0;
  size_t stepBytes = size_t{1} << 20;
  bool additiveSteps = false;  // -i given without -f: sizes grow by stepBytes
  int iters = 20;
  int warmup = 5;
  bool itersGiven = false;   // an explicit -n/-w disables the big-size scaling
  bool warmupGiven = false;
  int check = 1;             // -c N: N checked calls per size (0: no check)
  std::vector<collDataType_t> types{collFloat};
  std::vector<collRedOp_t> ops{collSum};
  int root = 0;
  bool allRoots = false;
  // -z, as nccl-tests: 0 issues every call of the timed loop without waiting (the collI*
  // calls on host buffers, stream-ordered calls with -g 1) and waits once at the end;
  // 1 waits for each call and joins a barrier; 2 waits for each call; 3 waits and joins
  // a barrier after each outer iteration (-n), the barrier's time left out.
  // Without -z (kDefaultBlocking) the tools make the library's ordinary calls: on host
  // buffers they return when done, on a stream (-g 1) they are stream-ordered. That is
  // nccl-tests' default on GPUs, where -z 0 costs nothing; here the nonblocking calls
  // hand every call to the communicator's thread, which small messages pay for.
  int blocking = kDefaultBlocking;
  AvgMode average = AvgMode::Max;
  int aggIters = 1;
  int cycles = 1;            // 0: run until killed
  // -g 1: send/recv buffers in device memory (one GPU per local rank) and the calls on a
  // stream; -g 0 (the default): host memory, no stream. Needs a CUDA build and a device.
  bool deviceBuffers = false;
  // -R 1 (nccl-tests' "register user buffers"): send/recv buffers from collMemAlloc, so
  // that ranks on the same host copy into and out of them through mappings of their own
  // instead of process_vm_readv/writev; -R 0 (the default): ordinary host memory. Host
  // memory only: -R 1 with -g 1 is a UsageError.
  bool sharedBuffers = false;
  // --native 1 (long form only, no nccl-tests letter): gather_perf and scatter_perf time
  // the library's collGather/collScatter instead of nccl-tests' grouped send/recv
  // pattern. Refused by the other tools (optionsProblem), whose call is always native.
  bool native = false;
  // -J: nccl-tests' JSON report (rank 0 writes it; an existing file is kept and the
  // report goes to path.0, path.1, ... instead).
  std::string outputFile;
  // -I: every timed iteration's time, summarised (i_min i_max i_p99 i_cv%) and in the
  // JSON report; -K leaves the first K iterations out of the summary.
  bool perIterTiming = false;
  int perIterSkip = 0;
  bool memoryReport = false;   // -M: resident memory of init, buffers and collectives
  bool reportCpuTime = false;  // -C: time until the calls return (before any wait)
  bool reportTimestamps = false;  // -S: a timestamp column
  bool parallelInit = false;   // -p: accepted; one rank per process initialises alone
  double timeoutSec = 0;       // -T: the whole run ends (exit 3) after this many seconds
  int unalign = 0;             // -u: buffers start this many elements past an aligned address
  bool help = false;
};

// Parses "8", "64K", "128M", "1G" (K/M/G are powers of two, either case).
// Throws UsageError naming `what` on garbage, a negative value or overflow.
size_t parseSize(const std::string& text, const std::string& what);

// Parses nccl-tests style flags (short "-b 8", "-b8", long "--minbytes 8",
// "--minbytes=8"). args excludes the program name. Throws UsageError.
Options parseArgs(const std::vector<std::string>& args);
std::string usageText(const char* prog);

collDataType_t parseType(const std::string& name);  // throws UsageError
collRedOp_t parseOp(const std::string& name);       // throws UsageError
const char* typeName(collDataType_t dt);            // nccl-tests spelling: "float", "half"
const char* opName(collRedOp_t op);
bool isBitwiseOp(collRedOp_t op);         // band, bor, bxor: integer types only
bool isFloatingType(collDataType_t dt);
size_t typeBytes(collDataType_t dt);

// The message sizes of one sweep, minBytes..maxBytes inclusive.
std::vector<size_t> sizeList(const Options& o);

// Timed iterations for one size: the -n/-w defaults are scaled down above
// kScaleAboveBytes so that a default sweep to 128M stays short on a small machine.
constexpr size_t kScaleAboveBytes = size_t{8} << 20;
struct IterCount {
  int iters;
  int warmup;
};
IterCount itersForSize(const Options& o, size_t bytes);

// Element counts of one call, following nccl-tests' getCollByteCount: the printed size
// is the larger of the two buffers; in-place calls use one buffer at the given offsets.
struct Counts {
  size_t sendCount = 0;   // elements in the send buffer
  size_t recvCount = 0;   // elements in the receive buffer
  size_t paramCount = 0;  // the count passed to the collective
  size_t sendInplaceOffset = 0;  // elements, in the in-place buffer
  size_t recvInplaceOffset = 0;
  size_t printedCount() const { return sendCount > recvCount ? sendCount : recvCount; }
};
Counts countsFor(Coll c, size_t bytes, size_t typeSize, int nranks, int rank);

// algbw * factor = busbw, nccl-tests' definitions (doc/PERFORMANCE.md there).
double busBwFactor(Coll c, int nranks);

// Why a tool cannot run with these options, known before joining the job ("" if it can):
// --native 1 only for gather and scatter; the grouped send/recv patterns of gather,
// scatter (without --native 1) and hypercube take host buffers only (no -g 1), and
// hypercube's steps cannot be merged into one group (no -m > 1).
std::string optionsProblem(Coll c, const Options& o);
// Why a tool cannot run on nranks ranks ("" if it can): hypercube needs a power of two.
std::string rankCountProblem(Coll c, int nranks);

}  // namespace perf
