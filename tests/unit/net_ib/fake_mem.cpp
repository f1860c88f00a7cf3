// The fake fabric's memory: MRs with keys, ranges and rights, pinning against a page
// table of its own (so a registration can go stale as on a real kernel), on-demand
// paging, the pin limit, and the page-frame query the registration cache makes.
#include <cerrno>
#include <cstring>

#include "fake_state.hpp"

namespace coll::net::ib::fake {
namespace {

constexpr uint8_t kStaleByte = 0xDB;

uintptr_t pageOf(uintptr_t a) { return a & ~(kFakePage - 1); }

ibv_mr* regMr(ibv_pd* pd, void* addr, size_t len, int access) {
  FabricState* s = current();
  std::lock_guard<std::mutex> lock(s->mu);
  auto pit = s->pds.find(pd);
  if (pit == s->pds.end()) {
    s->misuse.push_back("reg_mr on an unknown PD");
    errno = EINVAL;
    return nullptr;
  }
  PdObj* o = pit->second.get();
  const bool odp = access & IBV_ACCESS_ON_DEMAND;
  // Remote write needs local write, as in the verbs spec; ODP only where the device has it.
  if (((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE)) ||
      (odp && !o->ctx->dev->spec.odp) || (!addr && len)) {
    errno = EINVAL;
    return nullptr;
  }
  if (!odp && s->pinLimit && s->pinned + len > s->pinLimit) {
    errno = ENOMEM;
    return nullptr;
  }
  auto m = std::make_unique<MrObj>();
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = len;
  m->mr.lkey = s->nextKey++;
  m->mr.rkey = s->nextKey++;
  m->pd = o;
  m->access = access;
  if (!odp && len) {
    const auto a = reinterpret_cast<uintptr_t>(addr);
    for (uintptr_t pg = pageOf(a); pg < a + len; pg += kFakePage) m->pages.push_back(s->generation(pg));
    s->pinned += len;
  }
  s->regs++;
  ibv_mr* p = &m->mr;
  s->mrs[p] = std::move(m);
  return p;
}

int deregMr(ibv_mr* mr) {
  FabricState* s = current();
  std::lock_guard<std::mutex> lock(s->mu);
  auto it = s->mrs.find(mr);
  if (it == s->mrs.end()) {
    s->misuse.push_back("dereg_mr of an unknown MR");
    return EINVAL;
  }
  if (!(it->second->access & IBV_ACCESS_ON_DEMAND)) s->pinned -= mr->length;
  s->mrs.erase(it);
  return 0;
}

int pageFrames(int, uintptr_t addr, size_t pages, uint64_t* frames) {
  FabricState* s = current();
  std::lock_guard<std::mutex> lock(s->mu);
  if (!s->framesReadable) return EPERM;
  for (size_t i = 0; i < pages; ++i) {
    const uintptr_t pg = pageOf(addr) + i * kFakePage;
    // A frame number that changes with the page's generation, never 0 (present).
    frames[i] = (1ull << 63) | ((pg >> 12) << 20) | (s->generation(pg) & 0xfffff);
  }
  return 0;
}

int queryDeviceEx(ibv_context* c, ibv_device_attr_ex* a) {
  FabricState* s = current();
  if (s->ops.query_device(c, &a->orig_attr) != 0) return EINVAL;
  std::lock_guard<std::mutex> lock(s->mu);
  auto it = s->ctxs.find(c);
  if (it == s->ctxs.end()) return EINVAL;
  memset(&a->odp_caps, 0, sizeof(a->odp_caps));
  if (it->second->dev->spec.odp) {
    a->odp_caps.general_caps = IBV_ODP_SUPPORT;
    a->odp_caps.per_transport_caps.rc_odp_caps =
        IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ;
  }
  return 0;
}

}  // namespace

uint64_t FabricState::generation(uintptr_t page) const {
  auto it = pageGen.find(page);
  return it == pageGen.end() ? 0 : it->second;
}

MrObj* FabricState::findRemoteMr(uint32_t rkey, const PdObj* pd) {
  for (auto& [k, m] : mrs)
    if (m->mr.rkey == rkey && m->pd == pd) return m.get();
  return nullptr;
}

// Page by page: a page still the one pinned (or any page, on demand) is the program's.
void FabricState::readThrough(const MrObj* m, uintptr_t addr, size_t len, std::vector<uint8_t>* out) const {
  const uintptr_t first = pageOf(reinterpret_cast<uintptr_t>(m->mr.addr));
  for (size_t done = 0; done < len;) {
    const uintptr_t a = addr + done, pg = pageOf(a);
    const size_t n = std::min<size_t>(len - done, pg + kFakePage - a);
    const bool stale = !m->pages.empty() && m->pages[(pg - first) / kFakePage] != generation(pg);
    if (stale) out->insert(out->end(), n, kStaleByte);
    else out->insert(out->end(), reinterpret_cast<const uint8_t*>(a), reinterpret_cast<const uint8_t*>(a) + n);
    done += n;
  }
}

void FabricState::writeThrough(const MrObj* m, uintptr_t addr, const uint8_t* src, size_t len) {
  const uintptr_t first = pageOf(reinterpret_cast<uintptr_t>(m->mr.addr));
  for (size_t done = 0; done < len;) {
    const uintptr_t a = addr + done, pg = pageOf(a);
    const size_t n = std::min<size_t>(len - done, pg + kFakePage - a);
    const bool stale = !m->pages.empty() && m->pages[(pg - first) / kFakePage] != generation(pg);
    if (!stale) memcpy(reinterpret_cast<void*>(a), src + done, n);  // else: into pages nobody maps
    done += n;
  }
}

void fillMemOps(VerbsOps* v) {
  v->reg_mr = regMr;
  v->dereg_mr = deregMr;
  v->page_frames = pageFrames;
  v->query_device_ex = queryDeviceEx;
}

void FakeFabric::setShuffle(uint64_t seed) {
  std::lock_guard<std::mutex> lock(st_->mu);
  st_->shuffle.emplace(seed);
}

void FakeFabric::replacePages(const void* addr, size_t len) {
  std::lock_guard<std::mutex> lock(st_->mu);
  const auto a = reinterpret_cast<uintptr_t>(addr);
  for (uintptr_t pg = pageOf(a); pg < a + len; pg += kFakePage) st_->pageGen[pg]++;
}

void FakeFabric::setFramesReadable(bool readable) {
  std::lock_guard<std::mutex> lock(st_->mu);
  st_->framesReadable = readable;
}

void FakeFabric::setPinLimit(size_t bytes) {
  std::lock_guard<std::mutex> lock(st_->mu);
  st_->pinLimit = bytes;
}

void FakeFabric::shiftNextWrite(int64_t delta) {
  std::lock_guard<std::mutex> lock(st_->mu);
  st_->shiftNext = delta;
}

FakeFabric::Traffic FakeFabric::traffic() const {
  std::lock_guard<std::mutex> lock(st_->mu);
  return st_->traffic;
}

size_t FakeFabric::pinned() const {
  std::lock_guard<std::mutex> lock(st_->mu);
  return st_->pinned;
}

int FakeFabric::registrations() const {
  std::lock_guard<std::mutex> lock(st_->mu);
  return st_->regs;
}

}  // namespace coll::net::ib::fake
