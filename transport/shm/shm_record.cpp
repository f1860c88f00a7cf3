// The texts of refused record headers (shm_record.hpp).
#include "transport/shm/shm_record.hpp"

#include <ios>

#include "base/call_sig.hpp"
#include "base/error.hpp"

namespace coll::shm {

std::string recordFaultText(RecordFault f, const Record& r, const RecordExpect& e) {
  switch (f) {
    case RecordFault::kNone:
      break;
    case RecordFault::kTagOrSeq:
      return strCat("corrupt record in the shm ring at offset ", e.offset, " (tag 0x", std::hex, r.tag, std::dec,
                    ", seq ", r.seq, "; expected seq ", static_cast<uint32_t>(e.index), ")");
    case RecordFault::kSingleNotNegotiated:
      return "peer sent a single-copy record but single-copy was not negotiated";
    case RecordFault::kPushNotAllowed:
      return "peer sent a push record but may not write into this process";
    case RecordFault::kCallMismatch:
      return callMismatchText(e.peer, r.call, e.rank, e.call);
    case RecordFault::kSizeMismatch:
      return strCat("message size mismatch: rank ", e.peer, " sent ", r.bytes, " bytes but rank ", e.rank,
                    " posted a receive of ", e.bytes, " bytes (message #", e.index, " in this direction)");
    case RecordFault::kWholeSize:
      return strCat("corrupt record in the shm ring at offset ", e.offset, ": a whole ", r.bytes,
                    "-byte message cannot be in a ring of ", e.ringBytes, " bytes");
    case RecordFault::kBadBuffer:
      return strCat("peer published a bad buffer (address 0x", std::hex, r.addr, std::dec, ", ", r.bytes,
                    " bytes)");
    case RecordFault::kOutsideRegion:
      return strCat("peer published a buffer (0x", std::hex, r.addr, std::dec, ", ", r.bytes,
                    " bytes) outside the shared region it named (0x", std::hex, r.region.base, std::dec, ", ",
                    r.region.bytes, " bytes)");
    case RecordFault::kPushIntoReduce:
      // This count includes the record itself, as the link's message always has.
      return strCat("rank ", e.peer, " pushed a ", r.bytes, "-byte message into a receive that reduces it (message #",
                    e.index + 1, " in this direction)");
  }
  return "record header accepted";
}

}  // namespace coll::shm
