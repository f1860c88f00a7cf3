// The unique id a rank gets from outside (a file, an environment variable, MPI): decode
// must reject anything that is not an id, and an id that decodes must encode back to the
// same bytes. The first input byte chooses whether the checksum is made right (so the
// fuzzer gets past it to the address fields).
#include <cstring>

#include "bootstrap/bootstrap.hpp"
#include "bootstrap/handshake.hpp"
#include "base/error.hpp"
#include "base/sha256.hpp"

using namespace coll;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  collUniqueId id;
  memset(&id, 0, sizeof id);
  memcpy(id.internal, data + 1, std::min(size - 1, sizeof id.internal));
  if (data[0] & 1) {  // a right checksum over the first 72 bytes
    uint8_t digest[32];
    sha256(id.internal, 72, digest);
    memcpy(reinterpret_cast<uint8_t*>(id.internal) + 72, digest, 4);
  }
  try {
    UniqueIdData d = UniqueIdData::decode(id);
    collUniqueId again = d.encode();
    UniqueIdData d2 = UniqueIdData::decode(again);
    if (memcmp(d.secret, d2.secret, kSecretBytes) != 0 || d.jobNonce != d2.jobNonce ||
        addrToString(d.root) != addrToString(d2.root))
      abort();  // an id does not survive encode(decode(id))
  } catch (const Error&) {
  }
  return 0;
}
