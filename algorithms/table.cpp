#include "algorithms/algorithm.hpp"
#include "coll_config.h"

namespace coll {

const Algorithm& ringAllReduce();
const Algorithm& rdAllReduce();
const Algorithm& oneShotAllReduce();
const Algorithm& chainBroadcast();
const Algorithm& chainReduce();
const Algorithm& ringAllGather();
const Algorithm& ringReduceScatter();
const Algorithm& pairwiseAllToAll();
const Algorithm& hdAllReduce();
const Algorithm& treeAllReduce();
const Algorithm& hierAllReduce();
const Algorithm& treeBroadcast();
const Algorithm& treeReduce();
const Algorithm& rdAllGather();
const Algorithm& hdReduceScatter();
const Algorithm& hierAllGather();
const Algorithm& hierReduceScatter();
const Algorithm& directGather();
const Algorithm& treeGather();
const Algorithm& directScatter();
const Algorithm& treeScatter();
#if COLL_HAVE_CUDA
const Algorithm& ipcAllReduce();
const Algorithm& ipcReduce();
const Algorithm& ipcReduceScatter();
const Algorithm& ipcAllGather();
const Algorithm& ipcBroadcast();
#endif

const std::vector<const Algorithm*>& algorithmTable() {
  static const std::vector<const Algorithm*> table = {
      &ringAllReduce(),     &rdAllReduce(),      &oneShotAllReduce(),      &hdAllReduce(),     &treeAllReduce(), &hierAllReduce(),
      &chainBroadcast(),    &treeBroadcast(),    &chainReduce(),     &treeReduce(),    &ringAllGather(),
      &rdAllGather(),       &hierAllGather(),     &ringReduceScatter(), &hdReduceScatter(), &hierReduceScatter(),
      &pairwiseAllToAll(),  &directGather(),      &treeGather(),        &directScatter(),     &treeScatter(),
#if COLL_HAVE_CUDA
      // Device algorithms last: the tuner probe and the ranks' comparison of it index
      // the host ones.
      &ipcAllReduce(),      &ipcReduce(),         &ipcReduceScatter(),  &ipcAllGather(),      &ipcBroadcast(),
#endif
  };
  return table;
}

const Algorithm* findAlgorithm(OpKind kind, const std::string& name) {
  for (const Algorithm* a : algorithmTable())
    if (a->kind() == kind && name == a->name()) return a;
  return nullptr;
}

}  // namespace coll
