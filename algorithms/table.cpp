#include "algorithms/algorithm.hpp"

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

const std::vector<const Algorithm*>& algorithmTable() {
  static const std::vector<const Algorithm*> table = {
      &ringAllReduce(),     &rdAllReduce(),      &oneShotAllReduce(),      &hdAllReduce(),     &treeAllReduce(), &hierAllReduce(),
      &chainBroadcast(),    &treeBroadcast(),    &chainReduce(),     &treeReduce(),    &ringAllGather(),
      &rdAllGather(),       &hierAllGather(),     &ringReduceScatter(), &hdReduceScatter(), &hierReduceScatter(),
      &pairwiseAllToAll(),  &directGather(),      &treeGather(),        &directScatter(),     &treeScatter(),
  };
  return table;
}

const Algorithm* findAlgorithm(OpKind kind, const std::string& name) {
  for (const Algorithm* a : algorithmTable())
    if (a->kind() == kind && name == a->name()) return a;
  return nullptr;
}

}  // namespace coll
