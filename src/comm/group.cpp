// collGroupStart / collGroupEnd: the calling thread's deferred operations.
#include <algorithm>
#include <vector>

#include "comm/device_ops.hpp"
#include "base/export.hpp"
#include "comm/handles.hpp"
#include "base/types.hpp"

namespace coll {
namespace {

// The depth apart from the deferred ops: every call looks at it, and a thread_local
// without a destructor is reached without the guard check the vector's costs.
thread_local int tlsGroupDepth = 0;
thread_local std::vector<std::pair<collComm*, GroupedOp>> tlsGroupOps;

// Self sends and receives are checked before a host batch runs: found while running, a
// mismatch failed the batch halfway and left the communicator unusable. (A stream-ordered
// unit fails on its stream instead, as an async error: doc/cuda.md, "Groups".)
void checkSelfPairs(const collComm& c, const std::vector<GroupedOp>& batch) {
  std::vector<const OpArgs*> ops;
  for (const GroupedOp& g : batch) ops.push_back(&g.op);
  coll::checkSelfPairs(c.impl->rank(), ops);
}

// Runs, or launches on streams, one communicator's share of the group. Returns what the
// caller must still wait for (see launchGroup), or null.
std::shared_ptr<Request> launch(collComm& c, const std::vector<GroupedOp>& batch) {
#if COLL_HAVE_CUDA
  for (const GroupedOp& g : batch)
    if (g.onStream) return launchGroup(c, batch);
#endif
  checkSelfPairs(c, batch);
  std::vector<OpArgs> ops;
  for (const GroupedOp& g : batch) ops.push_back(g.op);
  c.impl->run(std::move(ops));
  return nullptr;
}

}  // namespace

bool groupDefer(collComm& comm, const GroupedOp& op) {
  if (tlsGroupDepth == 0) return false;
  tlsGroupOps.emplace_back(&comm, op);
  return true;
}

bool groupActive() { return tlsGroupDepth > 0; }

}  // namespace coll

using namespace coll;

extern "C" COLL_EXPORT collResult_t collGroupStart(void) {
  ++tlsGroupDepth;
  return collSuccess;
}

extern "C" COLL_EXPORT collResult_t collGroupEnd(void) {
  return guarded(nullptr, "collGroupEnd", [&] {
    if (tlsGroupDepth == 0) COLL_THROW(collInvalidUsage, "collGroupEnd without collGroupStart");
    if (--tlsGroupDepth > 0) return;
    auto ops = std::move(tlsGroupOps);
    tlsGroupOps.clear();
    // One batch per communicator, in the order each first appeared in the group.
    std::vector<collComm*> order;
    for (auto& [c, op] : ops)
      if (std::find(order.begin(), order.end(), c) == order.end()) order.push_back(c);
    collResult_t first = collSuccess;
    std::string firstMsg;
    auto note = [&](collResult_t res) {
      if (res != collSuccess && first == collSuccess) {
        first = res;
        firstMsg = threadLastError();
      }
    };
    std::vector<std::pair<collComm*, std::shared_ptr<Request>>> pending;
    for (collComm* c : order) {
      std::vector<GroupedOp> batch;
      for (auto& [cc, op] : ops)
        if (cc == c) batch.push_back(op);
      note(guarded(c, "collGroupEnd", [&] {
        collComm& cc = liveComm(c);
        IssueGuard busy(cc);
        if (auto req = launch(cc, batch)) pending.emplace_back(c, std::move(req));
      }));
    }
    // Every unit is launched before any is waited for, so that no communicator's unit
    // waits behind another's.
    for (auto& [c, req] : pending)
      note(guarded(c, "collGroupEnd", [&, &req = req] {
        const double timeout = 2 * liveComm(c).impl->timeoutSec() + 10;
        if (!req->wait(timeout))
          COLL_THROW(collTimeout, "a group with device-buffer operations did not finish within ", timeout, " s");
        if (req->result() != collSuccess) throw Error(req->result(), req->message());
      }));
    if (first != collSuccess) throw Error(first, firstMsg);
  });
}
