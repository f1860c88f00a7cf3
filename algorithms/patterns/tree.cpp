#include "algorithms/patterns/tree.hpp"

#include <bit>

#include "base/error.hpp"

namespace coll::patterns {
namespace {

int lowbit(int label) { return label & -label; }

// The nearest existing node below `label` on the side given by `delta` (label +/- delta),
// or -1: a missing right child is replaced by its leftmost existing descendant.
int childLabel(int n, int label, int delta) {
  int c = label + delta;
  int step = delta < 0 ? -delta : delta;
  while (c > n) {
    step /= 2;
    if (step == 0) return -1;
    c -= step;
  }
  return c;
}

int parentLabel(int n, int label) {
  int p = label;
  do {
    int b = lowbit(p);
    p = (p & (2 * b)) ? p - b : p + b;
  } while (p > n);
  return p;
}

void checkPos(int n, int pos, const char* what) {
  COLL_CHECK_ARG(n >= 1 && pos >= 0 && pos < n, what, ": position ", pos, " is not in [0, ", n, ")");
}

}  // namespace

int treeRoot(int n) {
  COLL_CHECK_ARG(n >= 1, "tree: size ", n, " must be at least 1");
  return static_cast<int>(std::bit_floor(static_cast<unsigned>(n))) - 1;
}

TreeNode treeNode(int n, int pos) {
  checkPos(n, pos, "tree");
  const int label = pos + 1, root = treeRoot(n) + 1;
  TreeNode node;
  node.height = std::countr_zero(static_cast<unsigned>(label));
  int half = lowbit(label) / 2;
  if (half > 0) {
    int l = childLabel(n, label, -half), r = childLabel(n, label, half);
    node.children[0] = l > 0 ? l - 1 : -1;
    node.children[1] = r > 0 ? r - 1 : -1;
  }
  if (label != root) {
    node.parent = parentLabel(n, label) - 1;
    for (int p = label; p != root; p = parentLabel(n, p)) ++node.depth;
  }
  return node;
}

int treeHeightBound(int n) { return std::countr_zero(static_cast<unsigned>(treeRoot(n) + 1)) + 1; }

int treeDepth(int n) {
  int d = 0;
  for (int p = 0; p < n; ++p) d = std::max(d, treeNode(n, p).depth);
  return d;
}

int dtreeToTree(int n, int t, int pos) {
  checkPos(n, pos, "double tree");
  if (t == 0) return pos;
  return n % 2 == 0 ? n - 1 - pos : (pos + 1) % n;
}

int dtreeFromTree(int n, int t, int treePos) {
  checkPos(n, treePos, "double tree");
  if (t == 0) return treePos;
  return n % 2 == 0 ? n - 1 - treePos : (treePos + n - 1) % n;
}

namespace {
TreeNode mapNode(TreeNode node, int (*back)(int, int, int), int n, int t) {
  if (node.parent >= 0) node.parent = back(n, t, node.parent);
  for (int& c : node.children)
    if (c >= 0) c = back(n, t, c);
  return node;
}
}  // namespace

TreeNode dtreeNode(int n, int t, int pos) {
  COLL_CHECK_ARG(t == 0 || t == 1, "double tree: tree ", t, " must be 0 or 1");
  return mapNode(treeNode(n, dtreeToTree(n, t, pos)), dtreeFromTree, n, t);
}

TreeNode rootedTreeNode(int n, int rootPos, int pos) {
  checkPos(n, rootPos, "rooted tree root");
  checkPos(n, pos, "rooted tree");
  // Rotation by `shift` moves the plain tree's root onto rootPos.
  const int shift = rootPos - treeRoot(n);
  TreeNode node = treeNode(n, ((pos - shift) % n + n) % n);
  auto back = [&](int p) { return ((p + shift) % n + n) % n; };
  if (node.parent >= 0) node.parent = back(node.parent);
  for (int& c : node.children)
    if (c >= 0) c = back(c);
  return node;
}

}  // namespace coll::patterns
