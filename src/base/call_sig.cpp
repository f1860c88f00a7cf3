#include "base/call_sig.hpp"

#include <sstream>
#include <vector>

#include "base/types.hpp"

namespace coll {
namespace {

struct Field {
  int shift;
  int bits;
  uint64_t get(uint64_t sig) const { return (sig >> shift) & ((uint64_t{1} << bits) - 1); }
  uint64_t put(uint64_t v) const { return (v & ((uint64_t{1} << bits) - 1)) << shift; }
};
constexpr Field kKind{0, 4}, kType{4, 4}, kRedOp{8, 4}, kIndex{12, 12}, kBig{24, 1}, kRoot{25, 17}, kCount{42, 22};
constexpr uint64_t kCountLimit = uint64_t{1} << 22;  // counts from here on set kBig
constexpr int kKinds = kNumOpKinds;  // 4 bits hold 1 + each

// The reduction field of a pre-multiplied sum: one code for every such op, whatever its
// number (numbers are local to a process) and scalar (ranks may pass different ones).
constexpr uint64_t kPreMulCode = collNumOps + 1;
static_assert(kPreMulCode < 16);
static_assert(collNumTypes <= 16);

const char* redOpText(uint64_t code) {
  if (code == kPreMulCode) return "premulsum";
  return code == 0 ? "invalid" : opName(static_cast<collRedOp_t>(code - 1));
}

bool reduces(OpKind k) { return k == OpKind::AllReduce || k == OpKind::Reduce || k == OpKind::ReduceScatter; }
static_assert(kKinds < 16);

}  // namespace

// Decoded from the bits alone: the peer's signature is all this rank knows of its call.
std::string describeCall(uint64_t sig) {
  const uint64_t code = kKind.get(sig);
  std::ostringstream os;
  if (code == 0 || code > kKinds) {
    os << "unknown call (signature 0x" << std::hex << sig << ")";
    return os.str();
  }
  const auto kind = static_cast<OpKind>(code - 1);
  if (kind == OpKind::Send || kind == OpKind::Recv) return "send/recv";
  os << opKindName(kind) << " (";
  if (kind != OpKind::Barrier) {
    const auto dt = static_cast<collDataType_t>(kType.get(sig));
    os << typeName(dt);
    if (reduces(kind)) {
      os << ", " << redOpText(kRedOp.get(sig));
    }
    if (OpArgs{kind}.isRooted()) os << ", root " << kRoot.get(sig);
    if (kBig.get(sig)) os << ", count >= " << kCountLimit << "; ";
    else os << ", count " << kCount.get(sig) << "; ";
  }
  os << "collective call #" << kIndex.get(sig) + 1 << ")";
  return os.str();
}

uint64_t callSignature(const OpArgs& op, uint64_t callIndex) {
  if (op.isP2P()) return p2pSignature();
  uint64_t sig = kKind.put(static_cast<uint64_t>(op.kind) + 1) | kIndex.put(callIndex);
  if (op.kind == OpKind::Barrier) return sig;
  sig |= kType.put(static_cast<uint64_t>(op.dtype)) | kCount.put(op.count) | kBig.put(op.count >= kCountLimit);
  if (reduces(op.kind)) sig |= kRedOp.put(op.preMul ? kPreMulCode : static_cast<uint64_t>(op.op) + 1);
  if (op.isRooted()) sig |= kRoot.put(static_cast<uint64_t>(op.root));
  return sig;
}

bool unclaimable(uint64_t theirs, uint64_t mine) {
  const uint64_t p2p = p2pSignature();
  if (theirs == 0 || mine == 0 || theirs == p2p || mine == p2p || theirs == mine) return false;
  const uint64_t ahead = (kIndex.get(theirs) - kIndex.get(mine)) & ((uint64_t{1} << kIndex.bits) - 1);
  return ahead == 0 || ahead >= (uint64_t{1} << (kIndex.bits - 1));
}

uint64_t p2pSignature() { return kKind.put(static_cast<uint64_t>(OpKind::Send) + 1); }

std::string callMismatchText(int peer, uint64_t theirs, int me, uint64_t mine) {
  std::vector<const char*> differ;
  if (kKind.get(theirs) != kKind.get(mine)) {
    differ.push_back("kind");
  } else {
    if (kType.get(theirs) != kType.get(mine)) differ.push_back("data type");
    if (kRedOp.get(theirs) != kRedOp.get(mine)) differ.push_back("reduction");
    if (kRoot.get(theirs) != kRoot.get(mine)) differ.push_back("root");
    if (kCount.get(theirs) != kCount.get(mine) || kBig.get(theirs) != kBig.get(mine)) differ.push_back("count");
  }
  if (kIndex.get(theirs) != kIndex.get(mine)) differ.push_back("number of earlier collective calls");
  std::ostringstream os;
  os << "rank " << peer << " sent a message of its " << describeCall(theirs) << " where ";
  if (me >= 0) os << "rank " << me;
  else os << "this rank";
  os << " is in its " << describeCall(mine) << ": the calls differ in ";
  for (size_t i = 0; i < differ.size(); ++i) os << (i ? (i + 1 == differ.size() ? " and " : ", ") : "") << differ[i];
  os << " (every rank must make the same collective calls in the same order, with the same count, data "
        "type, reduction and root; a count of 0 is a call too)";
  return os.str();
}

}  // namespace coll
