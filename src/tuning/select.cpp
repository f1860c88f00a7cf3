#include "tuning/select.hpp"

#include <sstream>

#include "core/comm.hpp"
#include "core/config.hpp"
#include "core/error.hpp"
#include "core/types.hpp"

namespace coll {

COLL_PARAM(kAlgo, "COLL_ALGO", "", "force algorithms: 'ring' or 'allreduce:rd,broadcast:chain'");
COLL_PARAM(kRdMax, "COLL_RD_MAX_BYTES", "32K", "all-reduce up to this size uses recursive doubling");

namespace {
const char* kKindNames[] = {"allreduce", "broadcast", "reduce", "allgather", "reducescatter",
                            "alltoall", "send", "recv", "barrier"};
}

bool parseOpKind(const std::string& text, OpKind* kind) {
  for (int i = 0; i < 9; ++i)
    if (text == kKindNames[i]) {
      *kind = static_cast<OpKind>(i);
      return true;
    }
  return false;
}

const char* opKindName(OpKind k) { return kKindNames[static_cast<int>(k)]; }

const Algorithm* Selector::byName(OpKind kind, const std::string& name) const {
  for (const Algorithm* a : algorithmTable())
    if (a->kind() == kind && name == a->name()) return a;
  return nullptr;
}

Selector::Selector(const Config& cfg) : rdMaxBytes_(cfg.getSize(kRdMax)) {
  std::stringstream ss(cfg.getStr(kAlgo));
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto colon = item.find(':');
    if (colon == std::string::npos) {
      bool any = false;
      for (int k = 0; k < 9; ++k)
        if (const Algorithm* a = byName(static_cast<OpKind>(k), item)) {
          forced_[static_cast<OpKind>(k)] = a;
          any = true;
        }
      COLL_CHECK_ARG(any, "COLL_ALGO: no collective has an algorithm named '", item, "'");
      continue;
    }
    OpKind kind;
    std::string coll = item.substr(0, colon), name = item.substr(colon + 1);
    COLL_CHECK_ARG(parseOpKind(coll, &kind), "COLL_ALGO: unknown collective '", coll, "'");
    const Algorithm* a = byName(kind, name);
    COLL_CHECK_ARG(a, "COLL_ALGO: ", coll, " has no algorithm named '", name, "'");
    forced_[kind] = a;
  }
}

const Algorithm& Selector::select(const Comm& comm, const OpArgs& args) const {
  auto it = forced_.find(args.kind);
  if (it != forced_.end() && it->second->supports(comm, args)) return *it->second;
  if (args.kind == OpKind::AllReduce) {
    size_t bytes = args.count * typeSize(args.dtype);
    const char* name = bytes <= rdMaxBytes_ ? "rd" : "ring";
    return *byName(OpKind::AllReduce, name);
  }
  for (const Algorithm* a : algorithmTable())
    if (a->kind() == args.kind && a->supports(comm, args)) return *a;
  COLL_THROW(collInternalError, "no algorithm supports ", opKindName(args.kind));
}

}  // namespace coll
