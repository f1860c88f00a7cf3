// Call signatures: every message a collective sends carries a 64-bit summary of the call
// it belongs to, and the receiving side compares it with the summary of the call it is
// in. Ranks that called different collectives, or the same one with a different type,
// reduction, root or count, or that made a different number of collective calls, then
// get an error that says so at the first message where their calls meet, instead of
// sums of mixed operations, data of the wrong type, or a size mismatch deep in the
// transport. The check costs one word in each message header.
//
// Layout, low bits first:
//   4 bits  kind: 1 + OpKind; send and receive share one code (point-to-point)
//   4 bits  data type (collectives only)
//   4 bits  1 + reduction (all-reduce, reduce, reduce-scatter only); 1 + collNumOps for
//           every pre-multiplied sum, whatever its number and scalar
//  12 bits  the communicator's count of earlier collective calls, mod 4096
//   1 bit   count >= 2^22
//  17 bits  root (broadcast, reduce, gather, scatter only), mod 2^17
//  22 bits  count, mod 2^22
// Point-to-point messages carry only the kind (their sizes are checked by the links;
// their number is the application's business). Fields reduced mod 2^k can let rare
// mismatches through (roots 2^17 apart, counts differing by a multiple of 2^22, where
// the size check usually still catches them, or 4096 missing calls); they never make
// matching calls look different. 0 is "not stamped" and matches anything.
#pragma once

#include <cstdint>
#include <string>

#include "base/op.hpp"

namespace coll {

// The signature of collective call number `callIndex` (counting every collective call on
// the communicator, count 0 included), or of any send/recv.
uint64_t callSignature(const OpArgs& op, uint64_t callIndex);
// The signature of point-to-point messages.
uint64_t p2pSignature();
// One call as a phrase: "allreduce (float, sum, count 16; collective call #3)", "barrier
// (collective call #2)", "send/recv".
std::string describeCall(uint64_t sig);
// Whether a message of signature `theirs` that no posted receive claims, seen while this
// rank is in call `mine`, can never be claimed by a matching call: it belongs to this very
// call number with other arguments, or to an earlier call. (A later call's message may
// legitimately arrive early: a broadcast's root runs ahead of its receivers.)
bool unclaimable(uint64_t theirs, uint64_t mine);
// The error text for a message of signature `theirs` from rank `peer` arriving where rank
// `me` (-1: "this rank") is in a call of signature `mine` (the two differ, neither is 0).
std::string callMismatchText(int peer, uint64_t theirs, int me, uint64_t mine);

}  // namespace coll
