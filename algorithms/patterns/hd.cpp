#include "algorithms/patterns/hd.hpp"

#include <bit>

#include "base/error.hpp"

namespace coll::patterns {

HdRole hdRole(int n, int pos) {
  COLL_CHECK_ARG(n >= 1 && pos >= 0 && pos < n, "halving-doubling: position ", pos, " is not in [0, ", n, ")");
  HdRole r;
  r.p2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  r.rem = n - r.p2;
  if (pos < 2 * r.rem) {
    r.foldPeer = pos ^ 1;
    r.vrank = pos % 2 == 0 ? pos / 2 : -1;
  } else {
    r.vrank = pos - r.rem;
  }
  return r;
}

int hdPosOfVrank(int n, int v) {
  HdRole r = hdRole(n, 0);
  COLL_CHECK_ARG(v >= 0 && v < r.p2, "halving-doubling: virtual rank ", v, " is not in [0, ", r.p2, ")");
  return v < r.rem ? 2 * v : v + r.rem;
}

int hdSteps(int n) { return std::countr_zero(static_cast<unsigned>(hdRole(n, 0).p2)); }

BlockRange hdRangeAfter(int p2, int v, int done) {
  BlockRange b{0, p2};
  for (int s = 0; s < done; ++s) {
    int mid = b.lo + (b.hi - b.lo) / 2;
    if (v & (1 << s)) b.lo = mid;
    else b.hi = mid;
  }
  return b;
}

}  // namespace coll::patterns
