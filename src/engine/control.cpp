#include "engine/control.hpp"

#include <algorithm>
#include <cstring>

namespace coll::engine {
namespace {
constexpr size_t kFlags = 5;  // four flags and the direct threshold
// [present][done][fusion threshold: 8 bytes][cycle time in us: 4][fusion chunk: 8]; a
// flag byte is 0 for yes, so that the 0xFF of the other ranks reads as "not sent".
constexpr size_t kTune = 22;
constexpr size_t kHead = kFlags + kTune;
// A cycle time from the wire is bounded like COLL_IDLE_CYCLE_TIME.
constexpr uint32_t kMaxCycleUs = 1000 * 1000;

template <typename T>
void putAt(std::vector<uint8_t>& v, size_t at, T x) {
  std::memcpy(v.data() + at, &x, sizeof(T));
}
template <typename T>
T getAt(const std::vector<uint8_t>& v, size_t at) {
  T x;
  std::memcpy(&x, v.data() + at, sizeof(T));
  return x;
}

void encodeTune(std::vector<uint8_t>& v, const TuneControl& t) {
  v[kFlags] = 0;
  v[kFlags + 1] = t.done ? 0 : 1;
  putAt<uint64_t>(v, kFlags + 2, t.params.fusionThreshold);
  double us = std::clamp(t.params.cycleMs * 1000, 0.0, double(kMaxCycleUs));
  putAt<uint32_t>(v, kFlags + 10, static_cast<uint32_t>(us + 0.5));
  putAt<uint64_t>(v, kFlags + 14, t.params.fusionChunk);
}

std::optional<TuneControl> decodeTune(const std::vector<uint8_t>& v) {
  if (v[kFlags] != 0) return std::nullopt;
  TuneControl t;
  t.done = v[kFlags + 1] == 0;
  t.params.fusionThreshold = static_cast<size_t>(getAt<uint64_t>(v, kFlags + 2));
  t.params.cycleMs = std::min(getAt<uint32_t>(v, kFlags + 10), kMaxCycleUs) / 1000.0;
  t.params.fusionChunk = static_cast<size_t>(std::max<uint64_t>(1, getAt<uint64_t>(v, kFlags + 14)));
  return t;
}
}  // namespace

std::vector<uint8_t> encodeControl(const LocalControl& c) {
  const size_t n = c.slots.size();
  std::vector<uint8_t> v(kHead + 2 * n, 0xFF);
  v[0] = c.hasUncached ? 0 : 1;
  v[1] = c.wantsShutdown ? 0 : 1;  // any rank's shutdown stops every rank, as abort does
  v[2] = c.abort ? 0 : 1;
  v[3] = c.busy ? 0 : 1;
  v[4] = c.directLog2;
  if (c.tune) encodeTune(v, *c.tune);
  for (size_t i = 0; i < n; ++i) {
    v[kHead + i] = c.slots[i];
    v[kHead + n + i] = (i < c.held.size() && c.held[i]) ? 0 : 1;
  }
  return v;
}

RoundDecision decodeControl(const std::vector<uint8_t>& reduced) {
  RoundDecision d;
  if (reduced.size() < kHead) return d;
  d.slowPath = reduced[0] == 0;
  d.shutdown = reduced[1] == 0;
  d.abort = reduced[2] == 0;
  d.anyBusy = reduced[3] == 0;
  d.directLog2 = reduced[4];
  d.tune = decodeTune(reduced);
  const size_t n = (reduced.size() - kHead) / 2;
  for (size_t i = 0; i < n; ++i) {
    uint8_t state = reduced[kHead + i];
    bool heldSomewhere = reduced[kHead + n + i] == 0;
    if (state == kSlotInvalid) d.invalidated.push_back(static_cast<uint32_t>(i));
    else if (state == kSlotPending && heldSomewhere) d.ready.push_back(static_cast<uint32_t>(i));
  }
  if (!d.invalidated.empty()) d.slowPath = true;
  return d;
}

}  // namespace coll::engine
