#include "engine/control.hpp"

namespace coll::engine {
namespace {
constexpr size_t kFlags = 5;  // four flags and the direct threshold
}

std::vector<uint8_t> encodeControl(const LocalControl& c) {
  const size_t n = c.slots.size();
  std::vector<uint8_t> v(kFlags + 2 * n);
  v[0] = c.hasUncached ? 0 : 1;
  v[1] = c.wantsShutdown ? 0 : 1;  // any rank's shutdown stops every rank, as abort does
  v[2] = c.abort ? 0 : 1;
  v[3] = c.busy ? 0 : 1;
  v[4] = c.directLog2;
  for (size_t i = 0; i < n; ++i) {
    v[kFlags + i] = c.slots[i];
    v[kFlags + n + i] = (i < c.held.size() && c.held[i]) ? 0 : 1;
  }
  return v;
}

RoundDecision decodeControl(const std::vector<uint8_t>& reduced) {
  RoundDecision d;
  if (reduced.size() < kFlags) return d;
  d.slowPath = reduced[0] == 0;
  d.shutdown = reduced[1] == 0;
  d.abort = reduced[2] == 0;
  d.anyBusy = reduced[3] == 0;
  d.directLog2 = reduced[4];
  const size_t n = (reduced.size() - kFlags) / 2;
  for (size_t i = 0; i < n; ++i) {
    uint8_t state = reduced[kFlags + i];
    bool heldSomewhere = reduced[kFlags + n + i] == 0;
    if (state == kSlotInvalid) d.invalidated.push_back(static_cast<uint32_t>(i));
    else if (state == kSlotPending && heldSomewhere) d.ready.push_back(static_cast<uint32_t>(i));
  }
  if (!d.invalidated.empty()) d.slowPath = true;
  return d;
}

}  // namespace coll::engine
