#include "algorithms/cost_figures.hpp"

#include <algorithm>

#include "algorithms/patterns/binomial.hpp"
#include "algorithms/patterns/hd.hpp"
#include "algorithms/patterns/tree.hpp"

namespace coll {

RingHops::RingHops(const CostContext& c) {
  const std::vector<int>& order = c.layouts().ring.order;
  ring = c.stage(CostContext::ringFlows(order));
  rankRing = c.stage(CostContext::ringFlows(patterns::identityLayout(c.nranks()).order));
  for (int i = 0; i + 1 < c.nranks(); ++i) chain.push_back(c.stage({{order[i], order[i + 1]}}));
}

RootedTreeHops::RootedTreeHops(const CostContext& c) {
  const int n = c.nranks();
  const std::vector<int>& loc = c.layouts().locality.order;
  std::vector<patterns::TreeNode> nodes;
  std::vector<Hop> fromParent;
  std::vector<std::pair<int, int>> all;
  for (int pos = 0; pos < n; ++pos) nodes.push_back(patterns::rootedTreeNode(n, 0, pos));
  for (int pos = 0; pos < n; ++pos) {
    std::vector<std::pair<int, int>> kids;
    for (int k : nodes[pos].children)
      if (k >= 0) kids.push_back({loc[pos], loc[k]});
    all.insert(all.end(), kids.begin(), kids.end());
    fromParent.push_back(c.stage(kids));
  }
  for (const patterns::TreeNode& leaf : nodes) {
    if (leaf.numChildren() > 0 || leaf.parent < 0) continue;
    Path path;
    for (const patterns::TreeNode* v = &leaf; v->parent >= 0; v = &nodes[v->parent]) {
      path.latUs += fromParent[v->parent].latUs;
      path.usPerByte += fromParent[v->parent].wire(1);
      ++path.edges;
    }
    paths.push_back(path);
  }
  edges = c.stage(all);
}

FanHops::FanHops(const CostContext& c) {
  const JobTopo& job = c.job();
  const std::vector<int>& loc = c.layouts().locality.order;
  std::vector<std::pair<int, int>> fanAll, fanNet;
  for (int pos = 1; pos < c.nranks(); ++pos) {
    const int a = loc[pos], root = loc[0];
    fanAll.push_back({a, root});
    if (job.hostOf(a) != job.hostOf(root)) fanNet.push_back({a, root});
    else localUsPerByte += 1.0 / (std::max(1e-6, job.link(a, root).bwGBs) * 1e3);
  }
  all = c.stage(fanAll);
  net = c.stage(fanNet);
}

BinomialHops::BinomialHops(const CostContext& c) {
  const int n = c.nranks();
  const std::vector<int>& loc = c.layouts().locality.order;
  for (int mask = 1; mask < n; mask <<= 1) {
    std::vector<std::pair<int, int>> round;
    int most = 0;
    for (int v = mask; v < n; v += 2 * mask) {
      round.push_back({loc[v], loc[v - mask]});
      most = std::max(most, patterns::binomialSpan(n, v));
    }
    rounds.push_back({c.stage(round), most});
  }
}

double chainEstimate(const CostContext& c, double s, bool reduce) {
  const CostParams& p = c.params();
  const double o = p.msgUs, ch = std::min<double>(p.chunkBytes, s);
  const double k = c.chunksOf(s), red = reduce ? c.reduceUs(ch) : 0;
  const RingHops& hops = c.figures<RingHops>();
  // The first chunk crosses every edge in turn, each at its own speed (intra-host edges
  // are fast even where the network is slow); the others follow one per slowest edge.
  double fill = 0;
  for (const Hop& h : hops.chain) fill += h.latUs + o + p.overlap(h.wire(ch), red);
  return fill + (k - 1) * (o + p.overlap(hops.ring.wire(ch), red));
}

double rootedTreeEstimate(const CostContext& c, double s, bool reduce) {
  const CostParams& p = c.params();
  const double o = p.msgUs, ch = std::min<double>(p.chunkBytes, s);
  const double k = c.chunksOf(s), red = reduce ? c.reduceUs(ch) : 0;
  const RootedTreeHops& tree = c.figures<RootedTreeHops>();
  // The first chunk's slowest way from the root to a leaf (or back up), edge by edge;
  // the others follow one per slowest edge, each parent serving two children.
  double fill = 0;
  for (const RootedTreeHops::Path& w : tree.paths)
    fill = std::max(fill, w.latUs + w.usPerByte * ch + w.edges * (o + 2 * red));
  return fill + (k - 1) * 2 * (o + p.overlap(tree.edges.wire(ch), red));
}

double ringStepsEstimate(const CostContext& c, const Hop& h, double blk, bool reduce) {
  const double n = c.nranks(), o = c.params().msgUs, red = reduce ? c.reduceUs(blk) : 0;
  return (n - 1) * (h.latUs + c.chunksOf(blk) * o + c.params().overlap(h.wire(blk), red));
}

double fanEstimate(const CostContext& c, double blk) {
  const CostParams& p = c.params();
  const double n = c.nranks(), o = p.msgUs;
  const FanHops& fan = c.figures<FanHops>();
  // One stage: the root posts (or waits for) n - 1 messages at once, so it waits for its
  // peers to be scheduled once (one msgUs) and each further message costs only its
  // software part (as the one-shot all-reduce); it copies its same-host peers' bytes
  // while the others share its network link.
  return fan.all.latUs + o + (n - 2) * (o - p.oversubUs) + p.overlap(fan.localUsPerByte * blk, fan.net.wire(blk));
}

double binomialEstimate(const CostContext& c, double blk) {
  // Round by round up (gather) or down (scatter) the tree, each edge one message of its
  // subtree's blocks and each round a wait for the next rank to be scheduled; the nodes
  // copy the blocks through a staging buffer on the way.
  double t = c.nranks() * blk / (c.params().reduceGBs * 1e3);
  for (const auto& [hop, blocks] : c.figures<BinomialHops>().rounds) t += hop.time(blocks * blk) + c.params().msgUs;
  return t;
}

std::vector<Hop> halvingHops(const CostContext& c, const std::vector<int>& order, const std::vector<int>& masks,
                             Hop* fold, bool* folds) {
  const int n = static_cast<int>(order.size());
  patterns::HdRole role = patterns::hdRole(n, 0);
  std::vector<std::pair<int, int>> f;
  for (int i = 0; i < role.rem; ++i) f.push_back({order[2 * i + 1], order[2 * i]});
  *fold = c.stage(f);
  *folds = role.rem > 0;
  std::vector<Hop> hops;
  for (int m : masks) {
    std::vector<std::pair<int, int>> step;
    for (int v = 0; v < role.p2; ++v)
      step.push_back({order[patterns::hdPosOfVrank(n, v)], order[patterns::hdPosOfVrank(n, v ^ m)]});
    hops.push_back(c.stage(step));
  }
  return hops;
}

}  // namespace coll
