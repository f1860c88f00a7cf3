// Pure rank arithmetic of the algorithms: binary, double binary and binomial trees,
// recursive halving-doubling roles and ranges, ring and hierarchical layouts.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <set>

#include "algorithms/exec.hpp"
#include "algorithms/patterns/binomial.hpp"
#include "algorithms/patterns/hd.hpp"
#include "topology/layout.hpp"
#include "algorithms/patterns/tree.hpp"
#include "base/error.hpp"

namespace coll::patterns {
namespace {

// Every position but the root has one parent that lists it as a child; heights grow
// toward the root; depths count edges from the root; each subtree is a contiguous run.
void checkTree(int n, const std::function<TreeNode(int)>& nodeOf, bool contiguous) {
  int roots = 0;
  std::vector<int> parentOf(n, -2);
  for (int p = 0; p < n; ++p) {
    TreeNode node = nodeOf(p);
    if (node.parent < 0) {
      ++roots;
      EXPECT_EQ(node.depth, 0) << "n=" << n << " root " << p;
    }
    for (int c : node.children) {
      if (c < 0) continue;
      ASSERT_GE(c, 0);
      ASSERT_LT(c, n);
      EXPECT_EQ(parentOf[c], -2) << "n=" << n << " position " << c << " has two parents";
      parentOf[c] = p;
      TreeNode child = nodeOf(c);
      EXPECT_EQ(child.parent, p) << "n=" << n << " child " << c << " of " << p;
      EXPECT_LT(child.height, node.height) << "n=" << n;
      EXPECT_EQ(child.depth, node.depth + 1) << "n=" << n;
    }
  }
  EXPECT_EQ(roots, 1) << "n=" << n;
  for (int p = 0; p < n; ++p) {
    if (nodeOf(p).parent >= 0) {
      EXPECT_EQ(parentOf[p], nodeOf(p).parent) << "n=" << n << " position " << p;
    }
  }
  if (!contiguous) return;
  // The subtree of p spans a contiguous range of positions containing p.
  for (int p = 0; p < n; ++p) {
    std::vector<int> stack{p}, members;
    while (!stack.empty()) {
      int q = stack.back();
      stack.pop_back();
      members.push_back(q);
      for (int c : nodeOf(q).children)
        if (c >= 0) stack.push_back(c);
    }
    auto [lo, hi] = std::minmax_element(members.begin(), members.end());
    EXPECT_EQ(*hi - *lo + 1, static_cast<int>(members.size())) << "n=" << n << " subtree of " << p;
  }
}

TEST(Patterns, BinaryTreeIsATreeForEverySize) {
  for (int n = 1; n <= 70; ++n) {
    checkTree(n, [n](int p) { return treeNode(n, p); }, true);
    int depth = treeDepth(n);
    EXPECT_LE(depth, std::max(1, static_cast<int>(std::ceil(std::log2(n + 1))))) << "n=" << n;
    EXPECT_LE(treeNode(n, treeRoot(n)).height + 1, treeHeightBound(n));
  }
  // A hand-checked shape: n = 5 (labels 1..5): root 4 with children 2 and 5; 2 has 1, 3.
  EXPECT_EQ(treeRoot(5), 3);
  TreeNode root = treeNode(5, 3);
  EXPECT_EQ(root.children[0], 1);
  EXPECT_EQ(root.children[1], 4);
  EXPECT_EQ(treeNode(5, 4).parent, 3);
  EXPECT_EQ(treeNode(5, 0).parent, 1);
}

TEST(Patterns, DoubleTreeSpreadsInnerNodes) {
  for (int n = 1; n <= 40; ++n)
    for (int t = 0; t < 2; ++t) {
      checkTree(n, [n, t](int p) { return dtreeNode(n, t, p); }, false);
      for (int p = 0; p < n; ++p) EXPECT_EQ(dtreeFromTree(n, t, dtreeToTree(n, t, p)), p);
    }
  // Even n: no rank is an inner node of both trees.
  for (int n = 2; n <= 40; n += 2)
    for (int p = 0; p < n; ++p) {
      bool inner0 = dtreeNode(n, 0, p).numChildren() > 0, inner1 = dtreeNode(n, 1, p).numChildren() > 0;
      EXPECT_FALSE(inner0 && inner1) << "n=" << n << " position " << p;
    }
}

TEST(Patterns, RootedTreeStartsAtTheRoot) {
  for (int n = 1; n <= 20; ++n)
    for (int root = 0; root < n; ++root) {
      checkTree(n, [&](int p) { return rootedTreeNode(n, root, p); }, false);
      EXPECT_LT(rootedTreeNode(n, root, root).parent, 0) << "n=" << n << " root " << root;
    }
  EXPECT_THROW(rootedTreeNode(4, 4, 0), Error);
  EXPECT_THROW(treeNode(3, -1), Error);
}

// Every virtual rank but 0 has one parent that lists it as a child; a node's span is
// itself plus its children's spans, a contiguous run after it; every rank is at most
// ceil(log2 n) edges below the root. Checked by hand for 6 ranks.
TEST(Patterns, BinomialTreeForEverySize) {
  const BinomialNode six = binomialNode(6, 0);
  EXPECT_EQ(six.span, 6);
  EXPECT_EQ(six.children, (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(binomialNode(6, 4).children, (std::vector<int>{5}));
  EXPECT_EQ(binomialNode(6, 4).span, 2);
  EXPECT_EQ(binomialNode(6, 2).children, (std::vector<int>{3}));
  EXPECT_EQ(binomialNode(6, 3).parent, 2);
  for (int n = 1; n <= 70; ++n) {
    const int rounds = n == 1 ? 0 : static_cast<int>(std::ceil(std::log2(n)));
    std::vector<int> parentOf(n, -2);
    for (int v = 0; v < n; ++v)
      for (int c : binomialNode(n, v).children) {
        EXPECT_EQ(parentOf[c], -2) << "n " << n << " child " << c << " listed twice";
        parentOf[c] = v;
      }
    for (int v = 0; v < n; ++v) {
      const BinomialNode b = binomialNode(n, v);
      EXPECT_EQ(b.parent, v == 0 ? -1 : parentOf[v]) << "n " << n << " v " << v;
      int covered = v + 1;
      for (int c : b.children) {
        EXPECT_EQ(c, covered) << "n " << n << " v " << v << ": subtree not contiguous";
        covered += binomialSpan(n, c);
      }
      EXPECT_EQ(covered - v, b.span) << "n " << n << " v " << v;
      int depth = 0;
      for (int u = v; u != 0; u = binomialNode(n, u).parent) ++depth;
      EXPECT_LE(depth, rounds) << "n " << n << " v " << v;
    }
    EXPECT_EQ(binomialNode(n, 0).span, n);
  }
}

TEST(Patterns, HalvingDoublingRoles) {
  for (int n = 1; n <= 33; ++n) {
    std::set<int> vranks;
    HdRole r0 = hdRole(n, 0);
    EXPECT_EQ(r0.p2 + r0.rem, n);
    EXPECT_LE(r0.p2, n);
    EXPECT_GT(2 * r0.p2, n);
    for (int p = 0; p < n; ++p) {
      HdRole r = hdRole(n, p);
      if (r.vrank < 0) {
        ASSERT_GE(r.foldPeer, 0);
        EXPECT_EQ(hdRole(n, r.foldPeer).foldPeer, p);
        EXPECT_GE(hdRole(n, r.foldPeer).vrank, 0);
        EXPECT_EQ(std::abs(r.foldPeer - p), 1) << "fold partners are ring neighbours";
      } else {
        EXPECT_TRUE(vranks.insert(r.vrank).second);
        EXPECT_EQ(hdPosOfVrank(n, r.vrank), p);
      }
    }
    EXPECT_EQ(static_cast<int>(vranks.size()), r0.p2);
  }
  // Rank 5 of 6: p2 = 4, rem = 2, so positions 0..3 pair up and 5 is vrank 3.
  EXPECT_EQ(hdRole(6, 5).vrank, 3);
  EXPECT_EQ(hdRole(6, 3).vrank, -1);
  EXPECT_EQ(hdSteps(6), 2);
}

TEST(Patterns, HalvingRangesPartitionTheBlocks) {
  for (int p2 = 1; p2 <= 32; p2 *= 2) {
    int steps = 0;
    while ((1 << steps) < p2) ++steps;
    for (int s = 0; s <= steps; ++s) {
      std::vector<int> owners(p2, 0);
      for (int v = 0; v < p2; ++v) {
        BlockRange b = hdRangeAfter(p2, v, s);
        EXPECT_EQ(b.hi - b.lo, p2 >> s);
        // Partners at step s share the range before it and split it.
        if (s < steps) {
          BlockRange mine = hdRangeAfter(p2, v, s + 1), theirs = hdRangeAfter(p2, v ^ (1 << s), s + 1);
          EXPECT_TRUE(mine.hi == theirs.lo || theirs.hi == mine.lo);
          EXPECT_EQ(std::min(mine.lo, theirs.lo), b.lo);
        }
        if (s == steps) owners[b.lo]++;
      }
      if (s == steps) {
        for (int b = 0; b < p2; ++b) EXPECT_EQ(owners[b], 1) << "block " << b;
      }
    }
  }
}

TEST(Patterns, LayoutInvertsOrders) {
  RingLayout l = layoutOf({2, 0, 3, 1});
  EXPECT_EQ(l.pos, (std::vector<int>{1, 3, 0, 2}));
  EXPECT_EQ(l.next(3), 2);
  EXPECT_EQ(l.prev(0), 1);
  EXPECT_THROW(layoutOf({0, 0, 1}), Error);
  EXPECT_THROW(layoutOf({0, 3}), Error);
  RingLayout id = identityLayout(3);
  EXPECT_EQ(id.order, (std::vector<int>{0, 1, 2}));
}

}  // namespace
}  // namespace coll::patterns

namespace {

// Progress keeps its peers in a SmallList: inline up to N, then on the heap, in order.
TEST(SmallList, KeepsOrderAcrossTheInlineLimit) {
  coll::SmallList<int, 3> l;
  EXPECT_TRUE(l.empty());
  for (int i = 0; i < 10; ++i) {
    l.push_back(i * 7);
    ASSERT_EQ(l.size(), static_cast<size_t>(i + 1));
    for (int j = 0; j <= i; ++j) ASSERT_EQ(l[j], j * 7) << "after " << i + 1 << " pushes";
  }
  int sum = 0;
  for (int v : l) sum += v;
  EXPECT_EQ(sum, 7 * 45);
  EXPECT_NE(std::find(l.begin(), l.end(), 63), l.end());
}

}  // namespace
