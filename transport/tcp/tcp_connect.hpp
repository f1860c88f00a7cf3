// Connection setup of the TCP transport: address exchange, connecting to higher ranks,
// accepting (and authenticating) lower ones. Kept apart from the data path in tcp_link.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "base/socket.hpp"
#include "transport/transport.hpp"

namespace coll::tcp {

struct StreamOptions {
  int streams = 1;        // sockets per peer this rank asks for
  size_t chunk = 0;       // largest piece this rank asks for
  int bufferBytes = 0;    // SO_SNDBUF/SO_RCVBUF; 0 leaves the kernel's autotuning
  std::string ifname;     // COLL_SOCKET_IFNAME
};

constexpr uint32_t kRecordMagic = 0x54435041u;  // "TCPA"

// One rank's contribution to the address exchange (fixed size: allGather wants equal
// sizes). Visible for tests that play a hostile client.
struct ListenRecord {
  uint32_t magic;
  uint32_t streams;
  uint64_t chunk;
  sockaddr_storage addr;  // ss_family 0: this rank listens for nobody
};

// What a pair of ranks settles on: both sides take the smaller of the two requests, so
// the striping rule is the same at both ends even when their environments differ.
inline int settledStreams(const StreamOptions& mine, const ListenRecord& theirs) {
  return std::min<int>(mine.streams, static_cast<int>(theirs.streams));
}
inline size_t settledChunk(const StreamOptions& mine, const ListenRecord& theirs) {
  return std::min<size_t>(mine.chunk, theirs.chunk);
}

// The hello each stream's client sends inside the authenticated handshake: its rank,
// which of how many streams this connection is, and the communicator's tag.
struct StreamHello {
  uint32_t rank;
  uint32_t stream;
  uint32_t streams;
  uint32_t tagLen;
};
std::vector<uint8_t> makeStreamHello(int rank, int stream, int streams, const std::string& tag);
// False for a hello whose size disagrees with the tag length it announces.
bool parseStreamHello(const std::vector<uint8_t>& bytes, StreamHello* hello, std::string* tag);

struct PeerStreams {
  std::vector<Socket> socks;  // in stream order, non-blocking, TCP_NODELAY
  size_t chunk = 0;
};

// Connects to a peer's listener, which has been up since the address exchange: a refused
// connection means the peer has gone, so attempts run in short slices between which a
// failure reported by `bootstrap` (may be null) ends them with collRemoteError.
Socket dialPeer(const sockaddr_storage& addr, const Deadline& deadline, Bootstrap* bootstrap, int rank, int peer);

// Collective over ctx.bootstrap (one allGather, also with no peers).
std::map<int, PeerStreams> connectStreams(const TransportContext& ctx, const std::vector<int>& peers,
                                          const StreamOptions& opt);

}  // namespace coll::tcp
