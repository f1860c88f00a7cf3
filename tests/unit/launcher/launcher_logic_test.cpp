// The pure parts of collectiverun: option parsing, rank placement, the environment
// each rank gets, shell quoting and output tagging.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "base/error.hpp"
#include "launcher/options.hpp"
#include "launcher/output.hpp"
#include "launcher/placement.hpp"
#include "launcher/rankenv.hpp"
#include "launcher/spawn.hpp"

namespace coll::launcher {
namespace {

Options parse(std::vector<std::string> args) { return parseOptions(args, "ssh -T"); }

bool usageError(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const Error& e) {
    return e.code() == collInvalidArgument;
  }
  return false;
}

TEST(LauncherOptions, ParsesEveryOption) {
  Options o = parse({"-np", "6", "-H", "a:2,b", "--host=[::1]:3", "-x", "FOO", "-x", "BAR=1=2",
                     "--timeout", "2.5", "--no-tag-output", "--ssh", "ssh -p 22", "--",
                     "prog", "-np", "x"});
  EXPECT_EQ(o.np, 6);
  ASSERT_EQ(o.hosts.size(), 3u);
  EXPECT_EQ(o.hosts[0].name, "a");
  EXPECT_EQ(o.hosts[0].slots, 2);
  EXPECT_EQ(o.hosts[1].name, "b");
  EXPECT_EQ(o.hosts[1].slots, 1);
  EXPECT_EQ(o.hosts[2].name, "::1");
  EXPECT_EQ(o.hosts[2].slots, 3);
  ASSERT_EQ(o.exports.size(), 2u);
  EXPECT_EQ(o.exports[0].name, "FOO");
  EXPECT_FALSE(o.exports[0].value.has_value());
  EXPECT_EQ(o.exports[1].name, "BAR");
  EXPECT_EQ(o.exports[1].value.value(), "1=2");
  EXPECT_DOUBLE_EQ(o.timeoutSec, 2.5);
  EXPECT_FALSE(o.tagOutput);
  EXPECT_EQ(o.sshCommand, (std::vector<std::string>{"ssh", "-p", "22"}));
  EXPECT_EQ(o.program, (std::vector<std::string>{"prog", "-np", "x"}));
}

TEST(LauncherOptions, ProgramArgumentsAreNotOptions) {
  Options o = parse({"-n", "2", "sh", "-c", "--timeout"});
  EXPECT_EQ(o.np, 2);
  EXPECT_TRUE(o.tagOutput);
  EXPECT_EQ(o.sshCommand, (std::vector<std::string>{"ssh", "-T"}));
  EXPECT_EQ(o.program, (std::vector<std::string>{"sh", "-c", "--timeout"}));
}

TEST(LauncherOptions, RejectsMisuse) {
  EXPECT_TRUE(usageError({"prog"}));                          // no -np
  EXPECT_TRUE(usageError({"-np", "0", "prog"}));
  EXPECT_TRUE(usageError({"-np", "-3", "prog"}));
  EXPECT_TRUE(usageError({"-np", "two", "prog"}));
  EXPECT_TRUE(usageError({"-np", "2x", "prog"}));
  EXPECT_TRUE(usageError({"-np"}));                           // no value
  EXPECT_TRUE(usageError({"-np", "2"}));                      // no program
  EXPECT_TRUE(usageError({"-np", "2", "--"}));
  EXPECT_TRUE(usageError({"-np", "2", "--frobnicate", "prog"}));
  EXPECT_TRUE(usageError({"-np", "3", "-H", "a:1,b:1", "prog"}));  // 2 slots < 3
  EXPECT_TRUE(usageError({"-np", "1", "-H", "a:0", "prog"}));
  EXPECT_TRUE(usageError({"-np", "1", "-H", "a,,b", "prog"}));
  EXPECT_TRUE(usageError({"-np", "1", "-H", "-oProxyCommand=x", "prog"}));
  EXPECT_TRUE(usageError({"-np", "1", "-H", "fe80::1", "prog"}));  // unbracketed v6
  EXPECT_TRUE(usageError({"-np", "1", "-x", "1BAD", "prog"}));
  EXPECT_TRUE(usageError({"-np", "1", "--timeout", "0", "prog"}));
  EXPECT_TRUE(usageError({"-np", "1", "--timeout", "soon", "prog"}));
  EXPECT_FALSE(usageError({"-np", "3", "-H", "a:1,b:2", "prog"}));
  EXPECT_TRUE(parse({"--help"}).help);
}

TEST(LauncherBinding, SharesOfTheLauncherCpus) {
  const std::vector<int> two = {0, 1}, eight = {0, 1, 2, 3, 4, 5, 6, 7}, odd = {3, 5, 9};
  EXPECT_EQ(bindingFor("auto", 0, 2, two), std::vector<int>{0});
  EXPECT_EQ(bindingFor("auto", 1, 2, two), std::vector<int>{1});
  EXPECT_EQ(bindingFor("auto", 1, 2, eight), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(bindingFor("auto", 1, 3, eight), (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(bindingFor("auto", 2, 3, odd), std::vector<int>{9});
  EXPECT_TRUE(bindingFor("auto", 0, 1, two).empty()) << "a single rank keeps every CPU";
  EXPECT_TRUE(bindingFor("auto", 2, 3, two).empty()) << "more ranks than CPUs: unbound";
  EXPECT_EQ(bindingFor("core", 2, 3, two), std::vector<int>{0}) << "core: round robin";
  EXPECT_TRUE(bindingFor("none", 0, 2, two).empty());
  EXPECT_TRUE(bindingFor("auto", 0, 2, {}).empty());
  // Every CPU to exactly one rank when there are enough.
  std::vector<int> all;
  for (int r = 0; r < 3; ++r)
    for (int c : bindingFor("auto", r, 3, eight)) all.push_back(c);
  EXPECT_EQ(all, eight);
  EXPECT_EQ(parse({"-np", "2", "--bind-to", "none", "prog"}).bindTo, "none");
  EXPECT_EQ(parse({"-np", "2", "prog"}).bindTo, "auto");
  EXPECT_THROW(parse({"-np", "2", "--bind-to=socket", "prog"}), coll::Error);
}

TEST(LauncherPlacement, FillsSlotsInOrder) {
  auto isLocal = [](const std::string& h) { return h == "me" || h == "localhost"; };
  auto places = placeRanks(5, {{"me", 2}, {"b", 2}, {"localhost", 3}}, isLocal);
  ASSERT_EQ(places.size(), 5u);
  std::vector<std::string> hosts;
  for (const auto& p : places) hosts.push_back(p.host);
  EXPECT_EQ(hosts, (std::vector<std::string>{"me", "me", "b", "b", "localhost"}));
  // "me" and "localhost" are the same machine: one local numbering of size 3.
  EXPECT_EQ(places[0].localRank, 0);
  EXPECT_EQ(places[1].localRank, 1);
  EXPECT_EQ(places[4].localRank, 2);
  EXPECT_EQ(places[0].localSize, 3);
  EXPECT_EQ(places[4].localSize, 3);
  EXPECT_FALSE(places[2].local);
  EXPECT_EQ(places[2].localRank, 0);
  EXPECT_EQ(places[3].localRank, 1);
  EXPECT_EQ(places[3].localSize, 2);
  for (int r = 0; r < 5; ++r) EXPECT_EQ(places[static_cast<size_t>(r)].rank, r);
}

TEST(LauncherPlacement, NoHostsMeansAllLocal) {
  auto places = placeRanks(3, {}, [](const std::string&) { return false; });
  ASSERT_EQ(places.size(), 3u);
  for (int r = 0; r < 3; ++r) {
    EXPECT_TRUE(places[static_cast<size_t>(r)].local);
    EXPECT_EQ(places[static_cast<size_t>(r)].localRank, r);
    EXPECT_EQ(places[static_cast<size_t>(r)].localSize, 3);
  }
}

TEST(LauncherPlacement, LocalHostDetection) {
  LocalIdentity me{"node7.cluster.example", {"10.1.2.3", "::1", "fe80::1"}};
  for (const char* h : {"localhost", "LOCALHOST", "127.0.0.1", "127.4.5.6", "::1",
                        "node7.cluster.example", "node7", "NODE7", "10.1.2.3", "fe80::0001"})
    EXPECT_TRUE(me.isLocal(h)) << h;
  for (const char* h : {"node8", "node7.other.example", "10.1.2.4", "128.0.0.1", "node70"})
    EXPECT_FALSE(me.isLocal(h)) << h;
  LocalIdentity shortName{"node7", {}};
  EXPECT_TRUE(shortName.isLocal("node7.cluster.example"));
  EXPECT_FALSE(shortName.isLocal("node8.cluster.example"));
}

TEST(LauncherEnv, RootHostChoice) {
  RankPlace local{0, "", true, 0, 2};
  RankPlace localNamed{0, "localhost", true, 0, 1};
  RankPlace localReal{0, "node7", true, 0, 1};
  RankPlace remote{1, "nodeB", false, 0, 1};
  EXPECT_EQ(rootHost({local, local}, "node7"), "127.0.0.1");
  EXPECT_EQ(rootHost({localNamed, remote}, "node7"), "node7");  // not "localhost"
  EXPECT_EQ(rootHost({localReal, remote}, "node7.x"), "node7");
  EXPECT_EQ(rootHost({remote, local}, "node7"), "nodeB");
}

TEST(LauncherEnv, RankVariablesAndIdentity) {
  std::vector<RankPlace> places = placeRanks(2, {}, [](const std::string&) { return true; });
  JobIdentity a = makeJobIdentity(places, "node7", nullptr);
  JobIdentity b = makeJobIdentity(places, "node7", nullptr);
  EXPECT_EQ(a.secret.size(), 64u);
  EXPECT_EQ(a.secret.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a.secret, b.secret);
  EXPECT_NE(a.jobId, b.jobId);
  EXPECT_EQ(a.rootAddr.rfind("127.0.0.1:", 0), 0u) << a.rootAddr;
  int port = std::stoi(a.rootAddr.substr(10));
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
  EXPECT_EQ(makeJobIdentity(places, "node7", "10.0.0.1:999").rootAddr, "10.0.0.1:999");
  RankPlace v6{0, "fd00::5", false, 0, 1};
  std::string v6Root = makeJobIdentity({v6}, "node7", nullptr).rootAddr;
  EXPECT_TRUE(v6Root.rfind("[fd00::5]:", 0) == 0) << v6Root;
  int v6Port = std::stoi(v6Root.substr(10));
  EXPECT_GE(v6Port, 20000);  // a remote rank 0 gets a random port below the ephemeral range
  EXPECT_LE(v6Port, 32767);
  RankPlace r1 = places[1];
  EnvList vars = rankVariables(r1, 2, a);
  EnvList want = {{"COLL_RANK", "1"},       {"COLL_SIZE", "2"},
                  {"COLL_LOCAL_RANK", "1"}, {"COLL_LOCAL_SIZE", "2"},
                  {"COLL_ROOT_ADDR", a.rootAddr}, {"COLL_JOB_SECRET", a.secret},
                  {"COLL_JOB_ID", a.jobId}};
  EXPECT_EQ(vars, want);
}

TEST(LauncherEnv, ExportsMergeAndCollVariables) {
  std::string e1 = "PATH=/bin", e2 = "FOO=from launcher", e3 = "COLL_DEBUG=INFO",
              e4 = "COLL_RANK=9", e5 = "COLL_JOB_SECRET=old";
  char* env[] = {e1.data(), e2.data(), e3.data(), e4.data(), e5.data(), nullptr};
  std::vector<std::string> missing;
  EnvList x = exportedVariables({{"FOO", {}}, {"NOPE", {}}, {"BAR", "b"}}, env, &missing);
  EXPECT_EQ(x, (EnvList{{"FOO", "from launcher"}, {"BAR", "b"}}));
  EXPECT_EQ(missing, (std::vector<std::string>{"NOPE"}));
  EXPECT_EQ(collVariables(env), (EnvList{{"COLL_DEBUG", "INFO"}}));
  auto merged = mergeEnvironment(env, {{"COLL_RANK", "1"}, {"NEW", "n"}, {"FOO", "x"}});
  EXPECT_EQ(merged, (std::vector<std::string>{"PATH=/bin", "FOO=x", "COLL_DEBUG=INFO",
                                              "COLL_RANK=1", "COLL_JOB_SECRET=old", "NEW=n"}));
}

TEST(LauncherEnv, ShellQuote) {
  EXPECT_EQ(shellQuote("plain-word_1.2/x:y=z"), "plain-word_1.2/x:y=z");
  EXPECT_EQ(shellQuote(""), "''");
  EXPECT_EQ(shellQuote("a b"), "'a b'");
  EXPECT_EQ(shellQuote("it's"), "'it'\\''s'");
  EXPECT_EQ(shellQuote("$HOME;rm -rf /"), "'$HOME;rm -rf /'");
}

TEST(LauncherEnv, RemoteCommandKeepsSecretOffTheCommandLine) {
  auto argv = remoteCommand({"ssh", "-T"}, "nodeB", "/work dir", {{"COLL_RANK", "3"}},
                            {"./prog", "a b"});
  ASSERT_EQ(argv.size(), 4u);
  EXPECT_EQ(argv[0], "ssh");
  EXPECT_EQ(argv[1], "-T");
  EXPECT_EQ(argv[2], "nodeB");
  EXPECT_EQ(argv[3].rfind("sh -c '", 0), 0u);
  EXPECT_NE(argv[3].find("COLL_RANK=3"), std::string::npos);
  EXPECT_NE(argv[3].find("read -r COLL_JOB_SECRET"), std::string::npos);
  EXPECT_NE(argv[3].find("./prog"), std::string::npos);
}

TEST(LauncherOutput, TagsCompleteLinesAndFlushesPartialOnes) {
  std::vector<std::string> got;
  LineTagger t("[3] ", [&](std::string_view s) { got.emplace_back(s); });
  t.feed("hel");
  EXPECT_TRUE(got.empty());
  t.feed("lo\nworld\n\npart");
  t.finish();
  t.finish();  // nothing left: no empty line
  EXPECT_EQ(got, (std::vector<std::string>{"[3] hello\n", "[3] world\n", "[3] \n", "[3] part\n"}));
}

TEST(LauncherOutput, SplitsOverlongLines) {
  std::vector<std::string> got;
  LineTagger t("[0] ", [&](std::string_view s) { got.emplace_back(s); });
  t.feed(std::string(LineTagger::kMaxLine + 5, 'x'));
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].size(), 4 + LineTagger::kMaxLine + 1);
  t.finish();
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1], "[0] xxxxx\n");
}

TEST(LauncherSpawn, FindProgram) {
  EXPECT_EQ(findProgram("sh", "/nonexistent:/bin:/usr/bin"), "/bin/sh");
  EXPECT_EQ(findProgram("sh", "/nonexistent"), "");
  EXPECT_EQ(findProgram("/bin/sh", nullptr), "/bin/sh");
  EXPECT_EQ(findProgram("/etc/hostname-not-there", nullptr), "");
  EXPECT_EQ(findProgram("/etc", nullptr), "");  // a directory is not a program
}

}  // namespace
}  // namespace coll::launcher
