#include "transport/net/net_backend.hpp"

#include <dlfcn.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "bootstrap/bootstrap.hpp"
#include "base/config.hpp"
#include "base/error.hpp"
#include "base/log.hpp"

namespace coll::net {

COLL_PARAM(kNet, "COLL_NET", "auto",
           "network backend for ranks on other hosts: auto (COLL_NET_PLUGIN if given, else "
           "InfiniBand verbs when a device is found, else tcp), ib, none (tcp)");
COLL_PARAM(kNetPlugin, "COLL_NET_PLUGIN", "",
           "network plugin (plugins/net/coll_net.h) to load: a path, or a name dlopen finds");

namespace {

struct Entry {
  std::unique_ptr<Backend> backend;  // null: none, for `why`
  std::string why;
};

std::mutex mu;
std::map<std::string, Entry>& cache() {
  static auto* c = new std::map<std::string, Entry>;  // never destroyed: see the header
  return *c;
}
const collNetPlugin_v1_t* testApi = nullptr;

void logFromBackend(collNetLogLevel_t level, const char* message) {
  if (!message) return;
  if (level == collNetLogWarn) COLL_WARN("net: %s", message);
  else if (level == collNetLogInfo) COLL_INFO("net: %s", message);
  else COLL_TRACE("net: %s", message);
}

bool complete(const collNetPlugin_v1_t& a) {
  return a.init && a.devices && a.getProperties && a.listen && a.connect && a.accept && a.isend &&
         a.irecv && a.test && a.closeSend && a.closeRecv && a.closeListen && a.lastError && a.finalize;
}

std::string errorOf(const collNetPlugin_v1_t& a, void* ctx) {
  const char* e = a.lastError(ctx);
  return e && *e ? e : "no reason given";
}

// Initialises `api` and lists its devices; an Entry with why set when it cannot work.
// label: what the reasons start with ("InfiniBand", the plugin's path), unless the
// backend's own text already does.
Entry start(const collNetPlugin_v1_t* api, const std::string& label) {
  auto reason = [&](const std::string& text) {
    return text.compare(0, label.size(), label) == 0 ? text : label + ": " + text;
  };
  Entry e;
  collNetInit_t in{};
  in.log = logFromBackend;
  void* ctx = nullptr;
  if (api->init(&in, &ctx) != 0) {
    e.why = reason(errorOf(*api, ctx));
    return e;
  }
  int ndev = 0;
  if (api->devices(ctx, &ndev) != 0 || ndev <= 0) {
    e.why = reason(ndev <= 0 ? std::string("no devices") : errorOf(*api, ctx));
    api->finalize(ctx);
    return e;
  }
  auto b = std::make_unique<Backend>();
  b->api = api;
  b->context = ctx;
  b->name = api->name && *api->name ? api->name : label;
  for (int d = 0; d < ndev; ++d) {
    collNetProperties_t p{};
    if (api->getProperties(ctx, d, &p) != 0) {
      e.why = reason("device " + std::to_string(d) + ": " + errorOf(*api, ctx));
      api->finalize(ctx);
      return e;
    }
    p.name[sizeof(p.name) - 1] = '\0';
    p.pciPath[sizeof(p.pciPath) - 1] = '\0';
    if (p.maxRequests < 1) p.maxRequests = 1;
    b->devices.push_back(p);
  }
  COLL_INFO("net: backend %s with %d device(s), first %s", b->name.c_str(), ndev, b->devices[0].name);
  e.backend = std::move(b);
  return e;
}

const collNetPlugin_v1_t* openPlugin(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* why = dlerror();
    COLL_THROW(collInvalidArgument, "COLL_NET_PLUGIN='", path, "' cannot be loaded: ", why ? why : "unknown error");
  }
  const auto* api = static_cast<const collNetPlugin_v1_t*>(dlsym(h, COLL_NET_SYMBOL));
  COLL_CHECK_ARG(api, "COLL_NET_PLUGIN='", path, "' does not export ", COLL_NET_SYMBOL,
                 " (not a network plugin, or built for another interface version)");
  COLL_CHECK_ARG(api->version == COLL_NET_PLUGIN_VERSION, "COLL_NET_PLUGIN='", path, "' has interface version ",
                 api->version, ", this library speaks ", COLL_NET_PLUGIN_VERSION);
  COLL_CHECK_ARG(complete(*api), "COLL_NET_PLUGIN='", path, "' leaves some of its functions NULL");
  return api;  // kept loaded for the life of the process
}

}  // namespace

std::string Backend::lastError() const { return errorOf(*api, context); }

const Backend* backendFor(const Config& cfg, std::string* why) {
  std::lock_guard<std::mutex> lock(mu);
  std::string key;
  const collNetPlugin_v1_t* api = nullptr;
  std::string label;
  if (testApi) {
    char k[32];
    snprintf(k, sizeof(k), "test:%p", static_cast<const void*>(testApi));
    key = k;
    api = testApi;
    label = testApi->name ? testApi->name : "test";
  } else {
    const std::string& choice = cfg.getStr(kNet);
    const std::string& plugin = cfg.getStr(kNetPlugin);
    COLL_CHECK_ARG(choice == "auto" || choice == "ib" || choice == "none",
                   "COLL_NET must be auto, ib or none (got '", choice, "')");
    if (choice == "none") {
      *why = "COLL_NET=none";
      return nullptr;
    }
    if (choice == "auto" && !plugin.empty()) {
      key = "plugin:" + plugin;
      label = plugin;
    } else {
      key = "ib";
      label = "InfiniBand";
    }
    auto it = cache().find(key);
    if (it != cache().end()) {
      *why = it->second.why;
      return it->second.backend.get();
    }
    if (key == "ib") {
#if COLL_HAVE_VERBS
      api = ibBackend();
#else
      Entry e;
      e.why = "InfiniBand: this libcollective was built without libibverbs (-Dverbs=disabled, or libibverbs-dev missing)";
      *why = e.why;
      cache()[key] = std::move(e);
      return nullptr;
#endif
    } else {
      api = openPlugin(plugin);
    }
  }
  auto it = cache().find(key);
  if (it == cache().end()) it = cache().emplace(key, start(api, label)).first;
  *why = it->second.why;
  return it->second.backend.get();
}

void setBackendForTesting(const collNetPlugin_v1_t* api) {
  std::lock_guard<std::mutex> lock(mu);
  testApi = api;
}

}  // namespace coll::net

namespace coll::net {
namespace {
constexpr uint32_t kOfferMagic = 0x4e45544fu;  // "NETO"
struct OfferWire {
  uint32_t magic;
  char backend[40];
  char why[216];
};
}  // namespace

std::vector<Offer> exchangeOffers(Bootstrap* boot, const Config& cfg) {
  OfferWire mine{};
  mine.magic = kOfferMagic;
  std::string why;
  try {
    if (const Backend* b = backendFor(cfg, &why)) snprintf(mine.backend, sizeof(mine.backend), "%s", b->name.c_str());
  } catch (const Error& e) {
    why = e.what();
  }
  snprintf(mine.why, sizeof(mine.why), "%s", why.c_str());
  std::vector<uint8_t> all = boot->allGather(&mine, sizeof(mine));
  std::vector<Offer> offers(all.size() / sizeof(OfferWire));
  for (size_t r = 0; r < offers.size(); ++r) {
    OfferWire w;
    memcpy(&w, all.data() + r * sizeof(w), sizeof(w));
    if (w.magic != kOfferMagic) COLL_THROW(collInternalError, "net: rank ", r, " sent a malformed offer");
    w.backend[sizeof(w.backend) - 1] = w.why[sizeof(w.why) - 1] = '\0';
    offers[r] = Offer{w.backend, w.why};
  }
  return offers;
}

}  // namespace coll::net
