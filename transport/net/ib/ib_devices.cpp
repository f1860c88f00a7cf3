// Device discovery for the InfiniBand backend: which ports are usable and why not.
#include "transport/net/ib/ib_devices.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "base/error.hpp"
#include "transport/net/ib/ib_mem.hpp"

namespace coll::net::ib {
namespace {

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

bool gidIsZero(const ibv_gid& g) {
  for (uint8_t b : g.raw)
    if (b) return false;
  return true;
}

// ::ffff:a.b.c.d: a RoCE v2 GID made from an IPv4 address.
bool gidIsIpv4Mapped(const ibv_gid& g) {
  for (int i = 0; i < 10; ++i)
    if (g.raw[i]) return false;
  return g.raw[10] == 0xff && g.raw[11] == 0xff;
}

// The device's PCI address and its full place in the PCI tree.
std::string pciPathOf(const std::string& dev, std::string* tree) {
  std::string link = "/sys/class/infiniband/" + dev + "/device";
  char buf[PATH_MAX];
  if (!realpath(link.c_str(), buf)) return "";
  *tree = buf;
  const char* slash = strrchr(buf, '/');
  return slash ? slash + 1 : buf;
}

// Path components two PCI tree paths share.
size_t commonDepth(const std::string& a, const std::string& b) {
  size_t depth = 0, i = 0;
  for (; i < a.size() && i < b.size() && a[i] == b[i]; ++i)
    if (a[i] == '/') ++depth;
  if (!a.empty() && a == b) ++depth;
  return depth;
}

// Reads one GID and, where the kernel can tell, whether it is RoCE v2.
bool readGid(const VerbsOps& ops, ibv_context* ctx, uint8_t port, int index, ibv_gid* gid,
             bool* v2) {
  ibv_gid_entry e{};
  if (ops.query_gid_ex && ops.query_gid_ex(ctx, port, uint32_t(index), &e, 0) == 0) {
    *gid = e.gid;
    *v2 = e.gid_type == IBV_GID_TYPE_ROCE_V2;
    return true;
  }
  *v2 = false;
  return ops.query_gid(ctx, port, index, gid) == 0;
}

}  // namespace

Device::Device() = default;

// Cached registrations go before the PD they belong to.
Device::~Device() {
  mem.reset();
  if (pd) ops->dealloc_pd(pd);
  if (ctx) ops->close_device(ctx);
}

bool HcaFilter::keeps(const std::string& dev, int port) const {
  if (entries.empty()) return true;
  bool listed = false;
  for (const auto& [name, p] : entries)
    if (name == dev && (p == 0 || p == port)) listed = true;
  return listed != exclude;
}

bool HcaFilter::names(const std::string& dev) const {
  for (const auto& e : entries)
    if (e.first == dev) return true;
  return false;
}

HcaFilter parseHcaFilter(const std::string& text) {
  HcaFilter f;
  std::string s = text;
  if (!s.empty() && s[0] == '^') {
    f.exclude = true;
    s.erase(0, 1);
  }
  size_t pos = 0;
  while (pos <= s.size() && !s.empty()) {
    size_t comma = s.find(',', pos);
    std::string item = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    COLL_CHECK_ARG(!item.empty(), "COLL_IB_HCA='", text, "' has an empty entry");
    int port = 0;
    size_t colon = item.find(':');
    if (colon != std::string::npos) {
      std::string p = item.substr(colon + 1);
      char* end = nullptr;
      long v = strtol(p.c_str(), &end, 10);
      COLL_CHECK_ARG(!p.empty() && *end == 0 && v >= 1 && v <= 255, "COLL_IB_HCA='", text,
                     "': '", item, "' has no valid port number after ':'");
      port = int(v);
      item.resize(colon);
      COLL_CHECK_ARG(!item.empty(), "COLL_IB_HCA='", text, "' has a port without a device");
    }
    f.entries.emplace_back(item, port);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return f;
}

int portSpeedMbps(uint8_t activeSpeed, uint8_t activeWidth) {
  int lane = 0;
  switch (activeSpeed) {
    case 1: lane = 2500; break;     // SDR
    case 2: lane = 5000; break;     // DDR
    case 4: lane = 10000; break;    // QDR
    case 8: lane = 10000; break;    // FDR10
    case 16: lane = 14000; break;   // FDR
    case 32: lane = 25000; break;   // EDR
    case 64: lane = 50000; break;   // HDR
    case 128: lane = 100000; break; // NDR
    default: return 0;
  }
  int lanes = 0;
  switch (activeWidth) {
    case 1: lanes = 1; break;
    case 2: lanes = 4; break;
    case 4: lanes = 8; break;
    case 8: lanes = 12; break;
    case 16: lanes = 2; break;
    default: return 0;
  }
  return lane * lanes;
}

const char* portStateName(int state) {
  switch (state) {
    case IBV_PORT_NOP: return "NOP";
    case IBV_PORT_DOWN: return "DOWN";
    case IBV_PORT_INIT: return "INIT";
    case IBV_PORT_ARMED: return "ARMED";
    case IBV_PORT_ACTIVE: return "ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "ACTIVE_DEFER";
    default: return "unknown state";
  }
}

int pickGid(const VerbsOps& ops, ibv_context* ctx, uint8_t port, int tableLen, int wanted,
            ibv_gid* gid, std::string* why) {
  bool v2 = false;
  if (wanted >= 0) {
    if (wanted >= tableLen) {
      *why = strCat("COLL_IB_GID_INDEX=", wanted, " is past the GID table (", tableLen, " entries)");
      return -1;
    }
    if (!readGid(ops, ctx, port, wanted, gid, &v2) || gidIsZero(*gid)) {
      *why = strCat("COLL_IB_GID_INDEX=", wanted, " names an empty GID");
      return -1;
    }
    return wanted;
  }
  int best = -1, bestScore = -1;
  for (int i = 0; i < tableLen && i < 1024; ++i) {
    ibv_gid g{};
    if (!readGid(ops, ctx, port, i, &g, &v2) || gidIsZero(g)) continue;
    int score = (v2 ? 2 : 0) + (gidIsIpv4Mapped(g) ? 1 : 0);
    if (score > bestScore) {
      best = i;
      bestScore = score;
      *gid = g;
    }
  }
  if (best < 0) *why = strCat("RoCE, but none of its ", tableLen, " GIDs is set (no IP address on the interface?)");
  return best;
}

std::vector<size_t> portsNear(const std::vector<Port>& ports, size_t first, size_t n) {
  std::vector<size_t> out;
  if (first >= ports.size() || n == 0) return out;
  const Port& f = ports[first];
  struct Cand {
    size_t index;
    bool otherDevice;
    size_t depth;
  };
  std::vector<Cand> cands;
  for (size_t i = 0; i < ports.size(); ++i)
    if (i != first && ports[i].linkLayer == f.linkLayer)
      cands.push_back({i, ports[i].dev != f.dev, commonDepth(ports[i].pciTree, f.pciTree)});
  std::stable_sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) {
    if (a.otherDevice != b.otherDevice) return !a.otherDevice;
    return a.depth > b.depth;
  });
  out.push_back(first);
  for (size_t i = 0; i < cands.size() && out.size() < n; ++i) out.push_back(cands[i].index);
  return out;
}

std::vector<Port> discoverPorts(const VerbsOps& ops, const DiscoverOptions& opt) {
  HcaFilter filter = parseHcaFilter(opt.hca);
  int n = 0;
  ibv_device** list = ops.get_device_list(&n);
  struct ListGuard {
    const VerbsOps& ops;
    ibv_device** list;
    ~ListGuard() {
      if (list) ops.free_device_list(list);
    }
  } guard{ops, list};
  if (!list || n <= 0)
    COLL_THROW(collSystemError, "InfiniBand: libibverbs lists no devices (no RDMA NIC, or its kernel driver is not loaded)");

  std::vector<Port> ports;
  std::vector<std::string> names, reasons;
  bool keptAny = false;
  for (int i = 0; i < n; ++i) {
    const char* nm = ops.get_device_name(list[i]);
    std::string name = nm ? nm : "?";
    names.push_back(name);
    if (!filter.empty() && !filter.exclude && !filter.names(name)) continue;
    auto dev = std::make_shared<Device>();
    dev->ops = &ops;
    dev->name = name;
    dev->ctx = ops.open_device(list[i]);
    if (!dev->ctx) {
      int err = errno;
      reasons.push_back(name + " (cannot open it: " + sysErrorText(err) + ")");
      keptAny = true;
      continue;
    }
    ibv_device_attr da{};
    if (ops.query_device(dev->ctx, &da) != 0) {
      reasons.push_back(name + " (ibv_query_device failed)");
      keptAny = true;
      continue;
    }
    std::vector<Port> mine;
    std::vector<std::string> notes;
    for (int p = 1; p <= da.phys_port_cnt; ++p) {
      if (!filter.keeps(name, p)) continue;
      keptAny = true;
      ibv_port_attr pa{};
      if (ops.query_port(dev->ctx, uint8_t(p), &pa) != 0) {
        notes.push_back(strCat("port ", p, ": ibv_query_port failed"));
        continue;
      }
      if (pa.state != IBV_PORT_ACTIVE) {
        notes.push_back(strCat("port ", p, ": ", portStateName(pa.state)));
        continue;
      }
      Port port;
      port.dev = dev;
      port.num = uint8_t(p);
      port.name = strCat(name, ":", p);
      port.mtu = pa.active_mtu;
      port.speedMbps = portSpeedMbps(pa.active_speed, pa.active_width);
      if (pa.link_layer == IBV_LINK_LAYER_ETHERNET) {
        std::string why;
        port.linkLayer = IBV_LINK_LAYER_ETHERNET;
        port.gidIndex = pickGid(ops, dev->ctx, uint8_t(p), pa.gid_tbl_len, opt.gidIndex, &port.gid, &why);
        if (port.gidIndex < 0) {
          notes.push_back(strCat("port ", p, ": ", why));
          continue;
        }
      } else if (pa.link_layer == IBV_LINK_LAYER_INFINIBAND || pa.link_layer == IBV_LINK_LAYER_UNSPECIFIED) {
        if (pa.lid == 0) {
          notes.push_back(strCat("port ", p, ": ACTIVE but without a LID (no subnet manager?)"));
          continue;
        }
        port.lid = pa.lid;
        ops.query_gid(dev->ctx, uint8_t(p), 0, &port.gid);  // for logs only
      } else {
        notes.push_back(strCat("port ", p, ": link layer ", int(pa.link_layer), " is not supported"));
        continue;
      }
      mine.push_back(std::move(port));
    }
    if (mine.empty()) {
      if (da.phys_port_cnt == 0) notes.push_back("no ports");
      if (!notes.empty()) reasons.push_back(name + " (" + join(notes, ", ") + ")");
      continue;
    }
    dev->pd = ops.alloc_pd(dev->ctx);
    if (!dev->pd) {
      int err = errno;
      reasons.push_back(name + " (ibv_alloc_pd failed: " + sysErrorText(err) + ")");
      continue;
    }
    std::string tree;
    std::string pci = pciPathOf(name, &tree);
    for (auto& p : mine) {
      p.pciPath = pci;
      p.pciTree = tree;
      ports.push_back(std::move(p));
    }
  }
  if (!ports.empty()) return ports;
  if (!keptAny)
    COLL_THROW(collInvalidArgument, "InfiniBand: COLL_IB_HCA=", opt.hca, " matches none of: ", join(names, ", "));
  COLL_THROW(collSystemError, "InfiniBand: no ACTIVE port on ", join(reasons, ", "));
}

}  // namespace coll::net::ib
