#include "algorithms/hier_cost.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace coll {
namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}  // namespace

HierModel::HierModel(const CostContext& c) : p_(c.params()) {
  const patterns::HierLayout& lay = c.layouts().hier;
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
  intra_ = c.stage(intra);
  inter_ = c.stage(inter);
  fan_ = c.stage(fan);
  // Recursive doubling among the leaders, as groupRdAllReduce runs it.
  const int p2 = hosts_ > 0 ? static_cast<int>(std::bit_floor(static_cast<unsigned>(hosts_))) : 1;
  std::vector<std::pair<int, int>> fold;
  for (int h = p2; h < hosts_; ++h) fold.push_back({lay.leaders[h], lay.leaders[h - p2]});
  if (!fold.empty()) leaderRounds_.push_back(c.stage(fold));
  for (int mask = 1; mask < p2; mask <<= 1) {
    std::vector<std::pair<int, int>> round;
    for (int h = 0; h < p2; ++h) round.push_back({lay.leaders[h], lay.leaders[h ^ mask]});
    leaderRounds_.push_back(c.stage(round));
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

}  // namespace coll
