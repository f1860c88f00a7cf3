#include "topology/layout.hpp"

#include "base/error.hpp"

namespace coll::patterns {

RingLayout layoutOf(std::vector<int> order) {
  RingLayout l;
  l.pos.assign(order.size(), -1);
  for (size_t p = 0; p < order.size(); ++p) {
    int r = order[p];
    COLL_CHECK_ARG(r >= 0 && static_cast<size_t>(r) < order.size() && l.pos[r] < 0, "ring order: entry ", p,
                   " = ", r, " is out of range or repeated (", order.size(), " ranks)");
    l.pos[r] = static_cast<int>(p);
  }
  l.order = std::move(order);
  return l;
}

RingLayout ringLayout(const JobTopo& job) { return layoutOf(ringOrder(job)); }

RingLayout localityLayout(const JobTopo& job) { return layoutOf(localityOrder(job)); }

RingLayout identityLayout(int n) {
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  return layoutOf(std::move(order));
}

std::vector<int> HierLayout::column(int i) const {
  std::vector<int> out;
  out.reserve(grid.size());
  for (const auto& row : grid) out.push_back(row[i]);
  return out;
}

HierLayout hierLayout(const JobTopo& job, int rank) {
  HierLayout h;
  h.grid.resize(job.nhosts());
  for (int r : localityOrder(job)) {
    int host = job.hostOf(r);
    if (r == rank) {
      h.host = host;
      h.local = static_cast<int>(h.grid[host].size());
    }
    h.grid[host].push_back(r);
  }
  h.leaders = job.leaders();
  for (const auto& row : h.grid) h.uniform &= row.size() == h.grid[0].size();
  COLL_CHECK_ARG(h.host >= 0, "hierarchical layout: rank ", rank, " is not in the job (", job.nranks(), " ranks)");
  return h;
}

int ringCrossings(const JobTopo& job, const std::vector<int>& order) {
  int c = 0;
  for (size_t i = 0; i < order.size() && order.size() > 1; ++i)
    c += job.hostOf(order[i]) != job.hostOf(order[(i + 1) % order.size()]);
  return c;
}

}  // namespace coll::patterns
