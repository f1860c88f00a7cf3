// The TCP transport: works between any two ranks that can reach each other over IP.
#include <climits>

#include "base/config.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "transport/tcp/tcp_connect.hpp"
#include "transport/tcp/tcp_lazy.hpp"
#include "transport/tcp/tcp_link.hpp"

namespace coll {

// Defaults measured on loopback with 2 ranks on 2 cores (tests/unit/tcp/test_tcp_perf,
// medians of interleaved runs): two streams moved ~15-25% more than one in bidirectional
// throughput, probably because a receiver copying out of one socket then less often
// holds the lock the peer's softirq needs to deliver; four streams gained nothing.
// Chunks of 128K..1M and autotuned vs 4M buffers were within the noise.
COLL_PARAM(kTcpStreams, "COLL_TCP_STREAMS", "2", "TCP sockets per peer; pieces of a message are striped over them");
COLL_PARAM(kTcpChunk, "COLL_TCP_CHUNK", "512K", "largest piece of a message on one TCP stream");
COLL_PARAM(kTcpBuffer, "COLL_TCP_BUFFER", "4M", "SO_SNDBUF/SO_RCVBUF of TCP links (the kernel caps it at net.core.[rw]mem_max); 0 keeps autotuning");
// Also declared by bootstrap/env_mpi.cpp, which a program using only this transport may
// not link; the registry keeps the first declaration it sees.

namespace {

constexpr int kMaxStreams = 64;
constexpr size_t kMinChunk = 4096;

class TcpTransport : public Transport {
 public:
  const char* name() const override { return "tcp"; }

  std::map<int, std::unique_ptr<Link>> connect(const TransportContext& ctx,
                                               const std::vector<int>& peers) override {
    std::map<int, tcp::PeerStreams> conns = tcp::connectStreams(ctx, peers, options(ctx));
    std::map<int, std::unique_ptr<Link>> links;
    for (auto& [peer, ps] : conns) {
      COLL_TRACE("tcp: rank %d -> rank %d: %zu streams, chunk %zu", ctx.rank, peer,
                 ps.socks.size(), ps.chunk);
      links[peer] = std::make_unique<tcp::TcpLink>(peer, std::move(ps.socks), ps.chunk);
    }
    return links;
  }

  std::unique_ptr<LinkFactory> prepare(const TransportContext& ctx, const std::vector<int>& peers) override {
    return std::make_unique<tcp::LazyFactory>(ctx, peers, options(ctx));
  }

 private:
  static tcp::StreamOptions options(const TransportContext& ctx) {
    Config fallback;
    if (!ctx.cfg) fallback = Config::fromEnv();
    const Config& cfg = ctx.cfg ? *ctx.cfg : fallback;
    tcp::StreamOptions opt;
    int64_t streams = cfg.getInt(kTcpStreams);
    COLL_CHECK_ARG(streams >= 1 && streams <= kMaxStreams, kTcpStreams, "=", streams,
                   " is not in [1, ", kMaxStreams, "]");
    opt.streams = static_cast<int>(streams);
    opt.chunk = cfg.getSize(kTcpChunk);
    COLL_CHECK_ARG(opt.chunk >= kMinChunk, kTcpChunk, "=", opt.chunk, " is below ", kMinChunk);
    size_t buffer = cfg.getSize(kTcpBuffer);
    COLL_CHECK_ARG(buffer <= INT_MAX / 2, kTcpBuffer, "=", buffer, " is too large");
    opt.bufferBytes = static_cast<int>(buffer);
    opt.ifname = cfg.getStr(kSocketIfnameEnv);
    return opt;
  }
};

}  // namespace

std::unique_ptr<Transport> makeTcpTransport() { return std::make_unique<TcpTransport>(); }

}  // namespace coll
