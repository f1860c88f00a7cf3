// Setting up the shm links of one rank: a collective over the bootstrap in four
// all-gathers, which every rank runs even with no shm peers so the exchanges stay in step.
//
//   A  all-gather {ok, name nonce}: everyone is here (nothing exists yet, so a rank that
//      never arrives leaves nothing behind)
//   B  the lower rank of each pair creates the segment (O_EXCL, 0600) and fills its
//      side; all-gather {ok}
//   C  the higher rank opens and maps it, unlinks the name at once, checks the creator's
//      identity, fills its side and probes single-copy reads of the creator;
//      all-gather {ok}
//   D  the creator unlinks (normally gone already), checks the opener and probes
//      single-copy reads of it; all-gather {ok}
//
// A rank that fails in any phase still takes part in the remaining all-gathers with
// ok = 0, so its peers fail with collRemoteError instead of waiting for a timeout, and
// every segment name is unlinked on every path. Only a kill inside the one all-gather
// between B and C can leave a name behind.
#pragma once

#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "transport/shm/shm_segment.hpp"
#include "transport/transport.hpp"

namespace coll::shm {

struct ShmOptions {
  size_t ringBytes = 1 << 20;
  bool singleCopy = true;        // COLL_SHM_CMA != 0
  bool adaptiveCopy = true;      // COLL_SHM_CMA == auto
  uint64_t copyProbeNs = 250'000'000;  // COLL_SHM_CMA_PROBE_MS
  size_t singleCopyMin = 1 << 16;
  size_t copyChunk = 1 << 20;
  size_t stageChunk = 1 << 15;
  size_t coopMin = 1 << 18;      // COLL_SHM_COOP_MIN (0: off)
  size_t coopPiece = 1 << 17;    // COLL_SHM_COOP_PIECE
  size_t mappedPiece = 1 << 19;  // COLL_SHM_MAPPED_PIECE
};

class Connector {
 public:
  Connector(const TransportContext& ctx, const std::vector<int>& peers, const ShmOptions& opt);
  // `early`: a failure before connecting (bad settings); it is reported after the
  // all-gathers, like any other.
  std::map<int, std::unique_ptr<Link>> run(std::exception_ptr early);

 private:
  struct Pair {
    int peer;
    int side;  // ours: 0 when we are the lower rank (the creator)
    Segment seg;
  };
  struct Hello {
    uint32_t ok;
    uint32_t pid;  // the process that creates this rank's segments holds them here
    uint64_t nonce;
  };

  std::map<int, std::unique_ptr<Link>> makeLinks();
  void addPeers();
  void createSegments();
  void openSegments(const std::vector<Hello>& hello, const std::vector<uint32_t>& ok);
  void finishCreated(const std::vector<uint32_t>& ok);
  static std::vector<uint32_t> okOf(const std::vector<Hello>& hello);
  void checkPeersOk(const std::vector<uint32_t>& ok);
  void fillSide(Pair& p);
  void checkPeerSide(const Pair& p) const;
  void probe(Pair& p);
  std::vector<uint32_t> gatherOk();
  std::string segName(int lo, int hi, uint64_t nonce) const;
  int expectedPid(int peer) const;
  bool oversubscribed() const;
  template <typename F>
  void guarded(F&& f);

  const TransportContext& ctx_;
  ShmOptions opt_;
  std::vector<int> peers_;
  std::vector<Pair> pairs_;
  std::exception_ptr err_;   // the first local failure
  uint64_t nonce_ = 0;       // makes our segment names unguessable and unique
  uint64_t probeWord_ = 0;   // what peers read to test single-copy access to us
  bool loggedRefusal_ = false;
};

}  // namespace coll::shm
