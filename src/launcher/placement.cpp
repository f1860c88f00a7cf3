#include "launcher/placement.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>

namespace coll::launcher {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string shortName(const std::string& s) { return s.substr(0, s.find('.')); }

}  // namespace

bool isLoopbackName(const std::string& host) {
  std::string h = lower(host);
  if (h == "localhost" || h == "localhost.localdomain" || h == "ip6-localhost" ||
      h == "ip6-loopback" || h == "::1")
    return true;
  in_addr a{};
  return inet_pton(AF_INET, h.c_str(), &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

namespace {

// Canonical numeric form: "::0001" and "::1" name the same interface address.
std::string numericForm(const std::string& h) {
  in6_addr a6{};
  in_addr a4{};
  char buf[INET6_ADDRSTRLEN] = {};
  if (inet_pton(AF_INET, h.c_str(), &a4) == 1) return inet_ntop(AF_INET, &a4, buf, sizeof buf);
  if (inet_pton(AF_INET6, h.c_str(), &a6) == 1)
    return inet_ntop(AF_INET6, &a6, buf, sizeof buf);
  return "";
}

}  // namespace

LocalIdentity LocalIdentity::probe() {
  LocalIdentity id;
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) == 0) id.hostname = name;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return id;
  std::unique_ptr<ifaddrs, void (*)(ifaddrs*)> guard(list, freeifaddrs);
  for (ifaddrs* it = list; it; it = it->ifa_next) {
    if (!it->ifa_addr) continue;
    char buf[INET6_ADDRSTRLEN] = {};
    const void* src = nullptr;
    if (it->ifa_addr->sa_family == AF_INET)
      src = &reinterpret_cast<sockaddr_in*>(it->ifa_addr)->sin_addr;
    else if (it->ifa_addr->sa_family == AF_INET6)
      src = &reinterpret_cast<sockaddr_in6*>(it->ifa_addr)->sin6_addr;
    if (src && inet_ntop(it->ifa_addr->sa_family, src, buf, sizeof buf))
      id.addresses.emplace_back(buf);
  }
  return id;
}

bool LocalIdentity::isLocal(const std::string& host) const {
  std::string h = lower(host);
  if (isLoopbackName(h)) return true;
  std::string mine = lower(hostname);
  if (!mine.empty()) {
    if (h == mine) return true;
    // "node1" vs "node1.cluster": the same machine when one side is the short form.
    bool eitherShort = h.find('.') == std::string::npos || mine.find('.') == std::string::npos;
    if (eitherShort && numericForm(h).empty() && shortName(h) == shortName(mine)) return true;
  }
  std::string num = numericForm(h);
  return !num.empty() && std::find(addresses.begin(), addresses.end(), num) != addresses.end();
}

std::vector<RankPlace> placeRanks(int np, const std::vector<HostSlots>& hosts,
                                  const std::function<bool(const std::string&)>& isLocal) {
  std::vector<RankPlace> places(static_cast<size_t>(np));
  // Machine key: "" for this machine, else the lower-cased name as written.
  std::vector<std::string> keys(places.size());
  size_t hostIdx = 0;
  int usedOnHost = 0;
  for (int r = 0; r < np; ++r) {
    RankPlace& p = places[static_cast<size_t>(r)];
    p.rank = r;
    if (!hosts.empty()) {
      while (hostIdx < hosts.size() && usedOnHost >= hosts[hostIdx].slots) {
        ++hostIdx;
        usedOnHost = 0;
      }
      if (hostIdx == hosts.size()) return {};  // not enough slots: the caller validated
      p.host = hosts[hostIdx].name;
      p.local = isLocal(p.host);
      ++usedOnHost;
    }
    keys[static_cast<size_t>(r)] = p.local ? "" : lower(p.host);
  }
  std::map<std::string, int> count;
  for (size_t r = 0; r < places.size(); ++r) places[r].localRank = count[keys[r]]++;
  for (size_t r = 0; r < places.size(); ++r) places[r].localSize = count[keys[r]];
  return places;
}

}  // namespace coll::launcher
