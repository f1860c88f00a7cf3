// Network backends behind the `net` transport (plugins/net/coll_net.h): the built-in
// InfiniBand verbs one and external plugins named by COLL_NET_PLUGIN. A backend is loaded
// and initialised once per process and kept for its lifetime (plugins are not unloaded:
// a communicator of another thread may still be using one).
#pragma once

#include <string>
#include <vector>

#include "coll_config.h"
#include "plugins/net/coll_net.h"

namespace coll {
class Config;
}

namespace coll::net {

#if COLL_HAVE_VERBS
// The built-in InfiniBand verbs backend (transport/net/ib/, built with libibverbs). Its
// init fails, with lastError saying why, when libibverbs finds no usable device.
const collNetPlugin_v1_t* ibBackend();
// That init with its tunables (COLL_IB_*) from `cfg`; ibBackend()->init reads them from
// the environment.
int ibBackendInit(const Config& cfg, const collNetInit_t* in, void** context);
#endif

struct Backend {
  const collNetPlugin_v1_t* api = nullptr;
  void* context = nullptr;
  std::string name;                            // "ib", or the plugin's name
  std::vector<collNetProperties_t> devices;    // at least one
  // The text of the backend's last failure in this thread.
  std::string lastError() const;
};

// The backend this process uses under `cfg` (COLL_NET, COLL_NET_PLUGIN), or nullptr with
// *why saying why there is none ("COLL_NET=none", "InfiniBand: no devices", ...). The
// first call for a given choice loads and initialises it; later calls return the same
// answer. Throws collInvalidArgument when COLL_NET_PLUGIN names something that is not a
// loadable plugin of this interface version (the user asked for it explicitly).
const Backend* backendFor(const Config& cfg, std::string* why);

// The device a rank uses: among those that are the NIC the topology chose for it (`nic`,
// a verbs device name such as "mlx5_0", which names the device's ports "mlx5_0:1",
// "mlx5_0:2"), else among all, the one numbered like its local rank. -1 without devices.
int pickDevice(const std::vector<collNetProperties_t>& devices, const std::string& nic, int localRank);

// Tests: use `api` (initialised on first use) in place of whatever COLL_NET and
// COLL_NET_PLUGIN say; nullptr restores the normal choice.
void setBackendForTesting(const collNetPlugin_v1_t* api);

}  // namespace coll::net

namespace coll {
class Bootstrap;
}

namespace coll::net {

// What one rank can use: its backend's name, or "" with why.
struct Offer {
  std::string backend;
  std::string why;
};

// Collective over `boot` (one all-gather): every rank's offer, in rank order. A rank's
// backend is loaded here (backendFor); a plugin that fails to load is an offer of none
// on that rank, with the reason.
std::vector<Offer> exchangeOffers(Bootstrap* boot, const Config& cfg);

}  // namespace coll::net
