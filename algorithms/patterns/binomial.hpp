// Binomial trees over virtual ranks 0..n-1 (0 is the root), for gather and scatter.
//
// Virtual rank v > 0 hangs below v - lowbit(v) and heads the subtree of the contiguous
// virtual ranks [v, v + lowbit(v)) (cut at n); its children are v + 1, v + 2, v + 4, ...
// below lowbit(v). The root heads [0, n) and has a child per power of two below n. Data
// of a subtree is therefore one contiguous run of blocks in virtual-rank order, and one
// message per edge carries it: log2(n) rounds, each block crossing at most log2(n) edges.
#pragma once

#include <vector>

namespace coll::patterns {

struct BinomialNode {
  int parent = -1;            // virtual rank, -1 for the root
  int span = 1;               // virtual ranks in this node's subtree, itself first
  std::vector<int> children;  // virtual ranks, nearest (smallest subtree) first
};

// The node of virtual rank v (0 <= v < n, n >= 1).
inline BinomialNode binomialNode(int n, int v) {
  BinomialNode b;
  const int low = v == 0 ? 0 : (v & -v);
  if (v > 0) b.parent = v - low;
  // The subtree holds v + m for every m below lowbit(v) (every m below n at the root).
  long reach = v == 0 ? n : static_cast<long>(v) + low;
  if (reach > n) reach = n;
  b.span = static_cast<int>(reach - v);
  for (long m = 1; v + m < reach && (v == 0 || m < low); m <<= 1) b.children.push_back(static_cast<int>(v + m));
  return b;
}

// Blocks in the subtree of child c of a node (the child's own span).
inline int binomialSpan(int n, int c) { return binomialNode(n, c).span; }

// Whether virtual ranks c .. c + span - 1 are consecutive ranks, in order (rankOf maps a
// virtual rank to its rank): then their blocks sit together, in order, in a buffer of
// blocks by rank.
template <typename RankOf>
bool consecutiveRanks(RankOf rankOf, int c, int span) {
  for (int i = 1; i < span; ++i)
    if (rankOf(c + i) != rankOf(c) + i) return false;
  return true;
}

}  // namespace coll::patterns
