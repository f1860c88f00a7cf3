// The `net` transport: links over a network backend (InfiniBand verbs built in, or a
// plugin named by COLL_NET_PLUGIN). Connections follow coll_net.h's two steps, with the
// handles and replies carried by the bootstrap:
//   1. every rank listens once per peer and all-gathers a row of handles (slot p: for p);
//   2. every rank connects to each peer with the handle that peer made for it and
//      all-gathers a row of replies; then accepts each peer's reply; then a barrier, so
//      no message leaves before its receiver is ready.
// A rank that fails a step says so in its row, so every rank fails the setup together
// with the reason instead of waiting for a row that never comes.
#include <algorithm>
#include <cstring>

#include "bootstrap/bootstrap.hpp"
#include "base/config.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "transport/net/net_backend.hpp"
#include "transport/net/net_link.hpp"

namespace coll {
namespace net {
namespace {

constexpr uint32_t kRowMagic = 0x4e455431u;  // "NET1"
constexpr size_t kWhyBytes = 200;

// One rank's row header; nranks blobs of COLL_NET_HANDLE_BYTES follow it.
struct RowHeader {
  uint32_t magic;
  uint32_t failed;  // this rank could not do its step; why says why
  char why[kWhyBytes];
};

class Endpoints {
 public:
  explicit Endpoints(const Backend* b, int n) : b_(b), listen_(n), send_(n), recv_(n) {}
  ~Endpoints() {
    for (void* l : listen_)
      if (l) b_->api->closeListen(l);
    for (void* s : send_)
      if (s) b_->api->closeSend(s);
    for (void* r : recv_)
      if (r) b_->api->closeRecv(r);
  }
  const Backend* b_;
  std::vector<void*> listen_, send_, recv_;
};

class Rows {
 public:
  explicit Rows(int n) : n_(n), mine_(rowBytes(), 0) {
    header()->magic = kRowMagic;
  }
  static size_t blobOffset(int p) { return sizeof(RowHeader) + static_cast<size_t>(p) * COLL_NET_HANDLE_BYTES; }
  size_t rowBytes() const { return blobOffset(n_); }
  uint8_t* blob(int p) { return mine_.data() + blobOffset(p); }
  void fail(const std::string& why) {
    header()->failed = 1;
    snprintf(header()->why, kWhyBytes, "%s", why.c_str());
  }
  // All-gathers the rows; throws (on every rank alike) when some rank failed its step.
  void exchange(Bootstrap* boot, const char* step) {
    all_ = boot->allGather(mine_.data(), mine_.size());
    for (int r = 0; r < n_; ++r) {
      RowHeader h;
      memcpy(&h, all_.data() + r * rowBytes(), sizeof(h));
      if (h.magic != kRowMagic)
        COLL_THROW(collInternalError, "net: rank ", r, " sent a malformed ", step, " row");
      if (h.failed) {
        h.why[kWhyBytes - 1] = '\0';
        COLL_THROW(collSystemError, "net: rank ", r, " could not ", step, ": ", h.why);
      }
    }
    std::fill(mine_.begin() + sizeof(RowHeader), mine_.end(), 0);
  }
  // What rank `from` put in its slot for rank `to`.
  const uint8_t* theirs(int from, int to) const { return all_.data() + from * rowBytes() + blobOffset(to); }

 private:
  RowHeader* header() { return reinterpret_cast<RowHeader*>(mine_.data()); }
  int n_;
  std::vector<uint8_t> mine_, all_;
};

// The verbs device a backend device name belongs to: "mlx5_0" for port "mlx5_0:1".
std::string deviceOf(const collNetProperties_t& d) {
  const std::string name = d.name;
  return name.substr(0, name.find(':'));
}

// This rank's index among the ranks of its host.
int localRankOf(const TransportContext& ctx) {
  int local = 0;
  for (int r = 0; r < ctx.rank; ++r)
    if (ctx.hostIds[r] == ctx.hostIds[ctx.rank]) ++local;
  return local;
}

// The device this rank uses: the topology's NIC for it where the backend has it, so that
// the traffic goes where the cost model and the choice of leaders assumed it would.
int deviceFor(const TransportContext& ctx, const Backend& b) {
  const int dev = pickDevice(b.devices, ctx.nic, localRankOf(ctx));
  if (!ctx.nic.empty() && deviceOf(b.devices[dev]) != ctx.nic)
    COLL_INFO("net: %s has no device for the NIC the topology chose (%s); rank %d uses %s", b.name.c_str(),
              ctx.nic.c_str(), ctx.rank, b.devices[dev].name);
  return dev;
}

class NetTransport : public Transport {
 public:
  const char* name() const override { return "net"; }

  std::map<int, std::unique_ptr<Link>> connect(const TransportContext& ctx,
                                               const std::vector<int>& peers) override {
    Config fallback;
    if (!ctx.cfg) fallback = Config::fromEnv();
    const Config& cfg = ctx.cfg ? *ctx.cfg : fallback;
    const int n = ctx.nranks;
    Rows rows(n);
    const Backend* b = nullptr;
    if (!peers.empty()) {
      std::string why;
      try {
        b = backendFor(cfg, &why);
        if (!b) rows.fail("no network backend: " + why);
      } catch (const Error& e) {
        rows.fail(e.what());
      }
    }
    Endpoints ep(b, n);
    const int dev = b ? deviceFor(ctx, *b) : 0;
    auto step = [&](const char* what, auto&& call) {
      for (int p : peers) {
        if (call(p) != 0) {
          rows.fail(strCat(what, " for rank ", p, " failed: ", b->lastError()));
          return;
        }
      }
    };
    if (b) step("listen", [&](int p) { return b->api->listen(b->context, dev, rows.blob(p), &ep.listen_[p]); });
    rows.exchange(ctx.bootstrap, "listen");
    if (b)
      step("connect", [&](int p) {
        return b->api->connect(b->context, dev, rows.theirs(p, ctx.rank), rows.blob(p), &ep.send_[p]);
      });
    rows.exchange(ctx.bootstrap, "connect");
    if (b) {
      for (int p : peers) {
        void* l = ep.listen_[p];
        ep.listen_[p] = nullptr;  // accept uses it up, whether it succeeds or not
        if (b->api->accept(l, rows.theirs(p, ctx.rank), &ep.recv_[p]) != 0) {
          rows.fail(strCat("accept for rank ", p, " failed: ", b->lastError()));
          break;
        }
      }
    }
    rows.exchange(ctx.bootstrap, "accept");  // also the barrier before messages flow

    std::map<int, std::unique_ptr<Link>> links;
    for (int p : peers) {
      const collNetProperties_t& props = b->devices[dev];
      COLL_TRACE("net: rank %d -> rank %d over %s device %s", ctx.rank, p, b->name.c_str(), props.name);
      links[p] = std::make_unique<NetLink>(p, b, props.maxRequests, ep.send_[p], ep.recv_[p]);
      ep.send_[p] = ep.recv_[p] = nullptr;
    }
    return links;
  }
};

}  // namespace

int pickDevice(const std::vector<collNetProperties_t>& devices, const std::string& nic, int localRank) {
  if (devices.empty()) return -1;
  std::vector<int> match;
  for (size_t i = 0; i < devices.size() && !nic.empty(); ++i)
    if (deviceOf(devices[i]) == nic) match.push_back(static_cast<int>(i));
  const int local = std::max(localRank, 0);
  if (match.empty()) return local % static_cast<int>(devices.size());
  return match[static_cast<size_t>(local) % match.size()];
}

}  // namespace net

std::unique_ptr<Transport> makeNetTransport() { return std::make_unique<net::NetTransport>(); }

}  // namespace coll
