// Binary trees over ring positions 0..n-1, for the pipelined tree algorithms.
//
// The tree is the in-order layout of a complete binary tree: label i = pos + 1 sits at
// height ctz(i), its children are i -/+ lowbit(i)/2, and labels beyond n are skipped by
// walking to the nearest existing node. Every subtree is a contiguous run of positions,
// so when positions follow the topology's ring order most tree edges stay inside a host.
//
// The double binary tree runs two such trees at once, each on half the data. The second
// tree is the first one mirrored (even n) or shifted by one position (odd n), so nearly
// every rank that is an inner node of one tree is a leaf of the other and the work of
// inner nodes is spread over all ranks.
#pragma once

#include <vector>

namespace coll::patterns {

struct TreeNode {
  int parent = -1;              // position, -1 for the root
  int children[2] = {-1, -1};   // positions, -1 where absent
  int height = 0;               // strictly greater than every child's height
  int depth = 0;                // 0 at the root, parent's depth + 1 below
  int numChildren() const { return (children[0] >= 0) + (children[1] >= 0); }
};

// Root position of the binary tree over n positions (n >= 1).
int treeRoot(int n);
// Node at position pos of the binary tree over n positions. Throws on a bad argument.
TreeNode treeNode(int n, int pos);
// Largest height of any node (the root's) plus one: an upper bound for schedules.
int treeHeightBound(int n);
// Number of edges on the longest root-to-leaf path.
int treeDepth(int n);

// The double binary tree: tree t (0 or 1) maps ring position pos to a position of the
// plain tree above, and back.
int dtreeToTree(int n, int t, int pos);
int dtreeFromTree(int n, int t, int treePos);
// Node of ring position pos in tree t, with parent and children as ring positions.
TreeNode dtreeNode(int n, int t, int pos);

// A tree rooted at ring position `rootPos` (for broadcast and reduce): the plain tree
// rotated so that its root lands on rootPos. Parent and children are ring positions.
TreeNode rootedTreeNode(int n, int rootPos, int pos);

}  // namespace coll::patterns
