// Rank arithmetic of recursive halving/doubling over any number of participants.
//
// p2 is the largest power of two <= n and rem = n - p2. The first 2*rem positions pair
// up: the odd one of each pair folds its data into the even one and sits out, then gets
// the result back; everybody else takes part directly. Pairs are neighbours in ring
// order, so the fold stays on the fastest links. The p2 participants have "virtual ranks"
// 0..p2-1 and exchange with vrank ^ mask.
#pragma once

namespace coll::patterns {

struct HdRole {
  int p2 = 1;
  int rem = 0;
  int vrank = -1;       // -1: this position folds into foldPeer and sits out
  int foldPeer = -1;    // the position this one folds with, -1 if none
};

// The role of ring position pos among n (n >= 1).
HdRole hdRole(int n, int pos);
// The ring position that plays virtual rank v (0 <= v < p2).
int hdPosOfVrank(int n, int v);
// log2(p2): number of halving (and doubling) steps.
int hdSteps(int n);

// Recursive halving with masks 1, 2, 4, ...: before step s (mask 1 << s) a vrank owns a
// range of p2 >> s block indices; it keeps the lower half when bit s of vrank is clear.
struct BlockRange {
  int lo = 0;
  int hi = 0;  // exclusive
};
// The block range vrank v owns after `done` halving steps (done = 0: all p2 blocks).
BlockRange hdRangeAfter(int p2, int v, int done);

}  // namespace coll::patterns
