// Where each rank runs. Ranks fill the -H hosts' slots in order; a host counts as this
// machine when its name is a loopback name, this machine's host name (long or short form)
// or one of its interface addresses. No DNS lookups: a launcher must not hang on a
// resolver, so an alias that only DNS knows is treated as remote.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "launcher/options.hpp"

namespace coll::launcher {

struct RankPlace {
  int rank = 0;
  std::string host;  // as written in -H ("" when no -H was given)
  bool local = true;
  int localRank = 0;
  int localSize = 0;
};

struct LocalIdentity {
  std::string hostname;                // gethostname()
  std::vector<std::string> addresses;  // numeric interface addresses
  static LocalIdentity probe();
  bool isLocal(const std::string& host) const;
};

// localhost, 127.x.y.z, ::1 and friends.
bool isLoopbackName(const std::string& host);

// Assigns ranks 0..np-1; hosts.empty() places every rank locally. Ranks on hosts that are
// the same machine (including every local alias) share one local numbering.
std::vector<RankPlace> placeRanks(int np, const std::vector<HostSlots>& hosts,
                                  const std::function<bool(const std::string&)>& isLocal);

}  // namespace coll::launcher
