// Figures that several algorithms price themselves with, built once per job from the
// cost primitives (CostContext::figures<T>()): the hops of their stages over the
// communicator's layouts. Figures only one algorithm uses live in its own file.
#pragma once

#include <utility>
#include <vector>

#include "cost/context.hpp"

namespace coll {

// Rings and chains: along the ring order (the ring and chain algorithms follow it) and in
// rank order (the pairwise all-to-all's first step).
struct RingHops {
  explicit RingHops(const CostContext& c);
  Hop ring;                // one step of the ring-order ring
  Hop rankRing;            // one step of the rank-order ring
  std::vector<Hop> chain;  // each edge of a chain along the ring order, alone
};

// The broadcast/reduce tree rooted at locality position 0: all its edges at once, and
// each root-to-leaf path edge by edge (a parent's flows to its two children share its link).
struct RootedTreeHops {
  explicit RootedTreeHops(const CostContext& c);
  struct Path {
    double latUs = 0, usPerByte = 0;  // summed over its edges
    int edges = 0;
  };
  Hop edges;
  std::vector<Path> paths;
};

// Gather and scatter straight between the root (locality position 0) and every rank: all
// flows at once, their inter-host part alone, and the root's copies of its same-host
// peers' blocks one after the other (us per byte).
struct FanHops {
  explicit FanHops(const CostContext& c);
  Hop all;
  Hop net;
  double localUsPerByte = 0;
};

// Gather and scatter along a binomial tree over locality positions: per round, its edges
// and the most blocks one of them carries.
struct BinomialHops {
  explicit BinomialHops(const CostContext& c);
  std::vector<std::pair<Hop, int>> rounds;
};

// Estimates shared by the algorithms of two collectives (microseconds).
// A chain along the ring order, broadcast or (reduce) reduce, of s bytes.
double chainEstimate(const CostContext& c, double s, bool reduce);
// The rooted tree, broadcast or (reduce) reduce, of s bytes.
double rootedTreeEstimate(const CostContext& c, double s, bool reduce);
// n-1 ring steps of one block each, over `h` (all-gather, reduce-scatter, all-to-all).
double ringStepsEstimate(const CostContext& c, const Hop& h, double blk, bool reduce);
// Gather or scatter straight between the root and every rank (FanHops), and along the
// binomial tree (BinomialHops), of one rank's block.
double fanEstimate(const CostContext& c, double blk);
double binomialEstimate(const CostContext& c, double blk);

// Halving steps over positions mapped to ranks by `order`, with the masks in the given
// sequence; *fold: the first step of the ranks beyond the largest power of two, *folds
// whether there are any.
std::vector<Hop> halvingHops(const CostContext& c, const std::vector<int>& order, const std::vector<int>& masks,
                             Hop* fold, bool* folds);

}  // namespace coll
