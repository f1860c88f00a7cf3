// What the rendezvous root and its ranks read from each other after the handshake:
// length-prefixed frames (FrameReader, from a socket) and their payloads (the rank's
// hello, the peer table, failure and error notices, contributions), as both sides decode
// them. Input: byte 0 picks the job size the frames are bounded by, the rest is the
// stream.
#include <cstring>

#include "bootstrap/protocol.hpp"
#include "base/error.hpp"
#include "fuzz_util.hpp"

using namespace coll;

namespace {

void decodePayload(bs::MsgType t, const std::vector<uint8_t>& p, int nranks) {
  try {
    bs::Reader r(p.data(), p.size(), "fuzz");
    switch (t) {
      case bs::MsgType::Welcome: (void)bs::decodePeers(p.data(), p.size(), nranks); break;
      case bs::MsgType::Failure:
      case bs::MsgType::Error: r.u32(); (void)r.str(bs::kMaxText); break;
      case bs::MsgType::Abort:
      case bs::MsgType::Waiting: (void)r.str(bs::kMaxText); break;
      case bs::MsgType::Contribute: r.u32(); (void)r.bytes(r.left()); break;
      default: break;
    }
  } catch (const Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int nranks = 1 + data[0] % 9;
  // The same bytes as a rank's hello (the root decodes it from the handshake).
  try {
    std::vector<uint8_t> hello(data + 1, data + size);
    bs::RankHello h = bs::decodeHello(hello);
    if (bs::decodeHello(bs::encodeHello(h)).info.hostname != h.info.hostname) abort();
  } catch (const Error&) {
  }
  fuzz::Pipe pipe;
  pipe.feed(data + 1, size - 1);
  bs::FrameReader in;
  for (int frames = 0; frames < 1000; ++frames) {
    auto st = in.read(pipe.fd[0], nranks);
    if (st != bs::FrameReader::Status::Complete) break;
    if (in.payload().size() > bs::maxPayload(in.type(), nranks)) abort();
    decodePayload(in.type(), in.payload(), nranks);
    in.reset();
  }
  return 0;
}
