// SHA-256 (FIPS 180-4), for the handshake MAC and the job secret's derivations.
#pragma once

#include <cstddef>
#include <cstdint>

namespace coll {

void sha256(const void* data, size_t n, uint8_t out[32]);

}  // namespace coll
