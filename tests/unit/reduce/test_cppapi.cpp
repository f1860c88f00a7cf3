// The C++ API (include/collective/*.hpp): type mapping, errors as collective::Error, and
// every wrapper on real communicators (ranks as threads). Links only the public library.
#include <gtest/gtest.h>

#include <collective/collective.hpp>

#include <array>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace {

using collective::Communicator;
using collective::Op;

static_assert(collective::dataTypeOf<int8_t> == collInt8);
static_assert(collective::dataTypeOf<uint8_t> == collUint8);
static_assert(collective::dataTypeOf<int32_t> == collInt32);
static_assert(collective::dataTypeOf<uint32_t> == collUint32);
static_assert(collective::dataTypeOf<int64_t> == collInt64);
static_assert(collective::dataTypeOf<uint64_t> == collUint64);
static_assert(collective::dataTypeOf<long long> == collInt64);
static_assert(collective::dataTypeOf<float> == collFloat32);
static_assert(collective::dataTypeOf<const double> == collFloat64);
static_assert(collective::dataTypeOf<collective::half> == collFloat16);
static_assert(collective::dataTypeOf<collective::bfloat16> == collBfloat16);
static_assert(!collective::Element<bool>);
static_assert(collective::dataTypeOf<int16_t> == collInt16);
static_assert(collective::dataTypeOf<uint16_t> == collUint16);
static_assert(!collective::Element<long double>);
static_assert(!collective::Element<std::string>);
static_assert(collective::toC(Op::Sum) == collSum && collective::toC(Op::Prod) == collProd &&
              collective::toC(Op::Max) == collMax && collective::toC(Op::Min) == collMin &&
              collective::toC(Op::Avg) == collAvg && collective::toC(Op::Band) == collBand &&
              collective::toC(Op::Bor) == collBor && collective::toC(Op::Bxor) == collBxor);
static_assert(!std::is_copy_constructible_v<Communicator> &&
              std::is_nothrow_move_constructible_v<Communicator>);
static_assert(!std::is_copy_assignable_v<collective::Request> &&
              std::is_nothrow_move_assignable_v<collective::Request>);
static_assert(std::is_base_of_v<std::runtime_error, collective::Error>);

// Runs fn on n ranks (threads), each with its own Communicator; exceptions fail the test.
void onRanks(int n, const std::function<void(Communicator&)>& fn) {
  const collUniqueId id = collective::newUniqueId();
  std::vector<std::string> failures(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      try {
        Communicator comm(id, r, n);
        fn(comm);
      } catch (const std::exception& e) {
        failures[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < n; ++r) EXPECT_EQ(failures[r], "") << "rank " << r;
}

template <typename Fn>
collective::Error expectError(Fn&& fn) {
  try {
    fn();
  } catch (const collective::Error& e) {
    return e;
  }
  ADD_FAILURE() << "no collective::Error thrown";
  return collective::Error(collSuccess, "none", "none");
}

TEST(CppApi, BadSizeOrRankIsInvalidArgument) {
  const collUniqueId id{};  // never used: the arguments are rejected first
  for (auto [rank, size] : std::initializer_list<std::pair<int, int>>{{0, 0}, {3, 3}, {-1, 2}}) {
    const auto e = expectError([&, rank = rank, size = size] { Communicator c(id, rank, size); });
    EXPECT_EQ(e.code(), collInvalidArgument) << rank << "/" << size;
    EXPECT_EQ(e.detail(), collGetLastError(nullptr));  // the library's own text
    EXPECT_NE(std::string(e.what()).find("collCommInitRank"), std::string::npos) << e.what();
    EXPECT_NE(e.detail().find(size == 0 ? "nranks" : "rank"), std::string::npos) << e.detail();
  }
}

TEST(CppApi, EmptyRequestIsDone) {
  collective::Request r;
  EXPECT_FALSE(r.pending());
  EXPECT_TRUE(r.test());
  r.wait();
}

TEST(CppApi, AllReduceInPlaceAndOutOfPlace) {
  const int n = 3;
  onRanks(n, [&](Communicator& comm) {
    EXPECT_EQ(comm.size(), n);
    const int r = comm.rank();
    std::vector<float> f(1000, static_cast<float>(r + 1));
    comm.allReduce(std::span(f), Op::Sum);
    EXPECT_EQ(f[999], 6.0f);
    std::vector<int32_t> in(17, r + 1), out(17, 0);
    comm.allReduce(in, std::span(out), Op::Avg);  // (1 + 2 + 3) / 3
    EXPECT_EQ(out[16], 2);
    comm.allReduce(in, std::span(out), Op::Max);
    EXPECT_EQ(out[0], 3);
    // 16-bit floats as bit patterns: 1 + 2 + 3 = 6 (0x4600 in binary16, 0x40c0 in bf16).
    const uint16_t halfOf[] = {0x3c00, 0x4000, 0x4200};
    const uint16_t bfOf[] = {0x3f80, 0x4000, 0x4040};
    std::vector<collective::half> h(5, collective::half{halfOf[r]});
    std::vector<collective::bfloat16> b(5, collective::bfloat16{bfOf[r]});
    comm.allReduce(std::span(h));
    comm.allReduce(std::span(b));
    EXPECT_EQ(h[4].bits, 0x4600);
    EXPECT_EQ(b[4].bits, 0x40c0);
  });
}

static_assert(!std::is_copy_constructible_v<collective::PreMulSum<float>> &&
              std::is_nothrow_move_constructible_v<collective::PreMulSum<float>>);

// Each rank's input times its own scalar (rank + 1), summed: with input r + 1 on rank r,
// 1 + 4 + 9 = 14 on three ranks.
TEST(CppApi, PreMulSumConvertsToOpAndDiesWithItsObject) {
  const int n = 3;
  onRanks(n, [&](Communicator& comm) {
    const int r = comm.rank();
    collective::PreMulSum scaled(comm, static_cast<float>(r + 1));  // PreMulSum<float>
    static_assert(std::is_same_v<decltype(scaled), collective::PreMulSum<float>>);
    EXPECT_GE(static_cast<int>(scaled.op()), static_cast<int>(collNumOps));
    std::vector<float> f(100, static_cast<float>(r + 1)), out(100);
    comm.allReduce(f, std::span(out), scaled);
    EXPECT_EQ(out[99], 14.0f);
    EXPECT_EQ(f[99], static_cast<float>(r + 1)) << "out of place leaves the input";
    std::vector<float> all(3 * 4, static_cast<float>(r + 1)), part(4);
    comm.ireduceScatter(all, std::span(part), scaled).wait();
    EXPECT_EQ(part[3], 14.0f);
    comm.reduce(f, std::span(out), 0, scaled);
    if (r == 0) EXPECT_EQ(out[0], 14.0f);
    // Made for float: a call on int32_t is refused by the library.
    std::vector<int32_t> ints(4);
    const auto e = expectError([&] { comm.allReduce(std::span(ints), scaled); });
    EXPECT_EQ(e.code(), collInvalidArgument);
    EXPECT_NE(e.detail().find("was made for datatype float"), std::string::npos) << e.detail();
    // Moved, the op goes with the new owner; destroyed, it is refused.
    collective::PreMulSum<float> owner(std::move(scaled));
    EXPECT_FALSE(scaled);
    const Op op = owner;
    owner.destroy();
    owner.destroy();  // a no-op once destroyed
    EXPECT_EQ(expectError([&] { comm.allReduce(std::span(f), op); }).code(), collInvalidUsage);
    collective::PreMulSum<int64_t> i64(comm, -2);
    std::vector<int64_t> v(3, r);
    comm.allReduce(std::span(v), i64);  // -2 * (0 + 1 + 2)
    EXPECT_EQ(v[2], -6);
  });
}

TEST(CppApi, SharedArrayOwnsCollMemAllocMemory) {
  static_assert(!std::is_copy_constructible_v<collective::SharedArray<float>> &&
                std::is_nothrow_move_constructible_v<collective::SharedArray<float>>);
  collective::SharedArray<float> a(1000);
  ASSERT_EQ(a.size(), 1000u);
  ASSERT_NE(a.data(), nullptr);
  EXPECT_EQ(a[999], 0.0f) << "zero-filled";
  const float* p = a.data();
  collective::SharedArray<float> b(std::move(a));
  EXPECT_EQ(b.data(), p);
  EXPECT_EQ(a.data(), nullptr);
  EXPECT_EQ(a.size(), 0u);
  collective::SharedArray<float> empty(0);
  EXPECT_EQ(empty.data(), nullptr);
  b = std::move(empty);  // frees the old memory
  EXPECT_EQ(b.size(), 0u);
  try {
    collective::SharedArray<double> huge(size_t{1} << 61);
    FAIL() << "2^61 doubles were allocated";
  } catch (const collective::Error& e) {
    EXPECT_EQ(e.code(), collInvalidArgument) << e.what();
  }
  // Used as a collective's buffer, like any other span.
  onRanks(2, [&](Communicator& comm) {
    collective::SharedArray<int32_t> v(257);
    for (auto& x : v) x = comm.rank() + 1;
    comm.allReduce(v.span(), Op::Sum);
    EXPECT_EQ(v[0], 3);
    EXPECT_EQ(v[256], 3);
  });
}

TEST(CppApi, RootedAndGatheringCollectives) {
  const int n = 3;
  onRanks(n, [&](Communicator& comm) {
    const int r = comm.rank();
    std::vector<double> v(8, r == 1 ? 42.0 : 0.0);
    comm.broadcast(std::span(v), 1);
    EXPECT_EQ(v[7], 42.0);

    std::vector<int64_t> mine(4, r + 10), total(r == 2 ? 4 : 0);
    comm.reduce(mine, std::span(total), 2, Op::Prod);
    if (r == 2) {
      EXPECT_EQ(total[3], 10 * 11 * 12);
    }

    std::vector<uint8_t> all(2 * n, 0);
    const std::array<uint8_t, 2> part{static_cast<uint8_t>(r), static_cast<uint8_t>(r * 2)};
    comm.allGather(part, std::span(all));
    EXPECT_EQ(all, (std::vector<uint8_t>{0, 0, 1, 2, 2, 4}));

    std::vector<uint32_t> whole(2 * n), got(2);
    std::iota(whole.begin(), whole.end(), 0u);  // every rank the same: sums are 3x
    comm.reduceScatter(whole, std::span(got));
    EXPECT_EQ(got, (std::vector<uint32_t>{3u * (2 * r), 3u * (2 * r + 1)}));

    std::vector<int8_t> send(n), recv(n, -1);
    for (int p = 0; p < n; ++p) send[p] = static_cast<int8_t>(10 * r + p);  // block p to rank p
    comm.allToAll(send, std::span(recv));
    for (int p = 0; p < n; ++p) EXPECT_EQ(recv[p], 10 * p + r);

    // Gather to rank 1 (the others pass an empty span), then scatter it back from there.
    std::vector<int32_t> gathered(r == 1 ? 2 * n : 0, -1), back(2, -1);
    const std::array<int32_t, 2> pair{r, 100 + r};
    comm.gather(pair, std::span(gathered), 1);
    if (r == 1) {
      EXPECT_EQ(gathered, (std::vector<int32_t>{0, 100, 1, 101, 2, 102}));
    }
    comm.scatter(gathered, std::span(back), 1);
    EXPECT_EQ(back, (std::vector<int32_t>{r, 100 + r}));
    comm.barrier();
  });
}

TEST(CppApi, PointToPointAndNonblocking) {
  const int n = 3;
  onRanks(n, [&](Communicator& comm) {
    const int r = comm.rank(), next = (r + 1) % n, prev = (r + n - 1) % n;
    std::vector<float> out(100, static_cast<float>(r)), in(100, -1.0f);
    {
      collective::Group group;  // both directions at once cannot deadlock
      comm.send(std::span(out), next);
      comm.recv(std::span(in), prev);
      group.end();
    }
    EXPECT_EQ(in[99], static_cast<float>(prev));

    std::vector<int32_t> a(1000, r), b(1000, 1);
    auto ra = comm.iallReduce(std::span(a), Op::Sum);
    auto rb = comm.iallReduce(std::span(b), Op::Sum);
    while (!ra.test()) std::this_thread::yield();
    EXPECT_FALSE(ra.pending());
    rb.wait();
    EXPECT_EQ(a[0], 0 + 1 + 2);
    EXPECT_EQ(b[999], n);

    int64_t token = r * 7, got = -1;
    // Send first: nonblocking operations on a communicator run in issue order.
    auto rs = comm.isend(std::span(&token, 1), next);
    auto rr = comm.irecv(std::span(&got, 1), prev);
    rs.wait();
    rr.wait();
    EXPECT_EQ(got, prev * 7);
    std::vector<float> all(n);
    const float mine = static_cast<float>(r);
    comm.iallGather(std::span(&mine, 1), std::span(all)).wait();
    EXPECT_EQ(all[2], 2.0f);
    std::vector<float> atZero(r == 0 ? n : 0), one(1, -1.0f);
    comm.igather(std::span(&mine, 1), std::span(atZero), 0).wait();
    if (r == 0) {
      EXPECT_EQ(atZero, all);
    }
    comm.iscatter(atZero, std::span(one), 0).wait();
    EXPECT_EQ(one[0], mine);
    // ibroadcast is in place: every rank ends with the root's values.
    std::vector<int16_t> fromTwo(5, static_cast<int16_t>(r == 2 ? 40 + r : -1));
    comm.ibroadcast(std::span(fromTwo), 2).wait();
    EXPECT_EQ(fromTwo, std::vector<int16_t>(5, 42));
    comm.ibarrier().wait();
  });
}

TEST(CppApi, SplitGivesOptionalCommunicators) {
  const int n = 4;
  onRanks(n, [&](Communicator& comm) {
    const int r = comm.rank();
    auto sub = comm.split(r == 3 ? Communicator::kNoColor : r % 2, -r);
    if (r == 3) {
      EXPECT_FALSE(sub.has_value());
    } else if (sub) {
      EXPECT_EQ(sub->size(), r % 2 == 0 ? 2 : 1);
      EXPECT_EQ(sub->rank(), r == 0 ? 1 : 0);  // key -r: higher old rank first
      std::vector<int32_t> v(3, r);
      sub->allReduce(std::span(v));
      EXPECT_EQ(v[0], r % 2 == 0 ? 2 : 1);
      Communicator moved = std::move(*sub);
      EXPECT_FALSE(static_cast<bool>(*sub));
      EXPECT_TRUE(static_cast<bool>(moved));
    } else {
      ADD_FAILURE() << "rank " << r << " got no communicator";
    }
    comm.barrier();  // nobody destroys the parent while others still use it
  });
}

TEST(CppApi, ArgumentErrorsThrowOnEveryRank) {
  const int n = 2;
  onRanks(n, [&](Communicator& comm) {
    std::vector<float> small(3), big(5);
    // Rejected by the wrapper: sizes that do not match.
    auto e = expectError([&] { comm.allReduce(small, std::span(big)); });
    EXPECT_EQ(e.code(), collInvalidArgument);
    EXPECT_NE(e.detail().find("3"), std::string::npos) << e.detail();
    e = expectError([&] { comm.allGather(small, std::span(big)); });
    EXPECT_EQ(e.code(), collInvalidArgument);
    e = expectError([&] { comm.allToAll(small, std::span(small)); });  // 3 is not 2 blocks
    EXPECT_EQ(e.code(), collInvalidArgument);
    // On the root only: the root's span must hold size() blocks.
    if (comm.rank() == 0) {
      e = expectError([&] { comm.gather(small, std::span(big), 0); });
      EXPECT_EQ(e.code(), collInvalidArgument);
      EXPECT_NE(e.detail().find("expected size() x 3"), std::string::npos) << e.detail();
      e = expectError([&] { comm.scatter(big, std::span(small), 0); });
      EXPECT_EQ(e.code(), collInvalidArgument);
    }
    e = expectError([&] { comm.gather(small, std::span(big), 2); });  // no rank 2
    EXPECT_EQ(e.code(), collInvalidArgument);
    EXPECT_NE(e.detail().find("root 2"), std::string::npos) << e.detail();
    // Rejected by the library, text from collGetLastError(comm).
    e = expectError([&] { comm.broadcast(std::span(small), 5); });
    EXPECT_EQ(e.code(), collInvalidArgument);
    EXPECT_NE(e.detail().find("root"), std::string::npos) << e.detail();
    comm.barrier();  // still usable afterwards
  });
}

TEST(CppApi, AbortEmptiesTheCommunicator) {
  onRanks(2, [&](Communicator& comm) {
    comm.barrier();
    comm.abort();
    EXPECT_FALSE(static_cast<bool>(comm));
    std::vector<float> v(4);
    const auto e = expectError([&] { comm.allReduce(std::span(v)); });
    EXPECT_NE(e.code(), collSuccess);
  });
}

}  // namespace
