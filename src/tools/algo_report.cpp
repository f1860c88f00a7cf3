#include "tools/algo_report.hpp"

#include <cstdio>
#include <vector>

#include "comm/comm.hpp"
#include "comm/handles.hpp"
#include "tuning/select.hpp"

namespace coll::tools {

void printAlgorithmChoices(std::ostream& os, collComm_t handle, const std::vector<size_t>& wanted) {
  const Comm& comm = *liveComm(handle).impl;
  Selector selector(comm.config());
  const OpKind kinds[] = {OpKind::AllReduce, OpKind::Broadcast, OpKind::Reduce,
                          OpKind::AllGather, OpKind::ReduceScatter, OpKind::AllToAll,
                          OpKind::Gather,    OpKind::Scatter};
  // float32 counts as the C API takes them (per rank for all-gather, reduce-scatter,
  // all-to-all, gather and scatter), from one element to 256 Mi elements.
  const std::vector<size_t> counts =
      wanted.empty() ? std::vector<size_t>{1, 256, 8192, 65536, 1 << 20, 16 << 20, 256 << 20} : wanted;
  auto float32Args = [](OpKind kind, size_t count) {
    OpArgs args;
    args.kind = kind;
    args.count = count;
    args.dtype = collFloat32;
    return args;
  };
  char buf[64];
  os << "algorithm selection (" << comm.nranks() << " ranks, float32; count as the C API takes it):\n";
  snprintf(buf, sizeof buf, "  %-14s", "count");
  os << buf;
  for (size_t c : counts) {
    snprintf(buf, sizeof buf, " %10zu", c);
    os << buf;
  }
  os << "\n";
  for (OpKind k : kinds) {
    snprintf(buf, sizeof buf, "  %-14s", opKindName(k));
    os << buf;
    for (size_t c : counts) {
      snprintf(buf, sizeof buf, " %10s", selector.select(comm, float32Args(k, c)).name());
      os << buf;
    }
    os << "\n";
  }
  // What the choice rests on for the all-reduce: every algorithm's estimate.
  os << "all-reduce cost estimates (us; '-' where the algorithm does not apply):\n";
  std::vector<std::vector<Candidate>> ranked;  // per count: every supported algorithm's estimate
  for (size_t c : counts) ranked.push_back(selector.candidates(comm, float32Args(OpKind::AllReduce, c)));
  for (const Algorithm* a : algorithmTable()) {
    if (a->kind() != OpKind::AllReduce) continue;
    snprintf(buf, sizeof buf, "  %-14s", a->name());
    os << buf;
    for (const auto& cands : ranked) {
      double us = -1;
      for (const Candidate& cand : cands)
        if (cand.algo == a) us = cand.costUs;
      if (us >= 0) snprintf(buf, sizeof buf, " %10.1f", us);
      else snprintf(buf, sizeof buf, " %10s", "-");
      os << buf;
    }
    os << "\n";
  }
}

}  // namespace coll::tools
