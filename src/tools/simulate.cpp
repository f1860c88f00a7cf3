#include "tools/simulate.hpp"

#include <chrono>
#include <cstdio>
#include <string>

#include "algorithms/algorithm.hpp"
#include "algorithms/ring_stream.hpp"
#include "base/config.hpp"
#include "base/error.hpp"
#include "topology/job.hpp"
#include "tuning/cost_model.hpp"
#include "tuning/select.hpp"

namespace coll::tools {
namespace {

std::vector<int> hostCpus(const HostTopo& host) {
  std::vector<int> cpus;
  for (const PackageInfo& p : host.packages) cpus.insert(cpus.end(), p.cpus.begin(), p.cpus.end());
  if (cpus.empty())
    for (int c = 0; c < std::max(1, host.pus); ++c) cpus.push_back(c);
  return cpus;
}

// Local rank i of `local` on a host with these CPUs: an equal contiguous share, or all of
// them when the ranks outnumber the CPUs (as collectiverun --bind-to auto does).
std::vector<int> shareOf(const std::vector<int>& cpus, int i, int local) {
  const size_t n = cpus.size();
  if (static_cast<size_t>(local) > n) return cpus;
  return std::vector<int>(cpus.begin() + static_cast<long>(i * n / local),
                          cpus.begin() + static_cast<long>((i + 1) * n / local));
}

JobTopo simulatedJob(const HostTopo& host, const Config& cfg, int nranks, int hosts) {
  const std::vector<int> cpus = hostCpus(host);
  const bool gpus = cfg.getStr("COLL_RANK_GPU") == "local-rank" && !host.gpus.empty();
  std::vector<RankPlacement> placements;
  placements.reserve(static_cast<size_t>(nranks));
  int rank = 0;
  for (int h = 0; h < hosts; ++h) {
    const int local = nranks / hosts + (h < nranks % hosts ? 1 : 0);
    for (int i = 0; i < local; ++i, ++rank) {
      PlacementInput in;
      in.rank = rank;
      in.hostId = "sim" + std::to_string(h);
      in.hostname = "host" + std::to_string(h);
      in.pid = 100000 + rank;
      in.cpus = shareOf(cpus, i, local);
      in.gpu = gpus ? i % static_cast<int>(host.gpus.size()) : -1;
      in.tieBreak = i;
      in.kernelId = static_cast<uint64_t>(h) + 1;
      placements.push_back(makePlacement(host, in));
    }
  }
  return JobTopo(std::move(placements), LinkTable::fromConfig(cfg));
}

OpArgs float32Args(OpKind kind, size_t count) {
  OpArgs a;
  a.kind = kind;
  a.count = count;
  a.dtype = collFloat32;
  return a;
}

std::string usText(double us) {
  char buf[32];
  if (!(us < 1e300)) return "-";
  if (us < 1e4) snprintf(buf, sizeof buf, "%.1f", us);
  else if (us < 1e7) snprintf(buf, sizeof buf, "%.1fm", us / 1e3);
  else snprintf(buf, sizeof buf, "%.1fs", us / 1e6);
  return buf;
}

}  // namespace

void printSimulation(std::ostream& os, const HostTopo& host, const Config& cfg, const SimulateSpec& spec) {
  COLL_CHECK_ARG(spec.nranks >= 1 && spec.nranks <= kMaxSimulatedRanks, "--simulate: ", spec.nranks,
                 " ranks is outside [1, ", kMaxSimulatedRanks, "]");
  COLL_CHECK_ARG(spec.hosts >= 1 && spec.hosts <= spec.nranks, "--hosts: ", spec.hosts, " hosts for ", spec.nranks,
                 " ranks (it must be 1 to the number of ranks)");
  const auto t0 = std::chrono::steady_clock::now();
  const JobTopo job = simulatedJob(host, cfg, spec.nranks, spec.hosts);
  const CostModel model(job, CostParams::forJob(cfg, pipelineChunkBytes(cfg), job));
  const std::vector<size_t> counts =
      spec.counts.empty() ? std::vector<size_t>{1, 256, 8192, 65536, 1 << 20, 16 << 20, 256 << 20} : spec.counts;
  const OpKind kinds[] = {OpKind::AllReduce, OpKind::Broadcast,     OpKind::Reduce, OpKind::AllGather,
                          OpKind::ReduceScatter, OpKind::AllToAll, OpKind::Gather, OpKind::Scatter};
  char buf[96];
  os << "simulated job: " << spec.nranks << " ranks on " << spec.hosts << " hosts (" << spec.nranks / spec.hosts;
  if (spec.nranks % spec.hosts) os << "-" << spec.nranks / spec.hosts + 1;
  os << " per host), each host like " << host.hostname << " (" << host.source << ")\n";
  os << "algorithm picked and predicted time per call (float32; count as the C API takes it; us, m = ms, s = s):\n";
  snprintf(buf, sizeof buf, "  %-14s", "count");
  os << buf;
  for (size_t c : counts) {
    snprintf(buf, sizeof buf, " %16zu", c);
    os << buf;
  }
  os << "\n";
  for (OpKind k : kinds) {
    snprintf(buf, sizeof buf, "  %-14s", opKindName(k));
    os << buf;
    for (size_t c : counts) {
      const std::vector<Candidate> cands = candidatesFor(model.context(), float32Args(k, c));
      const Algorithm* pick = cheapest(cands);
      double us = 0;
      for (const Candidate& cand : cands)
        if (cand.algo == pick) us = cand.costUs;
      snprintf(buf, sizeof buf, " %16s", pick ? (std::string(pick->name()) + " " + usText(us)).c_str() : "-");
      os << buf;
    }
    os << "\n";
  }
  os << "all-reduce, every algorithm's predicted time ('-': it cannot run the call):\n";
  for (const Algorithm* a : algorithmTable()) {
    if (a->kind() != OpKind::AllReduce || a->onDevice()) continue;
    snprintf(buf, sizeof buf, "  %-14s", a->name());
    os << buf;
    for (size_t c : counts) {
      const OpArgs args = float32Args(OpKind::AllReduce, c);
      const double us = a->supports(model.context(), args) ? a->estimate(model.context(), c * sizeof(float)) : 1e308;
      snprintf(buf, sizeof buf, " %16s", usText(us).c_str());
      os << buf;
    }
    os << "\n";
  }
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  snprintf(buf, sizeof buf, "(job built and priced in %.0f ms)\n", ms);
  os << buf;
}

}  // namespace coll::tools
