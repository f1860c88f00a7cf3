// What the tuner plugin picks over a fixed grid of calls, so that the ranks can compare
// their plugins' decisions when a communicator forms (Comm::checkTunerAgrees).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/team.hpp"
#include "base/error.hpp"
#include "base/types.hpp"
#include "tuning/select.hpp"

namespace coll {
namespace {

// The collectives a plugin tunes, buffer sizes 1 B to 16 GiB, and types and operations
// that a table keyed on them would tell apart. Not every call a job makes, but a table
// or rule that differs between hosts shows up here in practice.
constexpr OpKind kKinds[] = {OpKind::AllReduce, OpKind::Broadcast,     OpKind::Reduce,
                             OpKind::AllGather, OpKind::ReduceScatter, OpKind::AllToAll};
constexpr collDataType_t kTypes[] = {collInt8, collFloat16, collFloat32, collFloat64};
constexpr collRedOp_t kOps[] = {collSum, collMax};
constexpr int kSizes = 35;  // 2^0 .. 2^34 bytes
constexpr size_t kCases = std::size(kKinds) * std::size(kTypes) * std::size(kOps) * kSizes;

OpArgs probeCase(size_t i) {
  OpArgs a;
  const int lg = static_cast<int>(i % kSizes);
  i /= kSizes;
  a.op = kOps[i % std::size(kOps)];
  i /= std::size(kOps);
  a.dtype = kTypes[i % std::size(kTypes)];
  i /= std::size(kTypes);
  a.kind = kKinds[i];
  a.count = std::max<size_t>(1, (size_t{1} << lg) / typeSize(a.dtype));
  return a;
}

}  // namespace

std::vector<uint8_t> Selector::tunerProbe(const Team& comm) const {
  const auto& table = algorithmTable();
  std::vector<uint8_t> picks(kCases);
  for (size_t i = 0; i < kCases; ++i) {
    const Algorithm* a = &choose(comm, probeCase(i));
    picks[i] = static_cast<uint8_t>(std::find(table.begin(), table.end(), a) - table.begin());
  }
  return picks;
}

std::string Selector::tunerProbeCase(size_t i) {
  const OpArgs a = probeCase(i);
  const size_t bytes = a.count * typeSize(a.dtype);
  return strCat(opKindName(a.kind), " of ", bytes, bytes == 1 ? " byte of " : " bytes of ", typeName(a.dtype), " (",
                opName(a.op), ")");
}

}  // namespace coll
