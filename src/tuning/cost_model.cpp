#include "tuning/cost_model.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <map>

#include "algorithms/algorithm.hpp"
#include "algorithms/patterns/binomial.hpp"
#include "algorithms/patterns/hd.hpp"
#include "algorithms/patterns/layout.hpp"
#include "algorithms/patterns/tree.hpp"
#include "core/config.hpp"
#include "core/error.hpp"

namespace coll {

COLL_PARAM(kMsgUs, "COLL_TUNE_MSG_US", "2", "cost model: microseconds of software overhead per message");
COLL_PARAM(kNetMsgUs, "COLL_TUNE_NET_MSG_US", "8",
           "cost model: kernel CPU microseconds of one inter-host message, which queue where a kernel runs more at once than it has CPUs");
COLL_PARAM(kWakeUs, "COLL_TUNE_WAKE_US", "50",
           "cost model: microseconds to wake a rank that slept through a stage of other ranks longer than 100 us");
COLL_PARAM(kOversubUs, "COLL_TUNE_OVERSUB_US", "3", "cost model: extra microseconds per message for each rank beyond one per CPU on a host");
COLL_PARAM(kReduceGBs, "COLL_TUNE_REDUCE_GBS", "4", "cost model: reduction throughput in GB/s");
COLL_PARAM(kHierSegment, "COLL_HIER_SEGMENT_BYTES", "4M",
           "hierarchical all-reduce (rings), all-gather, reduce-scatter: bytes per segment of their overlapped "
           "intra/inter-host phases (at least 4K)");
COLL_PARAM(kHierVariant, "COLL_HIER_VARIANT", "auto",
           "hierarchical all-reduce: 'rings', 'leaders' or 'auto' (the cost model's pick)");

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

CostParams CostParams::fromConfig(const Config& cfg, size_t chunkBytes) {
  CostParams p;
  p.msgUs = std::max(0.0, cfg.getDouble(kMsgUs));
  p.netMsgUs = std::max(0.0, cfg.getDouble(kNetMsgUs));
  p.wakeUs = std::max(0.0, cfg.getDouble(kWakeUs));
  p.reduceGBs = std::max(0.01, cfg.getDouble(kReduceGBs));
  p.chunkBytes = std::max<size_t>(64, chunkBytes);
  p.hierSegmentBytes = std::max<size_t>(4096, cfg.getSize(kHierSegment));
  const std::string& variant = cfg.getStr(kHierVariant);
  COLL_CHECK_ARG(variant == "auto" || variant == "rings" || variant == "leaders",
                 "COLL_HIER_VARIANT must be auto, rings or leaders (got '", variant, "')");
  p.hierVariant = variant == "rings"     ? CostParams::HierVariant::Rings
                  : variant == "leaders" ? CostParams::HierVariant::Leaders
                                         : CostParams::HierVariant::Auto;
  return p;
}

KernelGroups kernelGroups(const JobTopo& job) {
  // Ranks share CPUs when they run on one kernel, whatever host they claim to be on
  // (simulated hosts); without a kernel id, by host.
  KernelGroups g;
  g.of.assign(static_cast<size_t>(job.nranks()), 0);
  std::vector<uint64_t> keys;
  std::vector<std::vector<int>> members;
  for (int h = 0; h < job.nhosts(); ++h)
    for (int r : job.hosts()[h].ranks) {
      uint64_t k = job.placement(r).kernelId;
      uint64_t key = k ? k : (uint64_t{1} << 63) | static_cast<uint64_t>(h);
      auto it = std::find(keys.begin(), keys.end(), key);
      if (it == keys.end()) {
        keys.push_back(key);
        members.push_back({});
        it = keys.end() - 1;
      }
      g.of[static_cast<size_t>(r)] = static_cast<int>(it - keys.begin());
      members[static_cast<size_t>(it - keys.begin())].push_back(r);
    }
  for (const auto& m : members) {
    size_t cpus = 0;
    std::vector<int32_t> firsts;
    for (int r : m) {
      const RankPlacement& p = job.placement(r);
      cpus = std::max<size_t>(cpus, p.cpus);
      if (p.firstCpu >= 0 && std::find(firsts.begin(), firsts.end(), p.firstCpu) == firsts.end())
        firsts.push_back(p.firstCpu);
    }
    g.ranks.push_back(static_cast<int>(m.size()));
    g.cpus.push_back(static_cast<double>(std::max(cpus, firsts.size())));
  }
  return g;
}

double oversubscription(const JobTopo& job) {
  KernelGroups g = kernelGroups(job);
  double worst = 1.0;
  for (size_t k = 0; k < g.cpus.size(); ++k)
    if (g.cpus[k] > 0) worst = std::max(worst, g.ranks[k] / g.cpus[k]);
  return worst;
}

CostParams CostParams::forJob(const Config& cfg, size_t chunkBytes, const JobTopo& job) {
  CostParams p = fromConfig(cfg, chunkBytes);
  const double over = oversubscription(job);
  p.oversubUs = std::max(0.0, cfg.getDouble(kOversubUs)) * (over - 1.0);
  p.msgUs += p.oversubUs;
  // Each rank gets 1/over of a core for its reductions.
  p.reduceGBs /= over;
  p.sharedCpus = over > 1.0;
  p.localInKernel = cfg.getStr("COLL_TRANSPORT") == "tcp";
  return p;
}

Hop flowsHop(const JobTopo& job, const std::vector<std::pair<int, int>>& flows, double netMsgUs,
             const KernelGroups* groups) {
  Hop h;
  if (flows.empty()) return Hop{0, 1e9};
  // Flows leaving or entering a host through its network link share it.
  std::map<int, int> out, in;
  for (auto [a, b] : flows)
    if (job.hostOf(a) != job.hostOf(b)) {
      ++out[job.hostOf(a)];
      ++in[job.hostOf(b)];
    }
  h.latUs = 0;
  for (auto [a, b] : flows) {
    RankLink l = job.link(a, b);
    double share = 1;
    if (l.cls == PathClass::Network) share = std::max(out[job.hostOf(a)], in[job.hostOf(b)]);
    h.latUs = std::max(h.latUs, l.latUs);
    h.bwGBs = std::min(h.bwGBs, std::max(1e-6, l.bwGBs) / share);
  }
  const bool localInKernel = groups && groups->localInKernel;
  if (netMsgUs > 0 && (!out.empty() || localInKernel)) {
    // Each inter-host message (and, over sockets, each intra-host one) costs its sender's
    // and its receiver's kernel CPU time (the socket calls, the protocol stack), half
    // each; kernel-bypass messages (JobTopo::kernelBypass) do not. More of them at once than a kernel has CPUs wait for each other: the stage
    // takes that much longer.
    KernelGroups own;
    if (!groups) own = kernelGroups(job);
    const KernelGroups& g = groups ? *groups : own;
    std::vector<double> ends(g.cpus.size(), 0.0);
    for (auto [a, b] : flows)
      if ((localInKernel || job.hostOf(a) != job.hostOf(b)) && !job.kernelBypass(a, b)) {
        ends[static_cast<size_t>(g.of[static_cast<size_t>(a)])] += 0.5;
        ends[static_cast<size_t>(g.of[static_cast<size_t>(b)])] += 0.5;
      }
    double queue = 0;
    for (size_t k = 0; k < ends.size(); ++k)
      if (g.cpus[k] > 0) queue = std::max(queue, ends[k] / g.cpus[k] - 1.0);
    h.latUs += netMsgUs * queue;
  }
  return h;
}

int hierSegments(size_t bytes, const CostParams& p) {
  size_t g = (bytes + p.hierSegmentBytes - 1) / p.hierSegmentBytes;
  return static_cast<int>(std::clamp<size_t>(g, 1, 256));
}

// ---- hierarchical all-reduce ----

HierModel::HierModel(const JobTopo& job, const CostParams& p) : p_(p), lay_(patterns::hierLayout(job, 0)) {
  KernelGroups groups = kernelGroups(job);
  groups.localInKernel = p.localInKernel;
  const patterns::HierLayout& lay = lay_;
  hosts_ = lay.nhosts();
  uniform_ = lay.uniform;
  std::vector<std::pair<int, int>> intra, inter, fan;
  for (int h = 0; h < hosts_; ++h) {
    const auto& row = lay.grid[h];
    local_ = std::max(local_, static_cast<int>(row.size()));
    for (size_t i = 0; row.size() > 1 && i < row.size(); ++i) intra.push_back({row[i], row[(i + 1) % row.size()]});
    for (int r : row)
      if (r != lay.leaders[h]) fan.push_back({r, lay.leaders[h]});
  }
  for (int i = 0; uniform_ && hosts_ > 1 && i < local_; ++i)
    for (int h = 0; h < hosts_; ++h) inter.push_back({lay.grid[h][i], lay.grid[(h + 1) % hosts_][i]});
  intra_ = flowsHop(job, intra, p_.netMsgUs, &groups);
  inter_ = flowsHop(job, inter, p_.netMsgUs, &groups);
  fan_ = flowsHop(job, fan, p_.netMsgUs, &groups);
  // Recursive doubling among the leaders, as groupRdAllReduce runs it.
  const int p2 = hosts_ > 0 ? static_cast<int>(std::bit_floor(static_cast<unsigned>(hosts_))) : 1;
  std::vector<std::pair<int, int>> fold;
  for (int h = p2; h < hosts_; ++h) fold.push_back({lay.leaders[h], lay.leaders[h - p2]});
  if (!fold.empty()) leaderRounds_.push_back(flowsHop(job, fold, p_.netMsgUs, &groups));
  for (int mask = 1; mask < p2; mask <<= 1) {
    std::vector<std::pair<int, int>> round;
    for (int h = 0; h < p2; ++h) round.push_back({lay.leaders[h], lay.leaders[h ^ mask]});
    leaderRounds_.push_back(flowsHop(job, round, p_.netMsgUs, &groups));
  }
  if (!fold.empty()) leaderRounds_.push_back(leaderRounds_.front());
}

double HierModel::ringsUs(size_t bytes) const {
  if (!usable() || !uniform_) return kInf;
  const double L = local_, H = hosts_, o = p_.msgUs, red = 1.0 / (p_.reduceGBs * 1e3);
  const int g = hierSegments(bytes, p_);
  const double seg = static_cast<double>(bytes) / g;
  auto chunks = [&](double b) { return std::max(1.0, std::ceil(b / p_.chunkBytes)); };
  // One segment's intra-host reduce-scatter and all-gather, and its inter-host all-reduce.
  double rs = 0, ag = 0;
  if (L > 1) {
    double blk = seg / L;
    rs = (L - 1) * (intra_.latUs + chunks(blk) * o + intra_.wire(blk) + blk * red);
    ag = (L - 1) * (intra_.latUs + chunks(blk) * o + intra_.wire(blk));
  }
  double col = seg / L, sub = col / H;
  // Across hosts the kernel moves the bytes while this rank reduces the previous chunk.
  double ar = 2 * (H - 1) * (inter_.latUs + chunks(sub) * o) + p_.overlap(2 * (H - 1) * inter_.wire(sub), (H - 1) * sub * red);
  // The intra-host ring works on segment s+1 and s-1 while segment s crosses hosts.
  if (!p_.sharedCpus) return rs + ar + ag + (g - 1) * std::max(rs + ag, ar);
  // On shared CPUs only the time the inter-host bytes spend on the link (a slow or
  // shaped network) is free for the intra-host work; the inter-host phase's own CPU work
  // (copying through the socket at intra-host speed, reducing) is not.
  const double arCpu = 2 * (H - 1) * (chunks(sub) * o + intra_.wire(sub)) + (H - 1) * sub * red;
  return rs + ar + ag + (g - 1) * std::max(rs + ag + arCpu, ar);
}

double HierModel::leadersUs(size_t bytes) const {
  if (!usable()) return kInf;
  const double s = static_cast<double>(bytes), o = p_.msgUs, red = s / (p_.reduceGBs * 1e3);
  double t = 0;
  if (local_ > 1) {
    t += fan_.latUs + (local_ - 1) * (o + fan_.wire(s) + red);  // gather and reduce at the leader
    t += fan_.latUs + (local_ - 1) * (o + fan_.wire(s));        // send the result back
  }
  double roundsUs = 0;
  for (const Hop& h : leaderRounds_) roundsUs += h.time(s) + o + red;
  // The other local ranks wait through the leaders' rounds; across a long link they fall
  // asleep, and the result has to wake them. Recursive doubling has no such stage: every
  // rank takes part in every round, and the message it waits for wakes it.
  if (local_ > 1 && roundsUs > CostParams::kSleepsAfterUs) t += p_.wakeUs;
  return t + roundsUs;
}

double HierModel::gatherScatterUs(double blk, bool reduce) const {
  if (!usable() || !uniform_) return kInf;
  const double L = local_, H = hosts_, o = p_.msgUs, red = reduce ? 1.0 / (p_.reduceGBs * 1e3) : 0;
  auto chunks = [&](double b) { return std::max(1.0, std::ceil(b / p_.chunkBytes)); };
  const int g = hierSegments(static_cast<size_t>(L * H * blk), p_);
  const double seg = blk / g, col = H * seg;
  // One segment: the ring inside the host on its columns, the ring across hosts on its
  // blocks, and the copy of all its n pieces between rank order and column order.
  double inside = 0;
  if (L > 1) inside = (L - 1) * (intra_.latUs + chunks(col) * o + p_.overlap(intra_.wire(col), col * red));
  const double across = (H - 1) * (inter_.latUs + chunks(seg) * o + p_.overlap(inter_.wire(seg), seg * red));
  const double copy = L * col / (p_.reduceGBs * 1e3);
  // While one segment crosses hosts, the next (or previous) one is worked on inside them.
  if (!p_.sharedCpus) return inside + across + copy + (g - 1) * std::max(inside + copy, across);
  // On shared CPUs only the time the bytes spend on a slow link is free for that work
  // (see ringsUs), and the crossing's own CPU work is not: the kernel copies each segment
  // out of the sender and into the receiver, each at about the speed of a copy here.
  const double acrossCpu = (H - 1) * (chunks(seg) * o + 2 * seg / (p_.reduceGBs * 1e3) + seg * red);
  return inside + across + copy + (g - 1) * std::max(inside + copy + acrossCpu, across);
}

// ---- the whole model ----

namespace {

std::vector<std::pair<int, int>> ringFlows(const std::vector<int>& order) {
  std::vector<std::pair<int, int>> f;
  for (size_t i = 0; order.size() > 1 && i < order.size(); ++i) f.push_back({order[i], order[(i + 1) % order.size()]});
  return f;
}

// Halving steps over positions mapped to ranks by `order`: masks in the given sequence.
std::vector<Hop> hdHops(const JobTopo& job, const std::vector<int>& order, const std::vector<int>& masks,
                        double netMsgUs, const KernelGroups& groups, Hop* fold, bool* folds) {
  const int n = static_cast<int>(order.size());
  patterns::HdRole role = patterns::hdRole(n, 0);
  std::vector<std::pair<int, int>> f;
  for (int i = 0; i < role.rem; ++i) f.push_back({order[2 * i + 1], order[2 * i]});
  *fold = flowsHop(job, f, netMsgUs, &groups);
  *folds = role.rem > 0;
  std::vector<Hop> hops;
  for (int m : masks) {
    std::vector<std::pair<int, int>> step;
    for (int v = 0; v < role.p2; ++v)
      step.push_back({order[patterns::hdPosOfVrank(n, v)], order[patterns::hdPosOfVrank(n, v ^ m)]});
    hops.push_back(flowsHop(job, step, netMsgUs, &groups));
  }
  return hops;
}

}  // namespace

CostModel::CostModel(const JobTopo& job, const CostParams& p) : p_(p), n_(job.nranks()), hier_(job, p) {
  KernelGroups groups = kernelGroups(job);
  groups.localInKernel = p.localInKernel;
  const int n = n_;
  ring_ = patterns::ringLayout(job);
  locality_ = patterns::localityLayout(job);
  const patterns::RingLayout& ring = ring_;
  const patterns::RingLayout& loc = locality_;
  const patterns::RingLayout ident = patterns::identityLayout(n);
  ringHop_ = flowsHop(job, ringFlows(ring.order), p_.netMsgUs, &groups);
  ringRank_ = flowsHop(job, ringFlows(ident.order), p_.netMsgUs, &groups);
  for (int i = 0; i + 1 < n; ++i)
    chainHops_.push_back(flowsHop(job, {{ring.order[i], ring.order[i + 1]}}, p_.netMsgUs, &groups));
  // Recursive doubling in rank order, as algorithms/allreduce/rd.cpp runs it.
  const int p2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  std::vector<std::pair<int, int>> fold;
  for (int r = p2; r < n; ++r) fold.push_back({r, r - p2});
  if (!fold.empty()) rdRounds_.push_back(flowsHop(job, fold, p_.netMsgUs, &groups));
  for (int mask = 1; mask < p2; mask <<= 1) {
    std::vector<std::pair<int, int>> round;
    for (int r = 0; r < p2; ++r) round.push_back({r, r ^ mask});
    rdRounds_.push_back(flowsHop(job, round, p_.netMsgUs, &groups));
  }
  // One-shot: all pairs at once. Each rank copies to its same-host peers one after the
  // other; the inter-host flows share the hosts' links.
  std::vector<std::pair<int, int>> all, net;
  for (int a = 0; n <= kOneShotMaxRanks && a < n; ++a) {
    double perByte = 0;
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      all.push_back({a, b});
      if (job.hostOf(a) != job.hostOf(b)) net.push_back({a, b});
      else perByte += 1.0 / (std::max(1e-6, job.link(a, b).bwGBs) * 1e3);
    }
    oneshotLocalUsPerByte_ = std::max(oneshotLocalUsPerByte_, perByte);
  }
  oneshot_ = flowsHop(job, all, p_.netMsgUs, &groups);
  oneshotNet_ = flowsHop(job, net, p_.netMsgUs, &groups);
  std::vector<int> up, down;
  for (int m = 1; m < p2; m <<= 1) up.push_back(m);
  down.assign(up.rbegin(), up.rend());
  hdSteps_ = hdHops(job, loc.order, up, p_.netMsgUs, groups, &hdFold_, &hdFolds_);
  hdRankSteps_ = hdHops(job, ident.order, down, p_.netMsgUs, groups, &hdRankFold_, &hdRankFolds_);
  std::vector<std::pair<int, int>> treeEdges, rootedEdges;
  for (int t = 0; t < 2; ++t)
    for (int pos = 0; pos < n; ++pos) {
      patterns::TreeNode node = patterns::dtreeNode(n, t, pos);
      if (node.parent >= 0) treeEdges.push_back({loc.order[pos], loc.order[node.parent]});
    }
  // The rooted tree's edges, and each root-to-leaf path edge by edge (a parent's flows to
  // its two children share its link).
  std::vector<patterns::TreeNode> nodes;
  std::vector<Hop> fromParent;
  for (int pos = 0; pos < n; ++pos) nodes.push_back(patterns::rootedTreeNode(n, 0, pos));
  for (int pos = 0; pos < n; ++pos) {
    std::vector<std::pair<int, int>> kids;
    for (int c : nodes[pos].children)
      if (c >= 0) kids.push_back({loc.order[pos], loc.order[c]});
    rootedEdges.insert(rootedEdges.end(), kids.begin(), kids.end());
    fromParent.push_back(flowsHop(job, kids, p_.netMsgUs, &groups));
  }
  for (const patterns::TreeNode& leaf : nodes) {
    if (leaf.numChildren() > 0 || leaf.parent < 0) continue;
    TreePath path;
    for (const patterns::TreeNode* v = &leaf; v->parent >= 0; v = &nodes[v->parent]) {
      path.latUs += fromParent[v->parent].latUs;
      path.usPerByte += fromParent[v->parent].wire(1);
      ++path.edges;
    }
    rootedPaths_.push_back(path);
  }
  tree_ = flowsHop(job, treeEdges, p_.netMsgUs, &groups);
  rootedTree_ = flowsHop(job, rootedEdges, p_.netMsgUs, &groups);
  treeDepth_ = patterns::treeDepth(n);
  // Per chunk, a rank sends and receives two messages per tree it is not the root of (one
  // up, one down) and two per child; the busiest rank sets the pace.
  for (int pos = 0; pos < n; ++pos) {
    int msgs = 0;
    for (int t = 0; t < 2; ++t) {
      const patterns::TreeNode node = patterns::dtreeNode(n, t, pos);
      msgs += 2 * node.numChildren() + (node.parent >= 0 ? 2 : 0);
    }
    treeMsgsPerChunk_ = std::max(treeMsgsPerChunk_, msgs);
  }
  // Gather and scatter rooted at position 0; the tree's virtual ranks are positions.
  std::vector<std::pair<int, int>> fanAll, fanNet;
  for (int pos = 1; pos < n; ++pos) {
    const int a = loc.order[pos], root = loc.order[0];
    fanAll.push_back({a, root});
    if (job.hostOf(a) != job.hostOf(root)) fanNet.push_back({a, root});
    else fanLocalUsPerByte_ += 1.0 / (std::max(1e-6, job.link(a, root).bwGBs) * 1e3);
  }
  fan_ = flowsHop(job, fanAll, p_.netMsgUs, &groups);
  fanNet_ = flowsHop(job, fanNet, p_.netMsgUs, &groups);
  for (int mask = 1; mask < n; mask <<= 1) {
    std::vector<std::pair<int, int>> round;
    int most = 0;
    for (int v = mask; v < n; v += 2 * mask) {
      round.push_back({loc.order[v], loc.order[v - mask]});
      most = std::max(most, patterns::binomialSpan(n, v));
    }
    binomialRounds_.push_back({flowsHop(job, round, p_.netMsgUs, &groups), most});
  }
  for (int d = 1; d < n; d *= 2) {
    std::vector<std::pair<int, int>> step;
    for (int pos = 0; pos < n; ++pos) step.push_back({loc.order[pos], loc.order[(pos - d % n + n) % n]});
    bruckSteps_.push_back(flowsHop(job, step, p_.netMsgUs, &groups));
  }
}

size_t CostModel::chunksOf(double bytes) const {
  return static_cast<size_t>(std::max(1.0, std::ceil(bytes / p_.chunkBytes)));
}

double CostModel::estimate(OpKind kind, const std::string& algo, size_t bytes) const {
  const double s = static_cast<double>(bytes);
  if (n_ <= 1) return algo == "ring" || algo == "chain" || algo == "pairwise" || algo == "direct" ? 0 : kInf;
  switch (kind) {
    case OpKind::AllReduce: return allReduce(algo, s);
    case OpKind::Broadcast:
    case OpKind::Reduce: return rooted(kind, algo, s);
    case OpKind::AllGather:
    case OpKind::ReduceScatter:
    case OpKind::AllToAll: return gatherScatter(kind, algo, s);
    case OpKind::Gather:
    case OpKind::Scatter: return rootedBlocks(algo, s);
    default: return kInf;
  }
}

double CostModel::allReduce(const std::string& algo, double s) const {
  const double n = n_, o = p_.msgUs;
  if (algo == "ring") {
    // Pipelined: the reduction of one chunk overlaps the transfer of the next.
    double blk = s / n;
    return 2 * (n - 1) * (ringHop_.latUs + chunksOf(blk) * o) +
           p_.overlap(2 * (n - 1) * ringHop_.wire(blk), (n - 1) * reduceUs(blk));
  }
  if (algo == "rd") {
    double t = 0;
    for (size_t i = 0; i < rdRounds_.size(); ++i) t += rdRounds_[i].time(s) + o + reduceUs(s);
    return t;
  }
  if (algo == "oneshot") {
    if (n_ > kOneShotMaxRanks || n * s > kOneShotMaxTotalBytes) return kInf;
    // One stage: the n-1 messages are posted together, so a rank waits for its peers to
    // be scheduled once (one msgUs), and each further message costs only its software
    // part; then it folds the n buffers.
    const double copy = p_.overlap(oneshotLocalUsPerByte_ * s, oneshotNet_.wire(s));
    return oneshot_.latUs + o + (n - 2) * (o - p_.oversubUs) + copy + (n - 1) * reduceUs(s);
  }
  if (algo == "hd") {
    double t = hdFolds_ ? 2 * (hdFold_.time(s) + o) + reduceUs(s) : 0;
    double b = s;
    for (const Hop& h : hdSteps_) {
      b /= 2;
      // The halving step moves and reduces in pipeline chunks, the reduction of one
      // overlapping the transfer of the next; its doubling twin moves the bytes in one message.
      t += h.latUs + chunksOf(b) * o + p_.overlap(h.wire(b), reduceUs(b)) + h.time(b) + o;
    }
    return t;
  }
  if (algo == "tree") {
    // A message cost o covers one send and one receive, as on a ring step. The fill
    // carries the first chunk of each half up the tree (per level a parent takes two
    // children's chunks, reduces both and sends one on) and down (takes one, sends two);
    // the other chunks follow one per period of the busiest rank.
    const double half = s / 2, c = std::min<double>(p_.chunkBytes, half);
    const double up = tree_.latUs + 1.5 * o + tree_.wire(c) + 2 * reduceUs(c);
    const double down = tree_.latUs + 1.5 * o + 2 * tree_.wire(c);
    const double period = p_.overlap(4 * tree_.wire(c), 2 * reduceUs(c)) + treeMsgsPerChunk_ / 2.0 * o;
    return treeDepth_ * (up + down) + (chunksOf(half) - 1) * period;
  }
  if (algo == "hier") return hier_.bestUs(static_cast<size_t>(s));
  return kInf;
}

double CostModel::rooted(OpKind kind, const std::string& algo, double s) const {
  const double o = p_.msgUs, c = std::min<double>(p_.chunkBytes, s);
  const double k = chunksOf(s), red = kind == OpKind::Reduce ? reduceUs(c) : 0;
  if (algo == "chain") {
    // The first chunk crosses every edge in turn, each at its own speed (intra-host edges
    // are fast even where the network is slow); the others follow one per slowest edge.
    double fill = 0;
    for (const Hop& h : chainHops_) fill += h.latUs + o + p_.overlap(h.wire(c), red);
    return fill + (k - 1) * (o + p_.overlap(ringHop_.wire(c), red));
  }
  if (algo == "tree") {
    // The first chunk's slowest way from the root to a leaf (or back up), edge by edge;
    // the others follow one per slowest edge, each parent serving two children.
    double fill = 0;
    for (const TreePath& w : rootedPaths_) fill = std::max(fill, w.latUs + w.usPerByte * c + w.edges * (o + 2 * red));
    return fill + (k - 1) * 2 * (o + p_.overlap(rootedTree_.wire(c), red));
  }
  return kInf;
}

double CostModel::gatherScatter(OpKind kind, const std::string& algo, double blk) const {
  const double n = n_, o = p_.msgUs;
  const double red = kind == OpKind::ReduceScatter ? reduceUs(blk) : 0;
  if (algo == "ring" || algo == "pairwise") {
    const Hop& h = algo == "ring" ? ringHop_ : ringRank_;
    return (n - 1) * (h.latUs + chunksOf(blk) * o + p_.overlap(h.wire(blk), red));
  }
  if ((kind == OpKind::AllGather || kind == OpKind::ReduceScatter) && algo == "hier")
    return hier_.gatherScatterUs(blk, kind == OpKind::ReduceScatter);
  if (kind == OpKind::AllGather && algo == "rd") {
    double t = n * blk / (p_.reduceGBs * 1e3), have = 1;
    for (const Hop& h : bruckSteps_) {
      double m = std::min(have, n - have);
      t += h.time(m * blk) + o;
      have += m;
    }
    return t;
  }
  if (kind == OpKind::ReduceScatter && algo == "hd") {
    double total = n * blk, t = 0;
    if (hdRankFolds_) t += hdRankFold_.time(total) + o + reduceUs(total) + hdRankFold_.time(blk) + o;
    double b = total;
    for (const Hop& h : hdRankSteps_) {
      b /= 2;
      t += h.time(b) + o + reduceUs(b);
    }
    return t;
  }
  return kInf;
}

double CostModel::rootedBlocks(const std::string& algo, double blk) const {
  const double n = n_, o = p_.msgUs;
  if (algo == "direct") {
    // One stage: the root posts (or waits for) n - 1 messages at once, so it waits for
    // its peers to be scheduled once (one msgUs) and each further message costs only its
    // software part (as the one-shot all-reduce); it copies its same-host peers' bytes
    // while the others share its network link (fanNet_).
    return fan_.latUs + o + (n - 2) * (o - p_.oversubUs) + p_.overlap(fanLocalUsPerByte_ * blk, fanNet_.wire(blk));
  }
  if (algo == "tree") {
    // Round by round up (gather) or down (scatter) the tree, each edge one message of its
    // subtree's blocks and each round a wait for the next rank to be scheduled; the nodes
    // copy the blocks through a staging buffer on the way.
    double t = n * blk / (p_.reduceGBs * 1e3);
    for (const auto& [hop, blocks] : binomialRounds_) t += hop.time(blocks * blk) + o;
    return t;
  }
  return kInf;
}

}  // namespace coll
