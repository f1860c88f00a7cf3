// The fake verbs fabric: devices, ports, GIDs, PDs and CQs (MRs and pages: fake_mem.cpp;
// QPs: fake_qp.cpp).
#include <cerrno>
#include <cstring>

#include "fake_state.hpp"

namespace coll::net::ib::fake {
namespace {

FabricState* gFabric = nullptr;

template <typename M>
auto* lookup(M& m, const void* key) {
  auto it = m.find(key);
  return it == m.end() ? nullptr : it->second.get();
}

ibv_device** getDeviceList(int* num) {
  FabricState* s = current();
  std::lock_guard<std::mutex> lock(s->mu);
  auto** list = new ibv_device*[s->devs.size() + 1];
  for (size_t i = 0; i < s->devs.size(); ++i) list[i] = &s->devs[i]->dev;
  list[s->devs.size()] = nullptr;
  if (num) *num = int(s->devs.size());
  return list;
}

void freeDeviceList(ibv_device** list) { delete[] list; }

const char* getDeviceName(ibv_device* d) { return d ? d->name : nullptr; }

ibv_context* openDevice(ibv_device* d) {
  FabricState* s = current();
  std::lock_guard<std::mutex> lock(s->mu);
  for (auto& dev : s->devs) {
    if (&dev->dev != d) continue;
    if (dev->spec.openFails) {
      errno = EACCES;
      return nullptr;
    }
    auto c = std::make_unique<CtxObj>();
    c->ctx.device = d;
    c->dev = dev.get();
    ibv_context* p = &c->ctx;
    s->ctxs[p] = std::move(c);
    return p;
  }
  errno = ENODEV;
  return nullptr;
}

int closeDevice(ibv_context* c) {
  FabricState* s = current();
  std::lock_guard<std::mutex> lock(s->mu);
  if (!s->ctxs.count(c)) {
    s->misuse.push_back("close_device of an unknown context");
    return EINVAL;
  }
  for (auto& [k, pd] : s->pds)
    if (&pd->ctx->ctx == c) s->misuse.push_back("close_device with a PD still allocated");
  for (auto& [k, cq] : s->cqs)
    if (&cq->ctx->ctx == c) s->misuse.push_back("close_device with a CQ still alive");
  s->ctxs.erase(c);
  return 0;
}

CtxObj* ctxOf(FabricState* s, ibv_context* c) {
  CtxObj* o = lookup(s->ctxs, c);
  if (!o) s->misuse.push_back("a call on an unknown context");
  return o;
}

int queryDevice(ibv_context* c, ibv_device_attr* a) {
  FabricState* s = current();
  std::lock_guard<std::mutex> lock(s->mu);
  CtxObj* o = ctxOf(s, c);
  if (!o) return EINVAL;
  memset(a, 0, sizeof(*a));
  a->phys_port_cnt = uint8_t(o->dev->spec.ports.size());
  a->max_qp_wr = 16384;
  a->max_cqe = 65536;
  a->max_sge = 4;
  return 0;
}

const FakePort* portSpec(CtxObj* o, uint32_t port) {
  if (port < 1 || port > o->dev->spec.ports.size()) return nullptr;
  return &o->dev->spec.ports[port - 1];
}

int queryPort(ibv_context* c, uint8_t port, ibv_port_attr* a) {
  FabricState* s = current();
  std::lock_guard<std::mutex> lock(s->mu);
  CtxObj* o = ctxOf(s, c);
  const FakePort* p = o ? portSpec(o, port) : nullptr;
  if (!p) return EINVAL;
  memset(a, 0, sizeof(*a));
  a->state = p->state;
  a->max_mtu = p->mtu;
  a->active_mtu = p->mtu;
  a->gid_tbl_len = int(p->gids.size());
  a->lid = p->lid;
  a->link_layer = p->linkLayer;
  a->active_speed = p->speed;
  a->active_width = p->width;
  return 0;
}

int queryGid(ibv_context* c, uint8_t port, int index, ibv_gid* gid) {
  FabricState* s = current();
  std::lock_guard<std::mutex> lock(s->mu);
  CtxObj* o = ctxOf(s, c);
  const FakePort* p = o ? portSpec(o, port) : nullptr;
  if (!p || index < 0 || size_t(index) >= p->gids.size()) return -1;
  *gid = p->gids[size_t(index)].gid;
  return 0;
}

int queryGidEx(ibv_context* c, uint32_t port, uint32_t index, ibv_gid_entry* e, uint32_t flags) {
  FabricState* s = current();
  std::lock_guard<std::mutex> lock(s->mu);
  CtxObj* o = ctxOf(s, c);
  const FakePort* p = o ? portSpec(o, port) : nullptr;
  if (!p || flags) return EINVAL;
  if (!p->gidEx) return EOPNOTSUPP;
  if (index >= p->gids.size()) return EINVAL;
  const FakeGid& g = p->gids[index];
  bool zero = true;
  for (uint8_t b : g.gid.raw) zero = zero && b == 0;
  if (zero) return ENODATA;  // what the kernel says for an empty entry
  memset(e, 0, sizeof(*e));
  e->gid = g.gid;
  e->gid_index = index;
  e->port_num = port;
  e->gid_type = uint32_t(g.type);
  return 0;
}

ibv_pd* allocPd(ibv_context* c) {
  FabricState* s = current();
  std::lock_guard<std::mutex> lock(s->mu);
  CtxObj* o = ctxOf(s, c);
  if (!o) return nullptr;
  auto pd = std::make_unique<PdObj>();
  pd->pd.context = c;
  pd->ctx = o;
  ibv_pd* p = &pd->pd;
  s->pds[p] = std::move(pd);
  return p;
}

int deallocPd(ibv_pd* pd) {
  FabricState* s = current();
  std::lock_guard<std::mutex> lock(s->mu);
  PdObj* o = lookup(s->pds, pd);
  if (!o) {
    s->misuse.push_back("dealloc_pd of an unknown PD");
    return EINVAL;
  }
  for (auto& [k, m] : s->mrs)
    if (m->pd == o) {
      s->misuse.push_back("dealloc_pd with an MR still registered");
      return EBUSY;
    }
  for (auto& [k, q] : s->qps)
    if (q->pd == o) {
      s->misuse.push_back("dealloc_pd with a QP still alive");
      return EBUSY;
    }
  s->pds.erase(pd);
  return 0;
}

ibv_cq* createCq(ibv_context* c, int cqe, void* cqCtx, ibv_comp_channel*, int) {
  FabricState* s = current();
  std::lock_guard<std::mutex> lock(s->mu);
  CtxObj* o = ctxOf(s, c);
  if (!o || cqe < 1 || cqe > 65536) {
    errno = EINVAL;
    return nullptr;
  }
  auto q = std::make_unique<CqObj>();
  q->cq.context = c;
  q->cq.cq_context = cqCtx;
  q->cq.cqe = cqe;
  q->ctx = o;
  ibv_cq* p = &q->cq;
  s->cqs[p] = std::move(q);
  return p;
}

int destroyCq(ibv_cq* cq) {
  FabricState* s = current();
  std::lock_guard<std::mutex> lock(s->mu);
  CqObj* o = lookup(s->cqs, cq);
  if (!o) {
    s->misuse.push_back("destroy_cq of an unknown CQ");
    return EINVAL;
  }
  for (auto& [k, q] : s->qps)
    if (q->scq == o || q->rcq == o) {
      s->misuse.push_back("destroy_cq with a QP still using it");
      return EBUSY;
    }
  s->cqs.erase(cq);
  return 0;
}

}  // namespace

FabricState* current() { return gFabric; }

FakeDevice ibDevice(const std::string& name, int ports) {
  FakeDevice d;
  d.name = name;
  d.ports.resize(size_t(ports));
  return d;
}

FakeDevice roceDevice(const std::string& name, std::vector<FakeGid> gids) {
  FakeDevice d;
  d.name = name;
  d.ports.resize(1);
  d.ports[0].linkLayer = IBV_LINK_LAYER_ETHERNET;
  d.ports[0].mtu = IBV_MTU_1024;
  d.ports[0].gids = std::move(gids);
  return d;
}

FakeGid ipv4Gid(uint8_t a, uint8_t b, uint8_t c, uint8_t d, int type) {
  FakeGid g;
  g.type = type;
  g.gid.raw[10] = g.gid.raw[11] = 0xff;
  g.gid.raw[12] = a;
  g.gid.raw[13] = b;
  g.gid.raw[14] = c;
  g.gid.raw[15] = d;
  return g;
}

FakeGid linkLocalGid(uint64_t iid, int type) {
  FakeGid g;
  g.type = type;
  g.gid.raw[0] = 0xfe;
  g.gid.raw[1] = 0x80;
  for (int i = 0; i < 8; ++i) g.gid.raw[15 - i] = uint8_t(iid >> (8 * i));
  return g;
}

FakeFabric::FakeFabric(std::vector<FakeDevice> devices) : st_(std::make_unique<FabricState>()) {
  uint16_t lid = 1;
  for (auto& d : devices) {
    auto o = std::make_unique<DevObj>();
    snprintf(o->dev.name, sizeof(o->dev.name), "%s", d.name.c_str());
    for (auto& p : d.ports)
      if (p.linkLayer == IBV_LINK_LAYER_INFINIBAND && p.lid == 0 && p.state == IBV_PORT_ACTIVE) p.lid = lid++;
    o->spec = std::move(d);
    st_->devs.push_back(std::move(o));
  }
  VerbsOps& v = st_->ops;
  v.get_device_list = getDeviceList;
  v.free_device_list = freeDeviceList;
  v.get_device_name = getDeviceName;
  v.open_device = openDevice;
  v.close_device = closeDevice;
  v.query_device = queryDevice;
  v.query_port = queryPort;
  v.query_gid = queryGid;
  v.query_gid_ex = queryGidEx;
  v.alloc_pd = allocPd;
  v.dealloc_pd = deallocPd;
  v.create_cq = createCq;
  v.destroy_cq = destroyCq;
  fillQpOps(&v);
  fillMemOps(&v);
  gFabric = st_.get();
}

FakeFabric::~FakeFabric() {
  if (gFabric == st_.get()) gFabric = nullptr;
}

const VerbsOps* FakeFabric::ops() const { return &st_->ops; }

void FakeFabric::setDeferred(bool deferred) {
  std::lock_guard<std::mutex> lock(st_->mu);
  st_->deferred = deferred;
}

void FakeFabric::failNextSend(ibv_wc_status status) {
  std::lock_guard<std::mutex> lock(st_->mu);
  st_->failNext = status;
}

void FakeFabric::setPortState(const std::string& dev, int port, ibv_port_state state) {
  std::lock_guard<std::mutex> lock(st_->mu);
  for (auto& d : st_->devs)
    if (d->spec.name == dev && port >= 1 && size_t(port) <= d->spec.ports.size())
      d->spec.ports[size_t(port - 1)].state = state;
}

uint64_t FakeFabric::portBytes(const std::string& dev, int port) const {
  std::lock_guard<std::mutex> lock(st_->mu);
  auto it = st_->portBytes.find({dev, port});
  return it == st_->portBytes.end() ? 0 : it->second;
}

void FakeFabric::breakQp(uint32_t qpn) {
  std::lock_guard<std::mutex> lock(st_->mu);
  auto it = st_->byQpn.find(qpn);
  if (it != st_->byQpn.end()) st_->toError(it->second);
}

std::vector<uint32_t> FakeFabric::qpns() const {
  std::lock_guard<std::mutex> lock(st_->mu);
  return st_->qpnOrder;
}

FakeFabric::Counts FakeFabric::live() const {
  std::lock_guard<std::mutex> lock(st_->mu);
  return {int(st_->ctxs.size()), int(st_->pds.size()), int(st_->mrs.size()), int(st_->cqs.size()),
          int(st_->qps.size())};
}

std::vector<std::string> FakeFabric::misuse() const {
  std::lock_guard<std::mutex> lock(st_->mu);
  return st_->misuse;
}

int FakeFabric::errorCompletions() const {
  std::lock_guard<std::mutex> lock(st_->mu);
  return st_->errorWcs;
}

}  // namespace coll::net::ib::fake
