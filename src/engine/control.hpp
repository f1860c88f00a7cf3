// The per-round control vector: one byte per cache slot plus a few flags, combined with
// a single collMin all-reduce over uint8. Min gives AND for "all ranks" questions; "any
// rank" questions are encoded inverted (0 = yes) so that min still answers them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/autotune.hpp"
#include "engine/fusion_policy.hpp"

namespace coll::engine {

// Per-slot states; min over ranks: any Invalid wins, then any Idle, else all Pending.
// The vector is [flags][direct threshold][tuned parameters][slot states][held flags, inverted].
enum SlotState : uint8_t { kSlotInvalid = 0, kSlotIdle = 1, kSlotPending = 2 };

// The coordinator's parameters while it tunes (autotune.hpp). Rank 0 writes them and every
// other rank writes 0xFF bytes, so the min all-reduce hands every rank rank 0's bytes as
// they were, and every rank switches in the round that carries new values.
struct TuneControl {
  TunedParams params;
  bool done = false;  // tuning finished: these are the final values
};

struct LocalControl {
  bool hasUncached = false;    // this rank has requests for the full negotiation
  bool wantsShutdown = false;  // this rank asked to shut down
  bool abort = false;          // this rank decided the engine must stop (stall limit)
  bool busy = false;           // this rank has anything queued or in flight
  // log2 of the direct threshold this rank proposes (fusion_policy.hpp); the smallest
  // proposal wins.
  uint8_t directLog2 = kDirectUnknown;
  std::optional<TuneControl> tune;  // rank 0 only, while COLL_AUTOTUNE is on
  std::vector<uint8_t> slots;  // SlotState per cache slot
  // Per slot: this rank holds a real request for it (a joined rank reports Pending for
  // every allreduce slot without holding one; a slot runs only if some rank really does).
  std::vector<bool> held;
};

struct RoundDecision {
  bool slowPath = false;  // someone has uncached requests or a slot was invalidated
  bool shutdown = false;  // some rank asked to shut down: every rank stops
  bool abort = false;     // some rank aborts
  bool anyBusy = false;
  uint8_t directLog2 = kDirectUnknown;  // the smallest proposal
  std::optional<TuneControl> tune;      // rank 0's, when it sent them
  std::vector<uint32_t> invalidated;  // ascending
  std::vector<uint32_t> ready;        // ascending: execution order of cache hits
};

std::vector<uint8_t> encodeControl(const LocalControl& c);
// `reduced` is the element-wise min of every rank's encodeControl() output.
RoundDecision decodeControl(const std::vector<uint8_t>& reduced);

}  // namespace coll::engine
