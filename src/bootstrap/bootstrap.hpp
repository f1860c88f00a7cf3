// Bootstrap: how the ranks of a communicator find each other.
//
// A rendezvous root (a thread in the process that made the unique id, or in rank 0 under
// a launcher) accepts one TCP connection per rank. Each connection starts with the magic,
// the protocol version and proof of the job secret; anything else is dropped with a
// warning. The root then relays small all-gathers, barriers and abort notices for the
// lifetime of the communicator, which also makes it the failure detector: a rank whose
// connection drops is reported to every other rank.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "base/config.hpp"
#include "collective.h"

namespace coll {

class Config;

constexpr uint32_t kIdMagic = 0x434f4c4cu;  // "COLL"
constexpr uint32_t kProtocolVersion = 2;  // 2: link messages carry call signatures
constexpr size_t kSecretBytes = 32;

// The decoded form of a collUniqueId.
struct UniqueIdData {
  uint32_t magic = kIdMagic;
  uint32_t version = kProtocolVersion;
  uint8_t secret[kSecretBytes] = {};
  sockaddr_storage root{};   // where the rendezvous root listens
  uint64_t jobNonce = 0;     // distinguishes communicators (names, logs)

  collUniqueId encode() const;
  // Throws collInvalidArgument when the id is not one of ours (bad magic, version...).
  static UniqueIdData decode(const collUniqueId& id);
};

struct PeerInfo {
  std::string hostId;  // hostname + boot id, or COLL_HOST_ID
  std::string hostname;
  int pid = 0;
};

// Fills `secret` from the kernel's random source.
void randomSecret(uint8_t* secret, size_t bytes);
// This host's identity: COLL_HOST_ID if set (in `cfg`; the first form reads the
// environment), else hostname + kernel boot id.
std::string localHostId(const Config& cfg);
std::string localHostId();

// Serves one job's rendezvous. Runs on its own thread until every rank has left, the
// job is aborted, or the deadline passes. Keeps itself alive (detached).
class RendezvousRoot {
 public:
  // Listens on `addr` (port 0 picks one); returns the address actually bound (a wildcard
  // address stays a wildcard: advertise a reachable one in the id).
  // timeoutSec bounds how long the job may take to form; once formed, the root serves
  // until every rank has left or failed.
  // COLL_BOOTSTRAP_HANDSHAKE_TIMEOUT bounds how long a new connection may take to prove
  // the secret.
  // nranks == 0 (collGetUniqueId does not know the size): the root learns it from the
  // first valid hello and rejects later hellos that disagree.
  static sockaddr_storage start(const sockaddr_storage& addr, int nranks,
                                const uint8_t* secret, double timeoutSec);
  // Serves on `listenFd`, a socket already listening on `addr` (taken over: closed when
  // the root is done), for a communicator made by collCommShrink or collCommGrow. Unlike
  // start(), a rank lost while the job forms ends the formation at once, so that the
  // ranks can try again on the same port.
  static void startOn(int listenFd, const sockaddr_storage& addr, int nranks, const uint8_t* secret,
                      double timeoutSec);
  // What every root of this process has carried so far (connections accepted, frames
  // and bytes after the handshake, headers included); for benchmarks of the bootstrap.
  struct Stats {
    uint64_t connections, framesIn, bytesIn, framesOut, bytesOut;
  };
  static Stats stats();
};

// Thread safety: calls are serialised internally (concurrent calls are safe but run one
// at a time). failureReported() never blocks on that: it may be called from any thread at
// any time, costs one non-blocking recv() (nothing once a failure is recorded), and while
// another call is running it answers from the notices seen so far.
// Every blocking call is bounded by the timeoutSec given to connect().
// Destroying a Bootstrap without close() or abort() drops the connection without a
// goodbye: the root reports this rank to every other rank as disconnected (a crash).
class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  // Connects to the root named in `id` (retrying until the deadline while it is not
  // up yet), proves the secret, and learns every rank's PeerInfo.
  // `cancel` (may be null): while it is set, waits for the root's answers end with
  // collRemoteError once it turns true; see setCancel.
  // `hostId`: this rank's host identity (localHostId).
  static std::unique_ptr<Bootstrap> connect(const UniqueIdData& id, int rank, int nranks,
                                            double timeoutSec, const std::atomic<bool>* cancel = nullptr,
                                            const std::string& hostId = localHostId());
  // Replaces the flag given to connect (null: none). A communicator made by collCommSplit
  // watches its parent's abort flag while it forms, and must stop before the parent goes.
  virtual void setCancel(const std::atomic<bool>* cancel) { (void)cancel; }

  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  virtual const std::vector<PeerInfo>& peers() const = 0;
  // Every rank contributes `bytes` bytes (same size on all ranks); returns all
  // contributions in rank order. Throws collRemoteError / collTimeout.
  virtual std::vector<uint8_t> allGather(const void* mine, size_t bytes) = 0;
  virtual void barrier() = 0;
  // Non-blocking: has the root reported a failed or aborting rank? Fills `why`.
  virtual bool failureReported(std::string* why) = 0;
  // Tells the root this rank is aborting (others get a failure report), then closes.
  virtual void abort(const std::string& why) = 0;
  // Graceful goodbye; the root ends when every rank has said it.
  virtual void close() = 0;
  // The smallest round trip to the root seen so far on this rank's connection to it, in
  // microseconds; 0 where unknown (no socket of our own, as under MPI).
  virtual double rootRttUs() const { return 0; }
};

// Reads the launcher / MPI / Slurm environment. Returns false when none is present.
// Sets rank, nranks, local rank/size and the decoded id (starting the root on rank 0
// when the environment names the root address).
struct EnvLaunch {
  int rank = -1;
  int nranks = 0;
  int localRank = -1;
  int localSize = 0;
  UniqueIdData id;
  std::string source;  // "collectiverun", "openmpi", "slurm"
};
bool detectEnvLaunch(EnvLaunch* out, double timeoutSec);

}  // namespace coll
