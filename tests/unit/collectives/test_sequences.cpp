// Random sequences of calls, the same on every rank (one seed), each result checked
// against the reference: every collective and send/recv, blocking, nonblocking (waited
// in a random order, or polled with collTest) and inside groups, in place and not, with
// counts from 0 to 300,000 elements, on the communicator and on ones split from it, and
// bad arguments mixed in. A bad argument must be refused on every rank alike and leave
// the communicator working for the calls after it. The matrix test (test_matrix.cpp)
// covers each call alone; this one covers what calls do to the calls around them. The
// steps are in sequences.hpp (shared with tests/mp/mp_sequences.cpp), the loops over
// them in sequences_threads.hpp (shared with the InfiniBand backend's tests).
#include "sequences_threads.hpp"

using namespace testing_coll;
using namespace testing_coll::seq;

namespace {

class LeftEarly : public ::testing::TestWithParam<const char*> {};

TEST_P(LeftEarly, WhatTheRankSentBeforeLeavingArrives) {
  checkLeftEarly({{"COLL_TRANSPORT", GetParam()}});
}

INSTANTIATE_TEST_SUITE_P(Transports, LeftEarly, ::testing::Values("shm", "tcp", "net"));

TEST(Sequences, TwoRanks) { runSequence(2, 1, 500); }
TEST(Sequences, ThreeRanks) { runSequence(3, 2, 500); }
TEST(Sequences, FourRanks) { runSequence(4, 3, 400); }
TEST(Sequences, ThreeRanksOverTcp) {
  runSequence(3, 4, 300, {{"COLL_TRANSPORT", "tcp"}});
}
TEST(Sequences, FourRanksOverTheNetworkPlugin) {
  runSequence(4, 5, 200, {{"COLL_TRANSPORT", "net"}});
}

}  // namespace
