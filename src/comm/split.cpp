// collCommSplit: two all-gathers over the parent communicator. The first tells every
// rank who shares its color (and in which order, by key then old rank); the lowest
// member of each color then opens a new rendezvous and the second all-gather hands its
// id to the others, who connect as a fresh communicator.
#include <algorithm>
#include <cstring>
#include <vector>

#include "comm/device_ops.hpp"
#include "base/export.hpp"
#include "comm/handles.hpp"
#include "base/socket.hpp"

namespace coll {

UniqueIdData makeUniqueIdNear(const sockaddr_storage* near);

namespace {

struct Member {
  int32_t color;
  int32_t key;
  int32_t rank;
  int32_t newcommNull;  // the rank passed newcomm == NULL
};

std::vector<uint8_t> allGatherBytes(Comm& comm, const void* mine, size_t bytes) {
  std::vector<uint8_t> all(bytes * comm.nranks());
  OpArgs op;
  op.kind = OpKind::AllGather;
  op.sendbuf = mine;
  op.recvbuf = all.data();
  op.count = bytes;
  op.dtype = collUint8;
  comm.run(op);
  return all;
}

}  // namespace
}  // namespace coll

using namespace coll;

extern "C" COLL_EXPORT collResult_t collCommSplit(collComm_t comm, int color, int key, collComm_t* newcomm) {
  return guarded(comm, "collCommSplit", [&] {
    collComm& c = liveComm(comm);
    IssueGuard busy(c);  // both exchanges are calls on comm
    if (newcomm) *newcomm = nullptr;
    // Arguments are checked after the first exchange, on every rank alike: a rank that
    // refused its own before the exchange left the others waiting in it until COLL_TIMEOUT,
    // and then their communicator was unusable.
    auto badColor = [](int32_t col) { return col < 0 && col != COLL_SPLIT_NOCOLOR; };
    Comm& parent = *c.impl;
    Member me{color, key, parent.rank(), newcomm ? 0 : 1};
    auto raw = allGatherBytes(parent, &me, sizeof(me));
    COLL_CHECK_ARG(newcomm, "newcomm is NULL");
    COLL_CHECK_ARG(!badColor(color), "color ", color, " must be >= 0 or COLL_SPLIT_NOCOLOR");
    std::vector<Member> members;
    for (int i = 0; i < parent.nranks(); ++i) {
      Member m;
      memcpy(&m, raw.data() + i * sizeof(Member), sizeof(Member));
      if (m.newcommNull || badColor(m.color))
        COLL_THROW(collInvalidArgument, "rank ", i, " passed ",
                   m.newcommNull ? std::string("newcomm NULL") : "color " + std::to_string(m.color),
                   " (colors must be >= 0 or COLL_SPLIT_NOCOLOR), so no rank splits");
      if (color != COLL_SPLIT_NOCOLOR && m.color == color) members.push_back(m);
    }
    std::sort(members.begin(), members.end(), [](const Member& a, const Member& b) {
      return a.key != b.key ? a.key < b.key : a.rank < b.rank;
    });
    int leader = -1, newRank = -1;
    for (size_t i = 0; i < members.size(); ++i) {
      if (leader < 0 || members[i].rank < leader) leader = members[i].rank;
      if (members[i].rank == parent.rank()) newRank = static_cast<int>(i);
    }
    collUniqueId mine{};
    if (leader == parent.rank()) mine = makeUniqueIdNear(&parent.id().root).encode();
    auto ids = allGatherBytes(parent, &mine, sizeof(mine));
    if (color == COLL_SPLIT_NOCOLOR) return;
    collUniqueId theirs;
    memcpy(&theirs, ids.data() + static_cast<size_t>(leader) * sizeof(theirs), sizeof(theirs));
    auto handle = std::make_unique<collComm>();
    // The new communicator forms while the parent's abort may come from another thread:
    // its waits for the other members end then, as the parent's own calls do.
    handle->impl = Comm::create(UniqueIdData::decode(theirs), newRank, static_cast<int>(members.size()),
                                &parent.abortFlag(), parent.givenConfig());
#if COLL_HAVE_CUDA
    attachCuda(*handle);
#endif
    *newcomm = handle.release();
    registerHandle(*newcomm);
  });
}
