#include <string>

#include "base/config.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "transport/net/net_backend.hpp"
#include "transport/transport.hpp"

namespace coll {

COLL_PARAM(kTransport, "COLL_TRANSPORT", "auto", "auto (shm within a host; across hosts a network backend (COLL_NET) where every rank of a pair has the same one, else tcp), or force tcp|shm|net");

const std::string& transportMode(const Config& cfg) { return cfg.getStr(kTransport); }

std::unique_ptr<Transport> makeTcpTransport();
std::unique_ptr<Transport> makeShmTransport();
std::unique_ptr<Transport> makeNetTransport();

std::unique_ptr<Transport> makeTransport(const std::string& name) {
  if (name == "tcp") return makeTcpTransport();
  if (name == "shm") return makeShmTransport();
  if (name == "net") return makeNetTransport();
  return nullptr;
}

bool needsNetOffers(const std::string& mode, const std::vector<std::string>& hostIds) {
  if (mode == "net") return true;
  if (mode != "auto") return false;
  for (const auto& h : hostIds)
    if (h != hostIds.front()) return true;
  return false;
}

TransportChoice planTransports(const TransportContext& ctx, const std::string& mode,
                               const std::vector<std::string>& hostnames) {
  std::vector<std::string> netBackends, netWhy;
  if (needsNetOffers(mode, ctx.hostIds)) {
    for (const net::Offer& o : net::exchangeOffers(ctx.bootstrap, *ctx.cfg)) {
      netBackends.push_back(o.backend);
      netWhy.push_back(o.why);
    }
    if (mode == "auto" && ctx.rank == 0 && netBackends[0].empty())
      COLL_INFO("net: not used across hosts (%s); using tcp", netWhy[0].c_str());
  }
  return chooseTransports(mode, ctx.rank, ctx.hostIds, hostnames, netBackends, netWhy);
}

TransportChoice chooseTransports(const std::string& mode, int rank, const std::vector<std::string>& hostIds,
                                 const std::vector<std::string>& hostnames,
                                 const std::vector<std::string>& netBackends,
                                 const std::vector<std::string>& netWhy) {
  COLL_CHECK_ARG(mode == "auto" || mode == "tcp" || mode == "shm" || mode == "net",
                 "COLL_TRANSPORT must be auto, tcp, shm or net (got '", mode, "')");
  const int n = static_cast<int>(hostIds.size());
  const bool offered = netBackends.size() == hostIds.size();
  COLL_CHECK_ARG(offered || !needsNetOffers(mode, hostIds), "transport choice without the ranks' net offers");
  // Where net is forced, every rank must have the same backend; otherwise a pair uses net
  // across hosts when both ends have the same one.
  if (mode == "net") {
    for (int r = 0; r < n; ++r) {
      if (netBackends[r].empty())
        COLL_THROW(collInvalidUsage, "COLL_TRANSPORT=net but rank ", r, " (", hostnames[r],
                   ") has no network backend: ", netWhy[r]);
      if (netBackends[r] != netBackends[0])
        COLL_THROW(collInvalidUsage, "COLL_TRANSPORT=net but rank 0 uses network backend '", netBackends[0],
                   "' and rank ", r, " '", netBackends[r], "'");
    }
  }
  auto pairNet = [&](int a, int b) {
    return offered && !netBackends[a].empty() && netBackends[a] == netBackends[b];
  };
  TransportChoice c;
  c.perPeer.resize(n);
  c.netPaths.assign(static_cast<size_t>(n), NetPath::Kernel);
  if (mode != "tcp" && offered)
    for (int r = 0; r < n; ++r)
      if (!netBackends[r].empty()) c.netPaths[r] = netBackends[r] == "ib" ? NetPath::Bypass : NetPath::Unknown;
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      const bool sameHost = hostIds[a] == hostIds[b];
      std::string t;
      if (mode == "net") t = "net";
      else if (mode == "tcp") t = "tcp";
      else if (sameHost) t = "shm";
      else if (mode == "shm")
        COLL_THROW(collInvalidUsage, "COLL_TRANSPORT=shm but rank ", b, " is on another host (", hostnames[b],
                   ") than rank ", a, " (", hostnames[a], ")");
      else t = pairNet(a, b) ? "net" : "tcp";
      if (t == "net") c.anyNet = true;
      if (a == rank) c.perPeer[b] = t;
    }
  }
  return c;
}

}  // namespace coll
