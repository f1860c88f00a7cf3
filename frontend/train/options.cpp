#include "train/options.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <utility>

#include "base/error.hpp"
#include "data/fashion_mnist.hpp"
#include "precision.hpp"

namespace collective::frontend {

namespace {

int64_t toInt(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  COLL_CHECK_ARG(!v.empty() && *end == '\0', flag, ": '", v, "' is not an integer");
  // strtoll saturates: 99999999999999999999 would silently become LLONG_MAX.
  COLL_CHECK_ARG(errno != ERANGE, flag, ": '", v, "' is out of range");
  return x;
}

double toDouble(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  COLL_CHECK_ARG(!v.empty() && *end == '\0', flag, ": '", v, "' is not a number");
  return x;
}

hvd::Compression toCompression(const std::string& v, const hvd::Compression& old) {
  hvd::Compression c = old;
  if (v == "none")
    c.kind = hvd::Compressor::None;
  else if (v == "fp16")
    c.kind = hvd::Compressor::FP16;
  else if (v == "bf16")
    c.kind = hvd::Compressor::BF16;
  else if (v == "int8")
    c.kind = hvd::Compressor::Int8;
  else if (v == "topk")
    c.kind = hvd::Compressor::TopK;
  else
    COLL_THROW(collInvalidArgument, "--compression: '", v, "', expected none|fp16|bf16|int8|topk");
  return c;
}

}  // namespace

std::string TrainOptions::usage() {
  return "usage: collectiverun -np R train_fashion_mnist [options]\n"
         "  --epochs N            epochs to train (2)\n"
         "  --batch-size N        global batch, split evenly over ranks (64)\n"
         "  --lr F                learning rate (0.05)\n"
         "  --lr-schedule S       constant | cosine (annealed to 0 over all epochs) (cosine)\n"
         "  --momentum F          SGD momentum (0.9)\n"
         "  --weight-decay F      L2 weight decay (0)\n"
         "  --sync-bn | --no-sync-bn   batch statistics over all ranks or per rank (on)\n"
         "  --compression KIND    none|fp16|bf16|int8|topk gradient compression (none)\n"
         "  --topk-density F      fraction of gradient elements top-k sends (0.01)\n"
         "  --momentum-correction auto|on|off  fold momentum in before the all-reduce (auto: "
         "top-k)\n"
         "  --no-error-feedback   int8/top-k: drop what was not sent\n"
         "  --grad-sync MODE      overlap | step | auto: gradients reduced during backward\n"
         "                        (engine) or in one all-reduce at the step; auto: step when\n"
         "                        the host has no spare core and nothing is compressed (auto)\n"
         "  --seed N              initialisation and shuffling seed (1)\n"
         "  --data-dir PATH       Fashion-MNIST IDX .gz files (/usr/share/datasets/fashion-mnist)\n"
         "  --save PATH           checkpoint after every epoch (rank 0 writes)\n"
         "  --load PATH           resume from a checkpoint\n"
         "  --train-limit N       use the first N training images only\n"
         "  --test-limit N        use the first N test images only\n"
         "  --no-progress         no progress bar, one line per epoch\n"
         "  --blas-threads N      OpenBLAS threads per rank (1)\n"
         "  --max-steps N         at most N steps per epoch (quick runs; 0: all)\n"
         "  --mode M              dp | pipeline | ps (dp)\n"
         "  --stages P            pipeline: stages per replica; ranks = P x replicas (2)\n"
         "  --micro-batches M     pipeline: GPipe micro-batches per step (4)\n"
         "  --servers S           ps: parameter-server ranks, the rest are workers (1)\n"
         "  --ps-sync | --ps-async  ps: barrier per step, or none (sync)\n"
         "  --max-staleness K     ps async: a worker more than K versions ahead waits (4)\n"
         "  --ps-timeout S        ps: a peer silent this long is dead (60)\n"
         "  --precision P         fp32 | bf16 | fp16: forward/backward in 16 bits, float32\n"
         "                        master weights, 16-bit gradient all-reduce; fp16 scales the\n"
         "                        loss dynamically (fp32)\n"
         "  --profile             per-layer time per step after every epoch (rank 0)\n"
         "  --elastic             survive ranks that die (under collectiverun --elastic): the\n"
         "                        survivors shrink the job, roll back to the last commit and\n"
         "                        go on with the data re-sharded; --mode dp, fp32 only; the\n"
         "                        batch must split over every size down to COLL_ELASTIC_MIN_NP\n"
         "  --commit-every N      elastic: commit the training state in memory every N steps\n"
         "                        and at every epoch end (20)\n"
         "  --elastic-grow        elastic: after a shrink, ask collectiverun for replacement\n"
         "                        ranks up to its --max-np and grow back (off: go on with\n"
         "                        the survivors)\n";
}

TrainOptions TrainOptions::parse(const std::vector<std::string>& args) {
  TrainOptions o;
  o.dataDir = kFashionMnistDir;
  using Setter = std::function<void(const std::string&)>;
  const std::map<std::string, Setter> withValue = {
      {"--epochs", [&](const std::string& v) { o.epochs = toInt("--epochs", v); }},
      {"--batch-size", [&](const std::string& v) { o.globalBatch = toInt("--batch-size", v); }},
      {"--lr", [&](const std::string& v) { o.lr = static_cast<float>(toDouble("--lr", v)); }},
      {"--momentum",
       [&](const std::string& v) { o.momentum = static_cast<float>(toDouble("--momentum", v)); }},
      {"--weight-decay",
       [&](const std::string& v) {
         o.weightDecay = static_cast<float>(toDouble("--weight-decay", v));
       }},
      {"--lr-schedule", [&](const std::string& v) { o.lrSchedule = v; }},
      {"--compression",
       [&](const std::string& v) { o.compression = toCompression(v, o.compression); }},
      {"--topk-density",
       [&](const std::string& v) { o.compression.density = toDouble("--topk-density", v); }},
      {"--momentum-correction", [&](const std::string& v) { o.momentumCorrection = v; }},
      {"--grad-sync", [&](const std::string& v) { o.gradSync = v; }},
      {"--seed", [&](const std::string& v) { o.seed = static_cast<uint64_t>(toInt("--seed", v)); }},
      {"--data-dir", [&](const std::string& v) { o.dataDir = v; }},
      {"--save", [&](const std::string& v) { o.savePath = v; }},
      {"--load", [&](const std::string& v) { o.loadPath = v; }},
      {"--train-limit", [&](const std::string& v) { o.trainLimit = toInt("--train-limit", v); }},
      {"--test-limit", [&](const std::string& v) { o.testLimit = toInt("--test-limit", v); }},
      {"--mode", [&](const std::string& v) { o.mode = v; }},
      {"--stages", [&](const std::string& v) { o.stages = static_cast<int>(toInt("--stages", v)); }},
      {"--micro-batches",
       [&](const std::string& v) { o.microBatches = static_cast<int>(toInt("--micro-batches", v)); }},
      {"--servers", [&](const std::string& v) { o.servers = static_cast<int>(toInt("--servers", v)); }},
      {"--max-staleness",
       [&](const std::string& v) { o.maxStaleness = toInt("--max-staleness", v); }},
      {"--ps-timeout", [&](const std::string& v) { o.psTimeout = toDouble("--ps-timeout", v); }},
      {"--precision", [&](const std::string& v) { o.precision = v; }},
      {"--max-steps", [&](const std::string& v) { o.maxSteps = toInt("--max-steps", v); }},
      {"--commit-every",
       [&](const std::string& v) { o.commitEvery = toInt("--commit-every", v); }},
      {"--blas-threads",
       [&](const std::string& v) {
         const int64_t n = toInt("--blas-threads", v);
         COLL_CHECK_ARG(n > 0 && n <= 4096, "--blas-threads ", n, " must be in [1, 4096]");
         o.blasThreads = static_cast<int>(n);
       }},
  };
  const std::map<std::string, std::function<void()>> flags = {
      {"--sync-bn", [&] { o.syncBatchNorm = true; }},
      {"--no-sync-bn", [&] { o.syncBatchNorm = false; }},
      {"--no-error-feedback", [&] { o.compression.error_feedback = false; }},
      {"--no-progress", [&] { o.progress = false; }},
      {"--profile", [&] { o.profile = true; }},
      {"--elastic", [&] { o.elastic = true; }},
      {"--elastic-grow", [&] { o.elasticGrow = true; }},
      {"--ps-sync", [&] { o.psAsync = false; }},
      {"--ps-async", [&] { o.psAsync = true; }},
  };
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i], value;
    const bool inlineValue = arg.find('=') != std::string::npos;
    if (inlineValue) {
      value = arg.substr(arg.find('=') + 1);
      arg = arg.substr(0, arg.find('='));
    }
    if (auto f = flags.find(arg); f != flags.end() && !inlineValue) {
      f->second();
    } else if (auto s = withValue.find(arg); s != withValue.end()) {
      if (!inlineValue) {
        COLL_CHECK_ARG(i + 1 < args.size(), arg, " needs a value");
        value = args[++i];
      }
      s->second(value);
    } else {
      COLL_THROW(collInvalidArgument, "unknown option '", args[i], "'\n", usage());
    }
  }
  COLL_CHECK_ARG(o.epochs >= 0, "--epochs ", o.epochs, " must be >= 0");
  // 0 means all; a negative limit was silently taken as all too.
  COLL_CHECK_ARG(o.trainLimit >= 0, "--train-limit ", o.trainLimit, " must be >= 0 (0: all)");
  COLL_CHECK_ARG(o.testLimit >= 0, "--test-limit ", o.testLimit, " must be >= 0 (0: all)");
  parsePrecision(o.precision);  // throws on a bad name
  COLL_CHECK_ARG(o.mode == "dp" || o.mode == "pipeline" || o.mode == "ps", "--mode '", o.mode,
                 "', expected dp|pipeline|ps");
  COLL_CHECK_ARG(o.stages >= 1 && o.stages <= 64, "--stages ", o.stages, " must be in [1, 64]");
  COLL_CHECK_ARG(o.microBatches >= 1 && o.microBatches <= 1024, "--micro-batches ",
                 o.microBatches, " must be in [1, 1024]");
  COLL_CHECK_ARG(o.servers >= 1 && o.servers <= 1024, "--servers ", o.servers,
                 " must be in [1, 1024]");
  COLL_CHECK_ARG(std::isfinite(o.psTimeout) && o.psTimeout > 0, "--ps-timeout ", o.psTimeout,
                 " must be a positive number of seconds");
  COLL_CHECK_ARG(o.maxStaleness >= 0, "--max-staleness ", o.maxStaleness, " must be >= 0");
  COLL_CHECK_ARG(o.mode == "dp" || (o.compression.kind == hvd::Compressor::None &&
                                     o.savePath.empty() && o.loadPath.empty() && !o.profile),
                 "--mode ", o.mode, ": --compression, --save, --load and --profile are "
                 "implemented for --mode dp only");
  COLL_CHECK_ARG(o.mode == "dp" || o.precision == "fp32",
                 "--precision ", o.precision, " is implemented for --mode dp only");
  COLL_CHECK_ARG(o.precision == "fp32" || o.compression.kind == hvd::Compressor::None,
                 "--precision ", o.precision, " already reduces gradients in 16 bits; it does not "
                 "combine with --compression");
  COLL_CHECK_ARG(o.commitEvery >= 1, "--commit-every ", o.commitEvery, " must be >= 1");
  COLL_CHECK_ARG(o.elastic || !o.elasticGrow, "--elastic-grow needs --elastic");
  COLL_CHECK_ARG(!o.elastic || o.mode == "dp", "--elastic is implemented for --mode dp only");
  // MixedPrecision's loss scale is not part of the committed state.
  COLL_CHECK_ARG(!o.elastic || o.precision == "fp32", "--elastic is implemented for "
                 "--precision fp32 only");
  COLL_CHECK_ARG(o.maxSteps >= 0, "--max-steps ", o.maxSteps, " must be >= 0 (0: all)");
  COLL_CHECK_ARG(o.globalBatch > 0, "--batch-size ", o.globalBatch, " must be positive");
  COLL_CHECK_ARG(o.compression.density > 0 && o.compression.density <= 1, "--topk-density ",
                 o.compression.density, " must be in (0, 1]");
  COLL_CHECK_ARG(o.lrSchedule == "constant" || o.lrSchedule == "cosine", "--lr-schedule '",
                 o.lrSchedule, "', expected constant|cosine");
  COLL_CHECK_ARG(o.momentumCorrection == "auto" || o.momentumCorrection == "on" ||
                     o.momentumCorrection == "off",
                 "--momentum-correction '", o.momentumCorrection, "', expected auto|on|off");
  COLL_CHECK_ARG(o.gradSync == "auto" || o.gradSync == "overlap" || o.gradSync == "step",
                 "--grad-sync '", o.gradSync, "', expected overlap|step|auto");
  COLL_CHECK_ARG(o.gradSync != "step" || o.compression.kind == hvd::Compressor::None,
                 "--grad-sync step reduces uncompressed gradients; --compression ",
                 o.compressionName(), " needs --grad-sync overlap (or auto)");
  // After the cast to float: 1e40 is inf there. NaN fails every comparison.
  for (const auto& [flag, v] : {std::pair<const char*, float>{"--lr", o.lr},
                                {"--momentum", o.momentum},
                                {"--weight-decay", o.weightDecay}})
    COLL_CHECK_ARG(std::isfinite(v) && v >= 0, flag, " ", v, " must be finite and >= 0");
  COLL_CHECK_ARG(o.blasThreads > 0, "--blas-threads ", o.blasThreads, " must be positive");
  return o;
}

float TrainOptions::lrAt(int64_t step, int64_t totalSteps) const {
  if (lrSchedule != "cosine" || totalSteps <= 0) return lr;
  const double t = std::min(1.0, static_cast<double>(step) / static_cast<double>(totalSteps));
  return static_cast<float>(lr * 0.5 * (1.0 + std::cos(M_PI * t)));
}

bool TrainOptions::gradSyncAtStep(int localRanks, int cpus) const {
  if (gradSync != "auto") return gradSync == "step";
  return compression.kind == hvd::Compressor::None && localRanks > 1 && localRanks * blasThreads >= cpus;
}

bool TrainOptions::useMomentumCorrection() const {
  if (momentumCorrection == "auto") return compression.kind == hvd::Compressor::TopK;
  return momentumCorrection == "on";
}

std::string TrainOptions::compressionName() const {
  switch (compression.kind) {
    case hvd::Compressor::None:
      return "none";
    case hvd::Compressor::FP16:
      return "fp16";
    case hvd::Compressor::BF16:
      return "bf16";
    case hvd::Compressor::Int8:
      return "int8";
    case hvd::Compressor::TopK:
      return "topk";
  }
  return "?";
}

}  // namespace collective::frontend
