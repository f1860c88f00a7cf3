#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common.hpp"

using perf::Coll;
using perf::Options;
using perf::parseArgs;
using perf::parseSize;
using perf::UsageError;

namespace {
Options parse(std::vector<std::string> args) { return parseArgs(args); }
}  // namespace

TEST(PerfParseSize, AcceptsPlainAndSuffixedSizes) {
  EXPECT_EQ(parseSize("8", "-b"), 8u);
  EXPECT_EQ(parseSize("0", "-b"), 0u);
  EXPECT_EQ(parseSize("64K", "-b"), 65536u);
  EXPECT_EQ(parseSize("64k", "-b"), 65536u);
  EXPECT_EQ(parseSize("128M", "-e"), 134217728u);
  EXPECT_EQ(parseSize("1G", "-e"), 1073741824u);
  EXPECT_EQ(parseSize("3g", "-e"), size_t{3} << 30);
}

TEST(PerfParseSize, RejectsGarbageNegativeAndOverflow) {
  EXPECT_THROW(parseSize("", "-b"), UsageError);
  EXPECT_THROW(parseSize("abc", "-b"), UsageError);
  EXPECT_THROW(parseSize("-5", "-b"), UsageError);
  EXPECT_THROW(parseSize("8X", "-b"), UsageError);
  EXPECT_THROW(parseSize("8KB", "-b"), UsageError);
  EXPECT_THROW(parseSize("99999999999999999999", "-b"), UsageError);
  EXPECT_THROW(parseSize("17179869184G", "-b"), UsageError);
  try {
    parseSize("12Q", "-e");
    FAIL() << "no throw";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("-e"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("12Q"), std::string::npos) << e.what();
  }
}

TEST(PerfParseArgs, Defaults) {
  Options o = parse({});
  EXPECT_EQ(o.minBytes, 8u);
  EXPECT_EQ(o.maxBytes, size_t{128} << 20);
  EXPECT_EQ(o.stepFactor, 2.0);
  EXPECT_FALSE(o.additiveSteps);
  EXPECT_EQ(o.iters, 20);
  EXPECT_EQ(o.warmup, 5);
  EXPECT_EQ(o.check, 1);
  ASSERT_EQ(o.types.size(), 1u);
  EXPECT_EQ(o.types[0], collFloat);
  ASSERT_EQ(o.ops.size(), 1u);
  EXPECT_EQ(o.ops[0], collSum);
  EXPECT_EQ(o.root, 0);
  EXPECT_FALSE(o.allRoots);
  EXPECT_EQ(o.average, perf::AvgMode::Max);
  EXPECT_EQ(o.aggIters, 1);
  EXPECT_EQ(o.cycles, 1);
}

TEST(PerfParseArgs, EveryFlagShortForm) {
  Options o = parse({"-b", "64K", "-e", "1G", "-f", "4", "-n", "3", "-w", "1", "-c", "0", "-d",
                     "half", "-o", "max", "-r", "1", "-z", "1", "-a", "2", "-m", "4", "-N", "3",
                     "-t", "1", "-g", "1"});
  EXPECT_EQ(o.minBytes, 65536u);
  EXPECT_EQ(o.maxBytes, size_t{1} << 30);
  EXPECT_EQ(o.stepFactor, 4.0);
  EXPECT_EQ(o.iters, 3);
  EXPECT_TRUE(o.itersGiven);
  EXPECT_EQ(o.warmup, 1);
  EXPECT_TRUE(o.warmupGiven);
  EXPECT_EQ(o.check, 0);
  EXPECT_EQ(o.types, std::vector<collDataType_t>{collHalf});
  EXPECT_EQ(o.ops, std::vector<collRedOp_t>{collMax});
  EXPECT_EQ(o.root, 1);
  EXPECT_EQ(o.blocking, 1);
  EXPECT_EQ(o.average, perf::AvgMode::Min);
  EXPECT_EQ(o.aggIters, 4);
  EXPECT_EQ(o.cycles, 3);
  EXPECT_TRUE(o.deviceBuffers);
}

TEST(PerfParseArgs, DeviceBuffersFlag) {
  EXPECT_FALSE(parse({}).deviceBuffers);
  EXPECT_FALSE(parse({"-g", "0"}).deviceBuffers);
  EXPECT_TRUE(parse({"-g1"}).deviceBuffers);
  EXPECT_TRUE(parse({"--ngpus=1"}).deviceBuffers);
  EXPECT_TRUE(parse({"--ngpus", "1"}).deviceBuffers);
  // One rank per process drives at most one GPU.
  EXPECT_THROW(parse({"-g", "2"}), UsageError);
  EXPECT_THROW(parse({"-g", "-1"}), UsageError);
}

TEST(PerfParseArgs, RegisterFlag) {
  EXPECT_FALSE(parse({}).sharedBuffers);
  EXPECT_FALSE(parse({"-R", "0"}).sharedBuffers);
  EXPECT_TRUE(parse({"-R", "1"}).sharedBuffers);
  EXPECT_TRUE(parse({"-R1"}).sharedBuffers);
  EXPECT_TRUE(parse({"--register", "1"}).sharedBuffers);
  EXPECT_TRUE(parse({"--register=1"}).sharedBuffers);
  EXPECT_FALSE(parse({"-R", "1", "-R", "0"}).sharedBuffers);
  // -R 1 keeps the buffers in host memory: -g 0 is fine, and so is -R 0 with -g 1.
  Options host = parse({"-R", "1", "-g", "0"});
  EXPECT_TRUE(host.sharedBuffers);
  EXPECT_FALSE(host.deviceBuffers);
  Options dev = parse({"-R", "0", "-g", "1"});
  EXPECT_FALSE(dev.sharedBuffers);
  EXPECT_TRUE(dev.deviceBuffers);
  // Short flags are case-sensitive: -r is the root.
  EXPECT_EQ(parse({"-r", "1"}).root, 1);
  EXPECT_FALSE(parse({"-r", "1"}).sharedBuffers);
}

TEST(PerfParseArgs, RegisterFlagRejectsBadValues) {
  for (const char* bad : {"2", "-1", "x", "1x", ""}) {
    try {
      parse({"-R", bad});
      ADD_FAILURE() << "-R '" << bad << "' accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("-R"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse({"--register", "2"}), UsageError);
  EXPECT_THROW(parse({"--register=x"}), UsageError);
  EXPECT_THROW(parse({"-R"}), UsageError);
}

TEST(PerfParseArgs, RegisterFlagRefusedWithDeviceBuffers) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"-R", "1", "-g", "1"}, {"-g", "1", "-R", "1"},
        {"--register=1", "--ngpus=1"}}) {
    try {
      parse(args);
      ADD_FAILURE() << "-R 1 with -g 1 accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("-R 1"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("-g 1"), std::string::npos) << e.what();
    }
  }
}

TEST(PerfParseArgs, UsageTextNamesRegister) {
  const std::string text = perf::usageText("all_gather_perf");
  EXPECT_NE(text.find("-R,--local_register <0|1>"), std::string::npos) << text;
  EXPECT_NE(text.find("collMemAlloc"), std::string::npos) << text;
}

// --native has no short form: every letter is (or may become) an nccl-tests flag.
TEST(PerfParseArgs, NativeFlag) {
  EXPECT_FALSE(parse({}).native);
  EXPECT_FALSE(parse({"--native", "0"}).native);
  EXPECT_TRUE(parse({"--native", "1"}).native);
  EXPECT_TRUE(parse({"--native=1"}).native);
  EXPECT_FALSE(parse({"--native=1", "--native=0"}).native);
  for (const char* bad : {"2", "-1", "yes", ""}) {
    try {
      parse({"--native", bad});
      ADD_FAILURE() << "--native '" << bad << "' accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("--native"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse({"--native"}), UsageError);
  // No letter stands for it; the nccl-tests letters keep their meaning.
  EXPECT_THROW(parse({"-native", "1"}), UsageError);
  const Options o = parse({"-n", "3"});
  EXPECT_EQ(o.iters, 3);
  EXPECT_FALSE(o.native);
  const std::string text = perf::usageText("gather_perf");
  EXPECT_NE(text.find("--native <0|1>"), std::string::npos) << text;
  EXPECT_NE(text.find("collGather/collScatter"), std::string::npos) << text;
}

TEST(PerfParseArgs, InlineAndLongForms) {
  Options o = parse({"-b8K", "--maxbytes=1M", "--iters", "7", "--datatype=bfloat16", "--op",
                     "avg"});
  EXPECT_EQ(o.minBytes, 8192u);
  EXPECT_EQ(o.maxBytes, size_t{1} << 20);
  EXPECT_EQ(o.iters, 7);
  EXPECT_EQ(o.types, std::vector<collDataType_t>{collBfloat16});
  EXPECT_EQ(o.ops, std::vector<collRedOp_t>{collAvg});
}

TEST(PerfParseArgs, AllTypesOpsAndRoots) {
  Options o = parse({"-d", "all", "-o", "all", "-r", "all"});
  ASSERT_EQ(o.types.size(), 12u);
  for (int t = 0; t < 12; ++t) EXPECT_EQ(o.types[t], collDataType_t(t));
  ASSERT_EQ(o.ops.size(), 10u);
  EXPECT_EQ(o.ops[4], collAvg);
  EXPECT_EQ(o.ops[7], collBxor);
  EXPECT_EQ(o.ops[8], collSumReproducible);
  EXPECT_EQ(o.ops[9], collAvgReproducible);
  EXPECT_TRUE(o.allRoots);
}

TEST(PerfParseArgs, TypeNamesRoundTrip) {
  const char* names[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64",
                         "half", "float", "double", "bfloat16", "int16", "uint16"};
  for (int t = 0; t < 12; ++t) {
    EXPECT_EQ(perf::parseType(names[t]), collDataType_t(t)) << names[t];
    EXPECT_STREQ(perf::typeName(collDataType_t(t)), names[t]);
  }
  EXPECT_EQ(perf::parseType("int"), collInt32);
  EXPECT_EQ(perf::parseType("float64"), collDouble);
  EXPECT_EQ(perf::typeBytes(collBfloat16), 2u);
  EXPECT_EQ(perf::typeBytes(collUint64), 8u);
}

TEST(PerfParseArgs, StepModeFollowsNcclTests) {
  EXPECT_TRUE(parse({"-i", "1M"}).additiveSteps);
  EXPECT_FALSE(parse({"-i", "1M", "-f", "2"}).additiveSteps);
  EXPECT_FALSE(parse({"-f", "2", "-i", "1M"}).additiveSteps);
  EXPECT_TRUE(parse({"-f", "1"}).additiveSteps);
  EXPECT_EQ(parse({"-i", "3K"}).stepBytes, 3072u);
}

TEST(PerfParseArgs, RejectsBadInput) {
  EXPECT_THROW(parse({"-x", "1"}), UsageError);
  EXPECT_THROW(parse({"--bogus=1"}), UsageError);
  EXPECT_THROW(parse({"-b"}), UsageError);
  EXPECT_THROW(parse({"-c", "-1"}), UsageError);  // -c N: N checked calls, N >= 0
  EXPECT_THROW(parse({"-n", "0"}), UsageError);
  EXPECT_THROW(parse({"-n", "3x"}), UsageError);
  EXPECT_THROW(parse({"-a", "4"}), UsageError);
  EXPECT_THROW(parse({"-d", "float128"}), UsageError);
  EXPECT_THROW(parse({"-o", "xor"}), UsageError);
  EXPECT_THROW(parse({"-r", "-1"}), UsageError);
  EXPECT_THROW(parse({"-f", "0.5"}), UsageError);
  EXPECT_THROW(parse({"-i", "0"}), UsageError);
  EXPECT_THROW(parse({"-t", "2"}), UsageError);
  EXPECT_THROW(parse({"-b", "1M", "-e", "1K"}), UsageError);
  EXPECT_TRUE(parse({"-h"}).help);
}

TEST(PerfSizeList, FactorSweepIsInclusive) {
  std::vector<size_t> s = perf::sizeList(parse({}));
  ASSERT_EQ(s.size(), 25u);  // 8 = 2^3 .. 128M = 2^27
  EXPECT_EQ(s.front(), 8u);
  EXPECT_EQ(s[1], 16u);
  EXPECT_EQ(s.back(), size_t{128} << 20);

  s = perf::sizeList(parse({"-b", "8", "-e", "64M", "-f", "4"}));
  ASSERT_EQ(s.size(), 12u);  // 8 * 4^11 = 32M; 128M is past the end
  EXPECT_EQ(s.back(), size_t{32} << 20);
}

TEST(PerfSizeList, AdditiveAndDegenerate) {
  EXPECT_EQ(perf::sizeList(parse({"-b", "1M", "-e", "4M", "-i", "1M"})),
            (std::vector<size_t>{1 << 20, 2 << 20, 3 << 20, 4 << 20}));
  EXPECT_EQ(perf::sizeList(parse({"-b", "0", "-e", "1K"})), std::vector<size_t>{0});
  EXPECT_EQ(perf::sizeList(parse({"-b", "1K", "-e", "1K"})), std::vector<size_t>{1024});
  // A factor that cannot move a small size must not loop forever.
  EXPECT_EQ(perf::sizeList(parse({"-b", "1", "-e", "8", "-f", "1.5"})),
            (std::vector<size_t>{1}));
}

TEST(PerfIters, DefaultsShrinkAboveEightMiB) {
  Options o = parse({});
  EXPECT_EQ(perf::itersForSize(o, 8 << 20).iters, 20);
  EXPECT_EQ(perf::itersForSize(o, 8 << 20).warmup, 5);
  EXPECT_EQ(perf::itersForSize(o, 16 << 20).iters, 10);
  EXPECT_EQ(perf::itersForSize(o, 16 << 20).warmup, 2);
  EXPECT_EQ(perf::itersForSize(o, size_t{128} << 20).iters, 2);
  EXPECT_EQ(perf::itersForSize(o, size_t{128} << 20).warmup, 1);
  Options given = parse({"-n", "7", "-w", "0"});
  EXPECT_EQ(perf::itersForSize(given, size_t{128} << 20).iters, 7);
  EXPECT_EQ(perf::itersForSize(given, size_t{128} << 20).warmup, 0);
}

TEST(PerfCounts, WholeBufferCollectives) {
  for (Coll c : {Coll::AllReduce, Coll::Broadcast, Coll::Reduce, Coll::SendRecv}) {
    perf::Counts k = perf::countsFor(c, 1000, 4, 3, 2);
    EXPECT_EQ(k.paramCount, 250u) << perf::collName(c);
    EXPECT_EQ(k.sendCount, 250u);
    EXPECT_EQ(k.recvCount, 250u);
    EXPECT_EQ(k.sendInplaceOffset, 0u);
    EXPECT_EQ(k.recvInplaceOffset, 0u);
  }
}

TEST(PerfCounts, SplitCollectivesRoundDownToRankMultiples) {
  perf::Counts ag = perf::countsFor(Coll::AllGather, 1000, 4, 3, 2);
  EXPECT_EQ(ag.paramCount, 83u);
  EXPECT_EQ(ag.sendCount, 83u);
  EXPECT_EQ(ag.recvCount, 249u);
  EXPECT_EQ(ag.sendInplaceOffset, 166u);
  EXPECT_EQ(ag.recvInplaceOffset, 0u);
  EXPECT_EQ(ag.printedCount(), 249u);

  perf::Counts rs = perf::countsFor(Coll::ReduceScatter, 1024, 4, 4, 1);
  EXPECT_EQ(rs.paramCount, 64u);
  EXPECT_EQ(rs.sendCount, 256u);
  EXPECT_EQ(rs.recvCount, 64u);
  EXPECT_EQ(rs.recvInplaceOffset, 64u);
  EXPECT_EQ(rs.sendInplaceOffset, 0u);

  perf::Counts a2a = perf::countsFor(Coll::AllToAll, 1024, 2, 8, 5);
  EXPECT_EQ(a2a.paramCount, 64u);
  EXPECT_EQ(a2a.sendCount, 512u);
  EXPECT_EQ(a2a.recvCount, 512u);

  EXPECT_EQ(perf::countsFor(Coll::AllGather, 8, 4, 4, 0).printedCount(), 0u);
}

TEST(PerfBusBw, NcclTestsFactors) {
  EXPECT_DOUBLE_EQ(perf::busBwFactor(Coll::AllReduce, 4), 1.5);
  EXPECT_DOUBLE_EQ(perf::busBwFactor(Coll::AllReduce, 2), 1.0);
  EXPECT_DOUBLE_EQ(perf::busBwFactor(Coll::AllReduce, 1), 0.0);
  EXPECT_DOUBLE_EQ(perf::busBwFactor(Coll::AllGather, 4), 0.75);
  EXPECT_DOUBLE_EQ(perf::busBwFactor(Coll::ReduceScatter, 2), 0.5);
  EXPECT_DOUBLE_EQ(perf::busBwFactor(Coll::AllToAll, 8), 0.875);
  EXPECT_DOUBLE_EQ(perf::busBwFactor(Coll::Broadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(perf::busBwFactor(Coll::Reduce, 3), 1.0);
  EXPECT_DOUBLE_EQ(perf::busBwFactor(Coll::SendRecv, 5), 1.0);
}

// gather_perf and hypercube_perf size like all_gather_perf (the gathered buffer, count
// per rank), scatter_perf like reduce_scatter_perf (the root's send buffer).
TEST(PerfCounts, GroupedPointToPointTools) {
  for (Coll c : {Coll::Gather, Coll::HyperCube}) {
    perf::Counts k = perf::countsFor(c, 1000, 4, 4, 3);  // 250 elements, 62 per rank
    EXPECT_EQ(k.paramCount, 62u) << perf::collName(c);
    EXPECT_EQ(k.sendCount, 62u) << perf::collName(c);
    EXPECT_EQ(k.recvCount, 248u) << perf::collName(c);
    EXPECT_EQ(k.sendInplaceOffset, 186u) << perf::collName(c);
    EXPECT_EQ(k.recvInplaceOffset, 0u) << perf::collName(c);
    EXPECT_EQ(k.printedCount(), 248u) << perf::collName(c);
  }
  perf::Counts sc = perf::countsFor(Coll::Scatter, 1000, 4, 3, 1);  // 250 elements, 83 per rank
  EXPECT_EQ(sc.paramCount, 83u);
  EXPECT_EQ(sc.sendCount, 249u);
  EXPECT_EQ(sc.recvCount, 83u);
  EXPECT_EQ(sc.sendInplaceOffset, 0u);
  EXPECT_EQ(sc.recvInplaceOffset, 83u);
  EXPECT_EQ(sc.printedCount(), 249u);
}

TEST(PerfBusBw, GroupedPointToPointTools) {
  EXPECT_DOUBLE_EQ(perf::busBwFactor(Coll::Gather, 4), 0.75);
  EXPECT_DOUBLE_EQ(perf::busBwFactor(Coll::Gather, 2), 0.5);
  EXPECT_DOUBLE_EQ(perf::busBwFactor(Coll::Scatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(perf::busBwFactor(Coll::Scatter, 3), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(perf::busBwFactor(Coll::HyperCube, 16), 0.9375);
  EXPECT_DOUBLE_EQ(perf::busBwFactor(Coll::HyperCube, 1), 0.0);
}

TEST(PerfColl, NamesRootsAndOps) {
  EXPECT_STREQ(perf::collName(Coll::Gather), "gather");
  EXPECT_STREQ(perf::collName(Coll::Scatter), "scatter");
  EXPECT_STREQ(perf::collName(Coll::HyperCube), "hypercube");
  EXPECT_TRUE(perf::collHasRoot(Coll::Gather));
  EXPECT_TRUE(perf::collHasRoot(Coll::Scatter));
  EXPECT_FALSE(perf::collHasRoot(Coll::HyperCube));
  for (Coll c : {Coll::Gather, Coll::Scatter, Coll::HyperCube})
    EXPECT_FALSE(perf::collHasOp(c)) << perf::collName(c);
}

// The grouped tools take host buffers only, and hypercube's dependent steps cannot be
// aggregated with -m; the other tools accept both.
TEST(PerfProblems, OptionsTheGroupedToolsRefuse) {
  Options device = parse({"-g", "1"});
  for (Coll c : {Coll::Gather, Coll::Scatter, Coll::HyperCube}) {
    const std::string why = perf::optionsProblem(c, device);
    EXPECT_NE(why.find("-g 1: not supported by"), std::string::npos) << why;
    EXPECT_NE(why.find(perf::collName(c)), std::string::npos) << why;
    EXPECT_EQ(perf::optionsProblem(c, parse({})), "") << perf::collName(c);
  }
  for (Coll c : {Coll::AllReduce, Coll::SendRecv, Coll::AllToAll})
    EXPECT_EQ(perf::optionsProblem(c, device), "") << perf::collName(c);
  Options agg = parse({"-m", "2"});
  EXPECT_NE(perf::optionsProblem(Coll::HyperCube, agg).find("-m 2: not supported by hypercube"),
            std::string::npos);
  EXPECT_EQ(perf::optionsProblem(Coll::Gather, agg), "");
  EXPECT_EQ(perf::optionsProblem(Coll::HyperCube, parse({"-m", "1"})), "");
}

// --native 1: gather and scatter time one library call, which takes device buffers like
// every other collective; the tools without a pattern of their own refuse it.
TEST(PerfProblems, NativeMode) {
  const Options native = parse({"--native", "1"});
  const Options nativeDevice = parse({"--native", "1", "-g", "1"});
  for (Coll c : {Coll::Gather, Coll::Scatter}) {
    EXPECT_EQ(perf::optionsProblem(c, native), "") << perf::collName(c);
    EXPECT_EQ(perf::optionsProblem(c, nativeDevice), "") << perf::collName(c);
    EXPECT_EQ(perf::optionsProblem(c, parse({"--native", "1", "-m", "2"})), "");
    // Without it the pattern's refusal stands, and names the way out.
    const std::string why = perf::optionsProblem(c, parse({"--native", "0", "-g", "1"}));
    EXPECT_NE(why.find("-g 1: not supported by"), std::string::npos) << why;
    EXPECT_NE(why.find("--native 1"), std::string::npos) << why;
  }
  for (Coll c : {Coll::AllReduce, Coll::AllGather, Coll::Broadcast, Coll::Reduce,
                 Coll::ReduceScatter, Coll::AllToAll, Coll::SendRecv, Coll::HyperCube}) {
    const std::string why = perf::optionsProblem(c, native);
    EXPECT_NE(why.find("--native 1: not supported by " + std::string(perf::collName(c))),
              std::string::npos)
        << why;
    EXPECT_EQ(perf::optionsProblem(c, parse({"--native", "0"})), "") << perf::collName(c);
  }
}

TEST(PerfProblems, HypercubeNeedsAPowerOfTwo) {
  for (int n : {1, 2, 4, 8, 64, 1024})
    EXPECT_EQ(perf::rankCountProblem(Coll::HyperCube, n), "") << n;
  for (int n : {0, 3, 5, 6, 7, 12, 1023}) {
    const std::string why = perf::rankCountProblem(Coll::HyperCube, n);
    EXPECT_NE(why.find("power-of-two number of ranks"), std::string::npos) << n << ": " << why;
    EXPECT_NE(why.find("not " + std::to_string(n)), std::string::npos) << why;
  }
  for (Coll c : {Coll::Gather, Coll::Scatter, Coll::AllGather})
    EXPECT_EQ(perf::rankCountProblem(c, 3), "") << perf::collName(c);
}

TEST(PerfParseArgs, BitwiseOpsTakeIntegerTypesOnly) {
  EXPECT_NE(perf::optionsProblem(perf::Coll::AllReduce, parse({"-o", "band", "-d", "float"})).find("bitwise"),
            std::string::npos);
  EXPECT_NE(perf::optionsProblem(perf::Coll::Reduce, parse({"-o", "bxor", "-d", "bfloat16"})).find("bitwise"),
            std::string::npos);
  EXPECT_EQ(perf::optionsProblem(perf::Coll::AllReduce, parse({"-o", "bor", "-d", "int16"})), "");
  // "-o all" keeps float types: the sweep pairs the bitwise ops with integers alone.
  EXPECT_EQ(perf::optionsProblem(perf::Coll::AllReduce, parse({"-o", "all", "-d", "all"})), "");
  EXPECT_EQ(perf::parseOp("band"), collBand);
  EXPECT_STREQ(perf::opName(collBxor), "bxor");
}

// Every flag of nccl-tests' README parses, long and short, or is refused by a message
// that names it.
TEST(PerfParseArgs, NcclTestsFlags) {
  Options o = parse({"-J", "out.json", "-I", "1", "-K", "2", "-M", "1", "-C", "1", "-S", "1",
                     "-p", "1", "-T", "30", "-u", "3", "-z", "3", "-c", "4", "-G", "0", "-D", "0",
                     "-V", "16", "-x", "0", "-y", "0"});
  EXPECT_EQ(o.outputFile, "out.json");
  EXPECT_TRUE(o.perIterTiming);
  EXPECT_EQ(o.perIterSkip, 2);
  EXPECT_TRUE(o.memoryReport);
  EXPECT_TRUE(o.reportCpuTime);
  EXPECT_TRUE(o.reportTimestamps);
  EXPECT_TRUE(o.parallelInit);
  EXPECT_EQ(o.timeoutSec, 30.0);
  EXPECT_EQ(o.unalign, 3);
  EXPECT_EQ(o.blocking, 3);
  EXPECT_EQ(o.check, 4);
  Options l = parse({"--output_file=a.JSON", "--per_iter_timing", "1", "--per_iter_skip=1",
                     "--memory=1", "--report_cputime=1", "--report_timestamps", "1",
                     "--parallel_init=1", "--timeout=5", "--unalign=1", "--local_register", "1",
                     "--cudagraph=0", "--device_implementation=0", "--device_cta_count=8",
                     "--cta_policy=0", "--stream_null=0"});
  EXPECT_EQ(l.outputFile, "a.JSON");
  EXPECT_TRUE(l.perIterTiming && l.memoryReport && l.reportCpuTime && l.reportTimestamps);
  EXPECT_TRUE(l.sharedBuffers);
  EXPECT_EQ(l.timeoutSec, 5.0);
  struct Refusal {
    std::vector<std::string> args;
    const char* named;
  };
  for (const Refusal& r : {Refusal{{"-G", "1"}, "-G 1"}, Refusal{{"--cudagraph=2"}, "--cudagraph"},
                           Refusal{{"-D", "1"}, "-D 1"}, Refusal{{"-x", "1"}, "-x 1"},
                           Refusal{{"-y", "1"}, "-y 1"}, Refusal{{"-R", "2"}, "-R 2"},
                           Refusal{{"-V", "0"}, "-V"}, Refusal{{"-J", "out.csv"}, "-J"},
                           Refusal{{"-K", "1"}, "-K 1"}, Refusal{{"-z", "4"}, "-z"},
                           Refusal{{"-T", "-1"}, "-T"}, Refusal{{"-t", "2"}, "-t"}}) {
    try {
      parse(r.args);
      ADD_FAILURE() << r.named << " was accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(r.named), std::string::npos) << e.what();
    }
  }
}
