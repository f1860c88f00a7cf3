#include "algorithms/algorithm.hpp"

namespace coll {

const Algorithm& ringAllReduce();
const Algorithm& rdAllReduce();
const Algorithm& chainBroadcast();
const Algorithm& chainReduce();
const Algorithm& ringAllGather();
const Algorithm& ringReduceScatter();
const Algorithm& pairwiseAllToAll();

const std::vector<const Algorithm*>& algorithmTable() {
  static const std::vector<const Algorithm*> table = {
      &ringAllReduce(), &rdAllReduce(),       &chainBroadcast(),    &chainReduce(),
      &ringAllGather(), &ringReduceScatter(), &pairwiseAllToAll(),
  };
  return table;
}

}  // namespace coll
