// The receive side of the tcp transport reading what a peer sends: message headers
// (magic, sequence, size, call signature) and the pieces striped over its streams.
// Input: byte 0 = streams (1..3) and chunk, byte 1..2 = how many receives of which sizes
// are posted, the rest goes to the streams in turn. A receive must complete with the
// bytes the peer sent or fail with an error, never read or write out of bounds or hang.
#include <poll.h>

#include <cstring>
#include <memory>
#include <vector>

#include "base/error.hpp"
#include "base/socket.hpp"
#include "fuzz_util.hpp"
#include "transport/tcp/tcp_link.hpp"
#include "transport/tcp/tcp_wire.hpp"

using namespace coll;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const int streams = 1 + data[0] % 3;
  const size_t chunk = size_t(16) << ((data[0] >> 2) % 4);
  const int recvs = 1 + data[1] % 4;
  const size_t unit = 1 + data[2] % 64;
  data += 3;
  size -= 3;
  std::vector<std::unique_ptr<fuzz::Pipe>> pipes;
  std::vector<Socket> socks;
  for (int s = 0; s < streams; ++s) {
    pipes.push_back(std::make_unique<fuzz::Pipe>());
    socks.emplace_back(::dup(pipes.back()->fd[0]));
  }
  // The bytes go round the streams in slices of the chunk size plus a header.
  const size_t slice = chunk + sizeof(tcp::WireHeader);
  std::vector<std::vector<uint8_t>> per(streams);
  for (size_t off = 0, s = 0; off < size; off += slice, s = (s + 1) % streams)
    per[s].insert(per[s].end(), data + off, data + std::min(size, off + slice));
  for (int s = 0; s < streams; ++s) pipes[s]->feed(per[s].data(), per[s].size());
  try {
    tcp::TcpLink link(1, std::move(socks), chunk);
    std::vector<std::vector<uint8_t>> bufs(recvs);
    std::vector<Xfer> xs(recvs);
    for (int i = 0; i < recvs; ++i) {
      bufs[i].assign(unit * (i + 1), 0);
      xs[i].buf = bufs[i].data();
      xs[i].bytes = bufs[i].size();
      link.postRecv(&xs[i]);
    }
    for (int spins = 0; spins < 64 && link.pending(); ++spins)
      if (!link.progress()) link.waitActivity(0);
    for (auto& x : xs)
      if (x.done > x.bytes) abort();
  } catch (const Error&) {
  }
  return 0;
}
