#include "common.hpp"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <sstream>

namespace perf {
namespace {

struct TypeEntry {
  const char* name;
  collDataType_t type;
};
// The first spelling of each type is the one printed; the rest are nccl-tests aliases.
constexpr TypeEntry kTypes[] = {
    {"int8", collInt8},       {"uint8", collUint8},   {"int32", collInt32},
    {"uint32", collUint32},   {"int64", collInt64},   {"uint64", collUint64},
    {"half", collHalf},       {"float", collFloat},   {"double", collDouble},
    {"bfloat16", collBfloat16}, {"char", collInt8},   {"int", collInt32},
    {"float16", collHalf},    {"float32", collFloat}, {"float64", collDouble},
    {"bf16", collBfloat16},   {"int16", collInt16},   {"uint16", collUint16},
};
constexpr const char* kOps[] = {"sum", "prod", "max", "min", "avg", "band", "bor", "bxor", "sumrepro", "avgrepro"};
static_assert(std::size(kOps) == collNumOps);

std::string fail(const std::string& flag, const std::string& value, const char* why) {
  return "invalid value '" + value + "' for " + flag + ": " + why;
}

long long parseInt(const std::string& flag, const std::string& value, long long lo,
                   long long hi) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0' || errno != 0)
    throw UsageError(fail(flag, value, "not an integer"));
  if (v < lo || v > hi) {
    throw UsageError(fail(flag, value, "out of range") + " [" + std::to_string(lo) + ", " +
                     std::to_string(hi) + "]");
  }
  return v;
}

double parseDouble(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || errno != 0 || !std::isfinite(v))
    throw UsageError(fail(flag, value, "not a number"));
  return v;
}

// -R: 0 or 1; nccl-tests' 2 (symmetric registration) has no counterpart here.
bool parseRegister(const std::string& flag, const std::string& value) {
  if (value == "2")
    throw UsageError(flag + " 2: symmetric registration is not supported; -R 1 takes the"
                     " buffers from collMemAlloc (memory same-host peers map)");
  return parseInt(flag, value, 0, 1) == 1;
}

struct Flag {
  char shortName;
  const char* longName;
  std::function<void(Options&, const std::string& flag, const std::string& value)> apply;
};

const std::vector<Flag>& flags() {
  constexpr long long kIntMax = std::numeric_limits<int>::max();
  static const std::vector<Flag> table = {
      {'b', "minbytes", [](Options& o, auto& f, auto& v) { o.minBytes = parseSize(v, f); }},
      {'e', "maxbytes", [](Options& o, auto& f, auto& v) { o.maxBytes = parseSize(v, f); }},
      {'i', "stepbytes", [](Options& o, auto& f, auto& v) {
         o.stepBytes = parseSize(v, f);
         if (o.stepBytes == 0) throw UsageError(fail(f, v, "must be > 0"));
       }},
      {'f', "stepfactor", [](Options& o, auto& f, auto& v) {
         o.stepFactor = parseDouble(f, v);
         if (o.stepFactor < 1.0) throw UsageError(fail(f, v, "must be >= 1"));
       }},
      {'n', "iters", [](Options& o, auto& f, auto& v) {
         o.iters = static_cast<int>(parseInt(f, v, 1, kIntMax));
         o.itersGiven = true;
       }},
      {'w', "warmup_iters", [](Options& o, auto& f, auto& v) {
         o.warmup = static_cast<int>(parseInt(f, v, 0, kIntMax));
         o.warmupGiven = true;
       }},
      {'c', "check", [](Options& o, auto& f, auto& v) {
         o.check = static_cast<int>(parseInt(f, v, 0, 1000));
       }},
      {'d', "datatype", [](Options& o, auto& f, auto& v) {
         o.types.clear();
         if (v == "all") {
           for (int t = 0; t < collNumTypes; ++t) o.types.push_back(collDataType_t(t));
         } else {
           o.types.push_back(parseType(v));
         }
       }},
      {'o', "op", [](Options& o, auto& f, auto& v) {
         o.ops.clear();
         if (v == "all") {
           for (int op = 0; op < collNumOps; ++op) o.ops.push_back(collRedOp_t(op));
         } else {
           o.ops.push_back(parseOp(v));
         }
       }},
      {'r', "root", [](Options& o, auto& f, auto& v) {
         o.allRoots = v == "all";
         o.root = o.allRoots ? 0 : static_cast<int>(parseInt(f, v, 0, kIntMax));
       }},
      {'z', "blocking", [](Options& o, auto& f, auto& v) {
         o.blocking = static_cast<int>(parseInt(f, v, 0, 3));
       }},
      {'a', "average", [](Options& o, auto& f, auto& v) {
         o.average = static_cast<AvgMode>(parseInt(f, v, 0, 3));
       }},
      {'m', "agg_iters", [](Options& o, auto& f, auto& v) {
         o.aggIters = static_cast<int>(parseInt(f, v, 1, kIntMax));
       }},
      {'N', "run_cycles", [](Options& o, auto& f, auto& v) {
         o.cycles = static_cast<int>(parseInt(f, v, 0, kIntMax));
       }},
      // One rank per process: one thread, and at most one GPU (-g 0 keeps the buffers in
      // host memory, which nccl-tests cannot do but a CPU library can).
      {'t', "nthreads", [](Options&, auto& f, auto& v) { parseInt(f, v, 1, 1); }},
      {'g', "ngpus", [](Options& o, auto& f, auto& v) { o.deviceBuffers = parseInt(f, v, 0, 1) == 1; }},
      // nccl-tests registers its device buffers with -R; here the host buffers come from
      // collMemAlloc, the memory same-host peers map. --register is the older long form.
      {'R', "local_register", [](Options& o, auto& f, auto& v) { o.sharedBuffers = parseRegister(f, v); }},
      {'\0', "register", [](Options& o, auto& f, auto& v) { o.sharedBuffers = parseRegister(f, v); }},
      {'J', "output_file", [](Options& o, auto& f, auto& v) {
         if (v.empty()) throw UsageError(fail(f, v, "needs a file name"));
         size_t dot = v.rfind('.');
         std::string ext = dot == std::string::npos ? "" : v.substr(dot + 1);
         for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
         if (ext != "json") throw UsageError(fail(f, v, "only .json output is supported"));
         o.outputFile = v;
       }},
      {'I', "per_iter_timing", [](Options& o, auto& f, auto& v) { o.perIterTiming = parseInt(f, v, 0, 1) == 1; }},
      {'K', "per_iter_skip", [](Options& o, auto& f, auto& v) {
         o.perIterSkip = static_cast<int>(parseInt(f, v, 0, kIntMax));
       }},
      {'M', "memory", [](Options& o, auto& f, auto& v) { o.memoryReport = parseInt(f, v, 0, 1) == 1; }},
      {'C', "report_cputime", [](Options& o, auto& f, auto& v) { o.reportCpuTime = parseInt(f, v, 0, 1) == 1; }},
      {'S', "report_timestamps", [](Options& o, auto& f, auto& v) { o.reportTimestamps = parseInt(f, v, 0, 1) == 1; }},
      {'p', "parallel_init", [](Options& o, auto& f, auto& v) { o.parallelInit = parseInt(f, v, 0, 1) == 1; }},
      {'T', "timeout", [](Options& o, auto& f, auto& v) {
         o.timeoutSec = static_cast<double>(parseInt(f, v, 0, 24 * 3600 * 365));
       }},
      {'u', "unalign", [](Options& o, auto& f, auto& v) {
         o.unalign = static_cast<int>(parseInt(f, v, 0, 4096));
       }},
      // nccl-tests' flags for what a host library has no counterpart of: refused by name
      // unless they ask for nothing (their default).
      {'G', "cudagraph", [](Options&, auto& f, auto& v) {
         if (parseInt(f, v, 0, kIntMax) != 0)
           throw UsageError(f + " " + v + ": CUDA graph capture is not supported (the library's"
                            " calls are not graph-capturable); use -G 0");
       }},
      {'D', "device_implementation", [](Options&, auto& f, auto& v) {
         if (parseInt(f, v, 0, kIntMax) != 0)
           throw UsageError(f + " " + v + ": device-API implementations are not supported; use -D 0");
       }},
      {'V', "device_cta_count", [](Options&, auto& f, auto& v) { parseInt(f, v, 1, 127); }},
      {'x', "cta_policy", [](Options&, auto& f, auto& v) {
         if (parseInt(f, v, 0, kIntMax) != 0)
           throw UsageError(f + " " + v + ": CTA policies are not supported (no CUDA kernels of"
                            " NCCL's kind); use -x 0");
       }},
      {'y', "stream_null", [](Options&, auto& f, auto& v) {
         if (parseInt(f, v, 0, 1) != 0)
           throw UsageError(f + " " + v + ": the null stream is not supported (device calls run on"
                            " a stream of their own); use -y 0");
       }},
      // Long form only ('\0' matches no short flag): every letter may one day be one of
      // nccl-tests' flags.
      {'\0', "native", [](Options& o, auto& f, auto& v) { o.native = parseInt(f, v, 0, 1) == 1; }},
  };
  return table;
}

const Flag* findFlag(const std::string& arg, std::string* inlineValue) {
  if (arg.size() >= 3 && arg[0] == '-' && arg[1] == '-') {
    std::string name = arg.substr(2);
    size_t eq = name.find('=');
    if (eq != std::string::npos) {
      *inlineValue = name.substr(eq + 1);
      name.resize(eq);
    }
    for (const Flag& f : flags())
      if (name == f.longName) return &f;
    return nullptr;
  }
  if (arg.size() >= 2 && arg[0] == '-') {
    if (arg.size() > 2) *inlineValue = arg.substr(2);
    for (const Flag& f : flags())
      if (arg[1] == f.shortName) return &f;
  }
  return nullptr;
}

}  // namespace

const char* collName(Coll c) {
  switch (c) {
    case Coll::AllReduce: return "allreduce";
    case Coll::AllGather: return "allgather";
    case Coll::Broadcast: return "broadcast";
    case Coll::Reduce: return "reduce";
    case Coll::ReduceScatter: return "reducescatter";
    case Coll::AllToAll: return "alltoall";
    case Coll::SendRecv: return "sendrecv";
    case Coll::Gather: return "gather";
    case Coll::Scatter: return "scatter";
    case Coll::HyperCube: return "hypercube";
  }
  return "invalid";
}

bool collHasOp(Coll c) {
  return c == Coll::AllReduce || c == Coll::Reduce || c == Coll::ReduceScatter;
}
bool collHasRoot(Coll c) {
  return c == Coll::Broadcast || c == Coll::Reduce || c == Coll::Gather || c == Coll::Scatter;
}

size_t parseSize(const std::string& text, const std::string& what) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])))
    throw UsageError(fail(what, text, "expected a size like 8, 64K, 128M or 1G"));
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (errno != 0) throw UsageError(fail(what, text, "too large"));
  std::string suffix(end);
  int shift = 0;
  if (suffix == "K" || suffix == "k") shift = 10;
  else if (suffix == "M" || suffix == "m") shift = 20;
  else if (suffix == "G" || suffix == "g") shift = 30;
  else if (!suffix.empty())
    throw UsageError(fail(what, text, "unknown suffix (use K, M or G)"));
  if (shift && v > (std::numeric_limits<size_t>::max() >> shift))
    throw UsageError(fail(what, text, "too large"));
  return static_cast<size_t>(v) << shift;
}

Options parseArgs(const std::vector<std::string>& args) {
  Options o;
  bool factorGiven = false, stepBytesGiven = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      o.help = true;
      continue;
    }
    std::string value;
    bool hasInline = false;
    const Flag* f = findFlag(arg, &value);
    if (!f) throw UsageError("unknown argument '" + arg + "' (try -h)");
    hasInline = !value.empty() || arg.find('=') != std::string::npos;
    if (!hasInline) {
      if (i + 1 >= args.size()) throw UsageError("missing value for " + arg);
      value = args[++i];
    }
    f->apply(o, arg, value);
    factorGiven |= f->shortName == 'f';
    stepBytesGiven |= f->shortName == 'i';
  }
  // nccl-tests grows sizes by -f when it is > 1 and by -i otherwise.
  o.additiveSteps = factorGiven ? o.stepFactor <= 1.0 : stepBytesGiven;
  if (o.sharedBuffers && o.deviceBuffers) {
    throw UsageError("-R 1 (buffers from collMemAlloc, host memory) cannot be combined with"
                     " -g 1 (buffers in GPU memory)");
  }
  if (o.perIterSkip > 0 && !o.perIterTiming)
    throw UsageError("-K " + std::to_string(o.perIterSkip) + " needs -I 1 (per-iteration timing)");
  if (o.minBytes > o.maxBytes) {
    throw UsageError("minbytes (" + std::to_string(o.minBytes) + ") > maxbytes (" +
                     std::to_string(o.maxBytes) + ")");
  }
  return o;
}

std::string usageText(const char* prog) {
  std::ostringstream os;
  os << "usage: " << prog << " [flags]   (one rank per process; launch with collectiverun,"
     << " mpirun or srun)\n"
     << "  -b,--minbytes <size>     smallest message (default 8)\n"
     << "  -e,--maxbytes <size>     largest message (default 128M)\n"
     << "  -f,--stepfactor <x>      multiply the size by x each step (default 2)\n"
     << "  -i,--stepbytes <size>    add this many bytes each step (used when -i is given without -f, or -f is 1)\n"
     << "  -n,--iters <n>           timed iterations (default 20; fewer above 8M unless given)\n"
     << "  -w,--warmup_iters <n>    warm-up iterations (default 5; fewer above 8M unless given)\n"
     << "  -c,--check <n>           n checked calls per size, every output element verified;\n"
     << "                           0: no check (default 1)\n"
     << "  -d,--datatype <t|all>    int8 uint8 int16 uint16 int32 uint32 int64 uint64 half float\n"
     << "                           double bfloat16 (default float)\n"
     << "  -o,--op <op|all>         sum prod max min avg band bor bxor sumrepro avgrepro\n"
     << "                           (default sum)\n"
     << "  -r,--root <r|all>        root of broadcast/reduce/gather/scatter (default 0)\n"
     << "  -z,--blocking <0..3>     0: issue the timed calls without waiting (collI* on host\n"
     << "                           buffers) and wait at the end; 1: wait and barrier after\n"
     << "                           each call; 2: wait after each call; 3: wait and barrier\n"
     << "                           after each iteration, the barrier not timed. Without -z:\n"
     << "                           the ordinary calls (on host buffers they return when done)\n"
     << "  -a,--average <0..3>      time across ranks: 0 rank 0, 1 mean, 2 min, 3 max"
     << " (default 3)\n"
     << "  -m,--agg_iters <n>       calls grouped per iteration (default 1)\n"
     << "  -N,--run_cycles <n>      repeat the sweep n times, 0 = forever (default 1)\n"
     << "  -I,--per_iter_timing <0|1>  1: time every iteration alone and print i_min i_max\n"
     << "                           i_p99 i_cv% (max over ranks) per half row (default 0)\n"
     << "  -K,--per_iter_skip <n>   leave the first n iterations out of the -I summary\n"
     << "  -J,--output_file <f.json>  also write the results as nccl-tests' JSON report\n"
     << "  -M,--memory <0|1>        1: report the resident memory of init, buffers and\n"
     << "                           collectives (default 0)\n"
     << "  -C,--report_cputime <0|1>  1: time until the calls return, not until they finish\n"
     << "  -S,--report_timestamps <0|1>  1: a timestamp at the end of each row\n"
     << "  -T,--timeout <s>         end the run (exit 3) after s seconds; 0: none (default)\n"
     << "  -u,--unalign <n>         buffers start n elements past an aligned address (default 0)\n"
     << "  -p,--parallel_init <0|1> accepted: each process initialises its one rank alone\n"
     << "  -g,--ngpus <0|1>         1: buffers in GPU memory (one GPU per local rank) and the\n"
     << "                           calls on a CUDA stream; 0: host memory (default)\n"
     << "  -R,--local_register <0|1>  1: send/recv buffers from collMemAlloc (host memory that\n"
     << "                           same-host ranks map and copy directly); 0: ordinary host\n"
     << "                           memory (default). Not with -g 1; 2 (symmetric) is refused\n"
     << "  -t,--nthreads 1          accepted with value 1 only\n"
     << "  -G,--cudagraph 0, -D,--device_implementation 0, -x,--cta_policy 0, -y,--stream_null 0,\n"
     << "  -V,--device_cta_count <n>  accepted with these values only (no counterpart here)\n"
     << "  --native <0|1>           gather_perf and scatter_perf only: 1 times the library's\n"
     << "                           collGather/collScatter; 0 (the default) times nccl-tests'\n"
     << "                           pattern of grouped collSend/collRecv calls, which takes host\n"
     << "                           buffers only. With 1, -g 1 is allowed: one collective call\n"
     << "                           is the same on every rank, so its device path matches\n";
  return os.str();
}

collDataType_t parseType(const std::string& name) {
  for (const TypeEntry& e : kTypes)
    if (name == e.name) return e.type;
  throw UsageError(fail("-d", name, "unknown datatype (int8 uint8 int32 uint32 int64 uint64 "
                                    "half float double bfloat16 all)"));
}

collRedOp_t parseOp(const std::string& name) {
  for (int i = 0; i < collNumOps; ++i)
    if (name == kOps[i]) return collRedOp_t(i);
  throw UsageError(fail("-o", name, "unknown op (sum prod max min avg band bor bxor sumrepro avgrepro all)"));
}

const char* typeName(collDataType_t dt) {
  for (const TypeEntry& e : kTypes)
    if (e.type == dt) return e.name;
  return "invalid";
}

const char* opName(collRedOp_t op) {
  return (op >= 0 && op < collNumOps) ? kOps[op] : "invalid";
}

bool isBitwiseOp(collRedOp_t op) { return op == collBand || op == collBor || op == collBxor; }
bool isFloatingType(collDataType_t dt) {
  return dt == collHalf || dt == collBfloat16 || dt == collFloat || dt == collDouble;
}

size_t typeBytes(collDataType_t dt) {
  switch (dt) {
    case collInt8: case collUint8: return 1;
    case collHalf: case collBfloat16: case collInt16: case collUint16: return 2;
    case collInt32: case collUint32: case collFloat: return 4;
    case collInt64: case collUint64: case collDouble: return 8;
    default: return 0;
  }
}

std::vector<size_t> sizeList(const Options& o) {
  std::vector<size_t> sizes;
  size_t s = o.minBytes;
  for (;;) {
    sizes.push_back(s);
    size_t next = o.additiveSteps ? s + o.stepBytes
                                  : static_cast<size_t>(static_cast<double>(s) * o.stepFactor);
    // A zero start or a factor too small to move the size would never end.
    if (next <= s || next > o.maxBytes) break;
    s = next;
  }
  return sizes;
}

IterCount itersForSize(const Options& o, size_t bytes) {
  IterCount c{o.iters, o.warmup};
  if (bytes <= kScaleAboveBytes) return c;
  double scale = static_cast<double>(kScaleAboveBytes) / static_cast<double>(bytes);
  if (!o.itersGiven) c.iters = std::max(2, static_cast<int>(o.iters * scale));
  if (!o.warmupGiven)
    c.warmup = std::min(o.warmup, std::max(1, static_cast<int>(o.warmup * scale)));
  return c;
}

Counts countsFor(Coll c, size_t bytes, size_t typeSize, int nranks, int rank) {
  Counts k;
  size_t count = typeSize ? bytes / typeSize : 0;
  size_t n = static_cast<size_t>(nranks);
  size_t r = static_cast<size_t>(rank);
  switch (c) {
    case Coll::AllReduce: case Coll::Broadcast: case Coll::Reduce: case Coll::SendRecv:
      k.sendCount = k.recvCount = k.paramCount = count;
      break;
    // Gather and hypercube fill a gathered buffer like all-gather (gather on the root only).
    case Coll::AllGather: case Coll::Gather: case Coll::HyperCube:
      k.paramCount = k.sendCount = count / n;
      k.recvCount = k.paramCount * n;
      k.sendInplaceOffset = r * k.paramCount;
      break;
    // Scatter reads the root's whole send buffer like reduce-scatter reads every rank's.
    case Coll::ReduceScatter: case Coll::Scatter:
      k.paramCount = k.recvCount = count / n;
      k.sendCount = k.paramCount * n;
      k.recvInplaceOffset = r * k.paramCount;
      break;
    case Coll::AllToAll:
      k.paramCount = count / n;
      k.sendCount = k.recvCount = k.paramCount * n;
      break;
  }
  return k;
}

double busBwFactor(Coll c, int nranks) {
  double n = nranks;
  switch (c) {
    case Coll::AllReduce: return nranks > 1 ? 2.0 * (n - 1) / n : 0.0;
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AllToAll:
    case Coll::Gather:
    case Coll::Scatter:
    case Coll::HyperCube: return nranks > 1 ? (n - 1) / n : 0.0;
    case Coll::Broadcast:
    case Coll::Reduce:
    case Coll::SendRecv: return 1.0;
  }
  return 0.0;
}

std::string optionsProblem(Coll c, const Options& o) {
  const bool hasNative = c == Coll::Gather || c == Coll::Scatter;
  if (o.native && !hasNative) {
    return std::string("--native 1: not supported by ") + collName(c) +
           " (its tool always times the library's own call); only gather and scatter take it";
  }
  // "-o all" pairs the bitwise ops with integer types only; asked for by name, a bitwise
  // op with a floating type is an error here rather than on every rank's first call.
  if (collHasOp(c) && o.ops.size() == 1 && isBitwiseOp(o.ops[0])) {
    for (collDataType_t dt : o.types) {
      if (isFloatingType(dt)) {
        return std::string("-o ") + opName(o.ops[0]) + ": a bitwise op takes integer types, not " +
               typeName(dt);
      }
    }
  }
  const bool grouped = (hasNative && !o.native) || c == Coll::HyperCube;
  // The library stages a group of several device ops whole but runs a group of one op as
  // that op alone (chunked, or over CUDA IPC), and the ranks of a gather or scatter group
  // different numbers of ops, so their device transfers would not match.
  if (grouped && o.deviceBuffers) {
    return std::string("-g 1: not supported by ") + collName(c) +
           " (built from grouped collSend/collRecv calls on host buffers); use -g 0" +
           (hasNative ? " or --native 1" : "");
  }
  // -m wraps the calls of an iteration in one group, and nested groups merge: every step
  // of a hypercube would then be issued at once, each sending blocks not yet received.
  if (c == Coll::HyperCube && o.aggIters > 1) {
    return "-m " + std::to_string(o.aggIters) +
           ": not supported by hypercube (its steps depend on each other and cannot share"
           " one group); use -m 1";
  }
  return "";
}

std::string rankCountProblem(Coll c, int nranks) {
  if (c == Coll::HyperCube && (nranks < 1 || (nranks & (nranks - 1)) != 0)) {
    return "hypercube needs a power-of-two number of ranks (1, 2, 4, 8, ...), not " +
           std::to_string(nranks);
  }
  return "";
}

}  // namespace perf
