// collGroupStart / collGroupEnd: the calling thread's deferred operations.
#include <algorithm>
#include <vector>

#include "core/export.hpp"
#include "core/handles.hpp"

namespace coll {
namespace {

struct GroupState {
  int depth = 0;
  std::vector<std::pair<collComm*, OpArgs>> ops;
};
thread_local GroupState tlsGroup;

}  // namespace

bool groupDefer(collComm& comm, const OpArgs& op) {
  if (tlsGroup.depth == 0) return false;
  tlsGroup.ops.emplace_back(&comm, op);
  return true;
}

bool groupActive() { return tlsGroup.depth > 0; }

}  // namespace coll

using namespace coll;

extern "C" COLL_EXPORT collResult_t collGroupStart(void) {
  ++tlsGroup.depth;
  return collSuccess;
}

extern "C" COLL_EXPORT collResult_t collGroupEnd(void) {
  return guarded(nullptr, "collGroupEnd", [&] {
    if (tlsGroup.depth == 0) COLL_THROW(collInvalidUsage, "collGroupEnd without collGroupStart");
    if (--tlsGroup.depth > 0) return;
    auto ops = std::move(tlsGroup.ops);
    tlsGroup.ops.clear();
    // One batch per communicator, in the order each first appeared in the group.
    std::vector<collComm*> order;
    for (auto& [c, op] : ops)
      if (std::find(order.begin(), order.end(), c) == order.end()) order.push_back(c);
    collResult_t first = collSuccess;
    std::string firstMsg;
    for (collComm* c : order) {
      std::vector<OpArgs> batch;
      for (auto& [cc, op] : ops)
        if (cc == c) batch.push_back(op);
      collResult_t res = guarded(c, "collGroupEnd", [&] { liveComm(c).impl->run(std::move(batch)); });
      if (res != collSuccess && first == collSuccess) {
        first = res;
        firstMsg = threadLastError();
      }
    }
    if (first != collSuccess) throw Error(first, firstMsg);
  });
}
