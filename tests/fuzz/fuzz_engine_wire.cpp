// The negotiation messages of the engine (Horovod-style front end), all-gathered from
// every rank: decodeRequests must reject what does not parse and give back what it
// decoded when encoded again.
#include "base/error.hpp"
#include "engine/wire.hpp"

using namespace coll;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    std::vector<engine::RequestMeta> reqs = engine::decodeRequests(data, size);
    std::vector<uint8_t> again = engine::encodeRequests(reqs);
    std::vector<engine::RequestMeta> back = engine::decodeRequests(again.data(), again.size());
    if (back.size() != reqs.size()) abort();
  } catch (const Error&) {
  }
  return 0;
}
