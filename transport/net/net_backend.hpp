// Network backends behind the `net` transport (plugins/net/coll_net.h): the built-in
// InfiniBand verbs one and external plugins named by COLL_NET_PLUGIN.
#pragma once

#include "coll_config.h"
#include "plugins/net/coll_net.h"

namespace coll::net {

#if COLL_HAVE_VERBS
// The built-in InfiniBand verbs backend (transport/net/ib/). Its init fails, with
// lastError saying why, when libibverbs finds no usable device.
const collNetPlugin_v1_t* ibBackend();
#endif

}  // namespace coll::net
