// The server side of the connection handshake, as the rendezvous root and the tcp
// transport run it on every connection anyone can open: a stranger's bytes must end in
// Failed (or wait for more), never in Done, unless they prove the secret. Byte 0 chooses
// whether the fuzzer's header gets the right MAC for the challenge it was sent (so the
// hello and the proof are reached too).
#include <cstring>

#include "bootstrap/handshake.hpp"
#include "bootstrap/protocol.hpp"
#include "base/error.hpp"
#include "fuzz_util.hpp"

using namespace coll;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static const uint8_t secret[kSecretBytes] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                               17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
  const bool fixMac = data[0] & 1;
  const ConnRole role = (data[0] & 2) ? ConnRole::Tcp : ConnRole::Bootstrap;
  std::vector<uint8_t> msg(data + 1, data + size);
  fuzz::Pipe pipe;
  hs::ServerHandshake server(secret, role);
  if (server.start(pipe.fd[0]) != hs::ServerHandshake::Status::InProgress) abort();
  uint8_t challenge[hs::kChallengeBytes];
  if (::recv(pipe.fd[1], challenge, sizeof challenge, 0) != static_cast<ssize_t>(sizeof challenge)) abort();
  bool forged = false;
  if (fixMac && msg.size() >= hs::kClientHeaderBytes) {
    hs::clientMac(secret, role, challenge + 8, msg.data() + 12, msg.data() + 12 + hs::kNonceBytes);
    forged = true;
  }
  pipe.feed(msg.data(), msg.size());
  auto st = server.step(pipe.fd[0]);
  if (st == hs::ServerHandshake::Status::Done) {
    if (!forged) abort();  // in without the secret
    try {
      (void)bs::decodeHello(server.hello());
    } catch (const Error&) {
    }
    uint8_t proof[hs::kMacBytes];
    if (::recv(pipe.fd[1], proof, sizeof proof, 0) != static_cast<ssize_t>(sizeof proof)) abort();
    if (hs::isBusyProof(proof)) abort();
  }
  return 0;
}
