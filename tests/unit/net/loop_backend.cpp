// A network backend for tests (plugins/net/coll_net.h) that moves messages between
// endpoints of one process through memory: ranks as threads of one test talk through it
// as they would through a fabric. Built as a plugin (COLL_NET_PLUGIN) so the tests also
// cover loading. Like a fabric's eager protocol, sends of up to kEager bytes are copied
// and complete at once; larger ones complete when matched with their receive. Each
// endpoint takes few requests at a time, so the transport's queueing and retrying run.
// Tests steer it through the loop* functions below (found with dlsym). Ranks in other
// processes cannot reach each other through it: connecting to one is refused.
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "plugins/net/coll_net.h"

#define EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr uint32_t kMagic = 0x4c4f4f50u;  // "LOOP"
constexpr int kMaxRequests = 3;
constexpr size_t kEager = 4096;

struct Request {
  bool recv = false;
  void* data = nullptr;
  size_t size = 0;     // send: its size; receive: room
  uint64_t tag = 0;
  bool done = false;
  size_t got = 0;      // receive: the sender's size
  uint64_t gotTag = 0;
  std::vector<char> copy;  // eager sends: the bytes
  bool owned = false;      // eager sends: the channel frees it once matched
};

// One direction between two endpoints.
struct Channel {
  std::mutex mu;
  std::deque<Request*> sends, recvs;  // not yet matched, oldest first
  bool closed = false;
  ~Channel() {
    for (Request* r : sends)
      if (r->owned) delete r;
  }
};

struct Endpoint;
struct Ticket {  // what the library holds as a request
  Endpoint* ep;
  Request* r;       // null for an eager send (done)
  size_t size = 0;  // an eager send's size
};

struct Endpoint {
  std::shared_ptr<Channel> ch;
  bool recv = false;
  uint64_t listenId = 0;  // listen endpoints until accepted
  std::deque<Ticket*> live;  // posted, not yet reported done
};

struct Handle {
  uint32_t magic;
  uint32_t pid;  // the process whose memory the endpoint lives in
  uint64_t id;
};

// Channels of listen endpoints, by id, until they are accepted or closed.
std::mutex registryMu;
std::map<uint64_t, std::shared_ptr<Channel>> registry;
uint64_t nextId = 1;

thread_local std::string lastErr = "no error";
std::atomic<uint64_t> messages{0};
std::atomic<int64_t> failAfter{-1};  // test() calls until one fails; -1: never

int fail(const std::string& why) {
  lastErr = "loop: " + why;
  return 1;
}

// Pairs the oldest unmatched send and receive of the channel.
void match(Channel& c) {
  std::lock_guard<std::mutex> lock(c.mu);
  while (!c.sends.empty() && !c.recvs.empty()) {
    Request* s = c.sends.front();
    Request* r = c.recvs.front();
    c.sends.pop_front();
    c.recvs.pop_front();
    size_t n = s->size < r->size ? s->size : r->size;
    if (n) memcpy(r->data, s->data, n);
    r->got = s->size;
    r->gotTag = s->tag;
    r->done = true;
    if (s->owned) delete s;  // eager: its sender was told long ago
    else s->done = true;
    messages.fetch_add(1);
  }
}

int init(const collNetInit_t* in, void** ctx) {
  if (!in || !ctx) return fail("init: NULL argument");
  *ctx = nullptr;
  return 0;
}
int devices(void*, int* n) {
  if (!n) return fail("devices: NULL argument");
  *n = 1;
  return 0;
}
int getProperties(void*, int dev, collNetProperties_t* p) {
  if (!p || dev != 0) return fail("getProperties: bad device or NULL");
  memset(p, 0, sizeof(*p));
  snprintf(p->name, sizeof(p->name), "loop0");
  p->maxRequests = kMaxRequests;
  return 0;
}
int listen(void*, int dev, void* handle, void** listenComm) {
  if (!handle || !listenComm || dev != 0) return fail("listen: bad device or NULL");
  auto* ep = new Endpoint;
  ep->ch = std::make_shared<Channel>();
  ep->recv = true;
  {
    std::lock_guard<std::mutex> lock(registryMu);
    ep->listenId = nextId++;
    registry[ep->listenId] = ep->ch;
  }
  Handle h{kMagic, static_cast<uint32_t>(getpid()), ep->listenId};
  memcpy(handle, &h, sizeof(h));
  *listenComm = ep;
  return 0;
}
int connect(void*, int dev, const void* handle, void* reply, void** sendComm) {
  if (!handle || !reply || !sendComm || dev != 0) return fail("connect: bad device or NULL");
  Handle h;
  memcpy(&h, handle, sizeof(h));
  if (h.magic != kMagic) return fail("connect: not a loop handle");
  // Endpoint ids are only unique within a process: a handle from another one would pick
  // an unrelated endpoint here and mix messages up.
  if (h.pid != static_cast<uint32_t>(getpid()))
    return fail("connect: the handle is from another process (process " + std::to_string(h.pid) +
                "); the loop backend only joins ranks that are threads of one process");
  auto* ep = new Endpoint;
  {
    std::lock_guard<std::mutex> lock(registryMu);
    auto it = registry.find(h.id);
    if (it == registry.end()) {
      delete ep;
      return fail("connect: no such listen endpoint");
    }
    ep->ch = it->second;
  }
  memcpy(reply, &h, sizeof(h));
  *sendComm = ep;
  return 0;
}
int accept(void* listenComm, const void* reply, void** recvComm) {
  if (!listenComm || !reply || !recvComm) return fail("accept: NULL argument");
  Handle h;
  memcpy(&h, reply, sizeof(h));
  auto* ep = static_cast<Endpoint*>(listenComm);
  {
    std::lock_guard<std::mutex> lock(registryMu);
    registry.erase(ep->listenId);
  }
  if (h.magic != kMagic || h.id != ep->listenId) {
    delete ep;
    return fail("accept: reply does not belong to this listen endpoint");
  }
  ep->listenId = 0;
  *recvComm = ep;
  return 0;
}
int post(void* comm, bool recv, void* data, size_t size, uint64_t tag, void** request) {
  if (!comm || !request || (size && !data)) return fail("post: NULL argument");
  auto* ep = static_cast<Endpoint*>(comm);
  *request = nullptr;
  if (static_cast<int>(ep->live.size()) >= kMaxRequests) return 0;
  auto* r = new Request;
  r->recv = recv;
  r->data = data;
  r->size = size;
  r->tag = tag;
  const bool eager = !recv && size <= kEager;
  if (eager) {
    r->copy.assign(static_cast<char*>(data), static_cast<char*>(data) + size);
    r->data = r->copy.data();
  }
  {
    std::lock_guard<std::mutex> lock(ep->ch->mu);
    // As on a fabric, what the peer sent before it closed can still be received: eager
    // messages stay queued. Anything else can never complete.
    if (ep->ch->closed && !(recv && ep->ch->sends.size() > ep->ch->recvs.size())) {
      delete r;
      return fail("post: the peer closed the connection");
    }
    (recv ? ep->ch->recvs : ep->ch->sends).push_back(r);
    if (eager) r->owned = true;
  }
  if (eager) {
    *request = new Ticket{ep, nullptr, size};  // done: test() says so at once
    ep->live.push_back(static_cast<Ticket*>(*request));
    return 0;
  }
  auto* t = new Ticket{ep, r, 0};
  ep->live.push_back(t);
  *request = t;
  return 0;
}
int isend(void* comm, const void* data, size_t size, uint64_t tag, void** request) {
  return post(comm, false, const_cast<void*>(data), size, tag, request);
}
int irecv(void* comm, void* data, size_t size, void** request) { return post(comm, true, data, size, 0, request); }
int test(void* request, int* done, size_t* size, uint64_t* tag) {
  if (!request || !done) return fail("test: NULL argument");
  if (failAfter.load() >= 0 && failAfter.fetch_sub(1) == 0) return fail("injected failure on loop0");
  auto* t = static_cast<Ticket*>(request);
  Endpoint* ep = t->ep;
  match(*ep->ch);
  Request* r = t->r;
  if (r) {
    std::lock_guard<std::mutex> lock(ep->ch->mu);
    *done = r->done;
    if (!r->done && ep->ch->closed) return fail("the peer closed the connection");
  } else {
    *done = 1;  // an eager send
  }
  if (!*done) return 0;
  if (size) *size = !r ? t->size : r->recv ? r->got : r->size;
  if (tag && r && r->recv) *tag = r->gotTag;
  for (auto it = ep->live.begin(); it != ep->live.end(); ++it)
    if (*it == t) {
      ep->live.erase(it);
      break;
    }
  delete r;
  delete t;
  return 0;
}
// Requests still posted are dropped: unmatched ones leave the channel first.
int closeEp(void* comm) {
  if (!comm) return fail("close: NULL argument");
  auto* ep = static_cast<Endpoint*>(comm);
  if (ep->listenId) {
    std::lock_guard<std::mutex> lock(registryMu);
    registry.erase(ep->listenId);
  }
  {
    std::lock_guard<std::mutex> lock(ep->ch->mu);
    ep->ch->closed = true;
    for (Ticket* t : ep->live) {
      if (!t->r) {  // an eager send: its message stays with the channel
        delete t;
        continue;
      }
      auto& q = t->r->recv ? ep->ch->recvs : ep->ch->sends;
      for (auto it = q.begin(); it != q.end(); ++it)
        if (*it == t->r) {
          q.erase(it);
          break;
        }
      delete t->r;
      delete t;
    }
  }
  delete ep;
  return 0;
}
const char* lastError(void*) { return lastErr.c_str(); }
void finalize(void*) {}

}  // namespace

#ifndef LOOP_VERSION
#define LOOP_VERSION COLL_NET_PLUGIN_VERSION
#endif

EXPORT const collNetPlugin_v1_t collNetPlugin_v1 = {
    LOOP_VERSION, "loop", init, devices, getProperties, listen, connect, accept, isend, irecv, test,
    closeEp, closeEp, closeEp, lastError, finalize};

EXPORT uint64_t loopMessages() { return messages.load(); }
EXPORT void loopFailAfter(int64_t n) { failAfter.store(n); }
