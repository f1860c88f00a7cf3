// The shared-memory transport: links between ranks on the same host.
#include <exception>

#include "base/config.hpp"
#include "base/error.hpp"
#include "transport/shm/shm_connect.hpp"

namespace coll {

// Defaults picked by measurement on a 2-core host (see tests/unit/shm/shm_bench.cpp).
COLL_PARAM(kShmRingBytes, "COLL_SHM_RING_BYTES", "1M", "bytes of each one-way ring of a shm link (power of two, 4K..1G); unless set, hosts of more than 8 ranks get smaller rings (8M over the rank's shm peers, at least 64K)");
COLL_PARAM(kShmCma, "COLL_SHM_CMA", "auto", "large shm messages: 1 single-copy (process_vm_readv, memcpy between threads), 0 staged through the ring, auto whichever the link measures faster (single-copy while the host's ranks outnumber its cores)");
COLL_PARAM(kShmCmaProbeMs, "COLL_SHM_CMA_PROBE_MS", "250", "COLL_SHM_CMA=auto: once per this many milliseconds a link sends a few large messages the way it is not using, to measure it again (0: all the time)");
COLL_PARAM(kShmCmaThreshold, "COLL_SHM_CMA_THRESHOLD", "64K", "shm messages of at least this many bytes go single-copy when allowed");
COLL_PARAM(kShmCmaChunk, "COLL_SHM_CMA_CHUNK", "512K", "bytes per single-copy step (one step per progress call), 4K..1G");
COLL_PARAM(kShmCoopMin, "COLL_SHM_COOP_MIN", "256K", "single-copy shm messages of at least this many bytes are copied by both sides at once (sender pushes, receiver pulls); 0 turns it off");
COLL_PARAM(kShmCoopPiece, "COLL_SHM_COOP_PIECE", "128K", "bytes per piece of a cooperative shm copy");
COLL_PARAM(kShmMappedPiece, "COLL_SHM_MAPPED_PIECE", "512K", "bytes per piece of a cooperative or push shm copy into collMemAlloc memory (no system call per piece: larger pieces cost less)");
COLL_PARAM(kShmStageChunk, "COLL_SHM_STAGE_CHUNK", "32K", "bytes copied through a shm ring between publications (pipelining grain)");

namespace {

// Every pair of a host's ranks has its own segment (two rings), made at init: with L ranks
// on a host, L(L-1)/2 segments. Past 8 ranks a host's rings shrink so that one rank maps
// about 16 MiB of them whatever L is (at least 64K each, where a ring still carries the
// small messages it exists for; large ones go single-copy). Both ends count the same
// host, so they agree on the size.
size_t scaledRing(const TransportContext& ctx, size_t ring) {
  int local = 0;
  for (const std::string& h : ctx.hostIds) local += h == ctx.hostIds.at(ctx.rank);
  if (local <= 8) return ring;
  size_t fit = (size_t{8} << 20) / static_cast<size_t>(local - 1);
  size_t p = size_t{64} << 10;
  while (p * 2 <= fit && p * 2 <= ring) p *= 2;
  return std::min(ring, p);
}

class ShmTransport : public Transport {
 public:
  const char* name() const override { return "shm"; }

  std::map<int, std::unique_ptr<Link>> connect(const TransportContext& ctx,
                                               const std::vector<int>& peers) override {
    // A bad setting still takes part in the connect all-gathers (with a failure), so the
    // other ranks fail at once instead of waiting in them.
    shm::ShmOptions opt;
    std::exception_ptr err;
    try {
      opt = readOptions(ctx);
    } catch (...) {
      err = std::current_exception();
    }
    return shm::Connector(ctx, peers, opt).run(err);
  }

 private:
  static shm::ShmOptions readOptions(const TransportContext& ctx) {
    Config fallback;
    if (!ctx.cfg) fallback = Config::fromEnv();
    const Config& cfg = ctx.cfg ? *ctx.cfg : fallback;
    shm::ShmOptions opt;
    opt.ringBytes = cfg.getSize(kShmRingBytes);
    if (!cfg.isSet(kShmRingBytes)) opt.ringBytes = scaledRing(ctx, opt.ringBytes);
    std::string why = shm::checkRingBytes(opt.ringBytes);
    COLL_CHECK_ARG(why.empty(), kShmRingBytes, ": ", why);
    const std::string& cma = cfg.getStr(kShmCma);
    COLL_CHECK_ARG(cma == "0" || cma == "1" || cma == "auto", kShmCma, "=", cma, " is not 0, 1 or auto");
    opt.singleCopy = cma != "0";
    opt.adaptiveCopy = cma == "auto";
    const int64_t probeMs = cfg.getInt(kShmCmaProbeMs);
    COLL_CHECK_ARG(probeMs >= 0 && probeMs <= 3'600'000, kShmCmaProbeMs, "=", probeMs, " is not in [0, 3600000]");
    opt.copyProbeNs = static_cast<uint64_t>(probeMs) * 1'000'000;
    opt.singleCopyMin = cfg.getSize(kShmCmaThreshold);
    opt.copyChunk = cfg.getSize(kShmCmaChunk);
    // Linux copies at most 2 GiB - 4 KiB per process_vm_readv/writev call: a larger step
    // came back short and failed the transfer.
    COLL_CHECK_ARG(opt.copyChunk >= 4096 && opt.copyChunk <= (size_t{1} << 30), kShmCmaChunk, "=",
                   opt.copyChunk, " is not in [4096, 1G]");
    opt.coopMin = cfg.getSize(kShmCoopMin);
    opt.coopPiece = cfg.getSize(kShmCoopPiece);
    COLL_CHECK_ARG(opt.coopPiece >= 4096 && opt.coopPiece <= (size_t{1} << 30), kShmCoopPiece, "=",
                   opt.coopPiece, " is not in [4096, 1G]");
    opt.mappedPiece = cfg.getSize(kShmMappedPiece);
    COLL_CHECK_ARG(opt.mappedPiece >= 4096 && opt.mappedPiece <= (size_t{1} << 30), kShmMappedPiece, "=",
                   opt.mappedPiece, " is not in [4096, 1G]");
    opt.stageChunk = cfg.getSize(kShmStageChunk);
    COLL_CHECK_ARG(opt.stageChunk >= shm::kLine && opt.stageChunk <= opt.ringBytes / 2,
                   kShmStageChunk, "=", opt.stageChunk, " is not in [", shm::kLine, ", ",
                   kShmRingBytes, "/2 = ", opt.ringBytes / 2, "]");
    return opt;
  }
};

}  // namespace

std::unique_ptr<Transport> makeShmTransport() { return std::make_unique<ShmTransport>(); }

}  // namespace coll
