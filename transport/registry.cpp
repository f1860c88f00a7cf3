#include <string>

#include "transport/transport.hpp"

namespace coll {

std::unique_ptr<Transport> makeTcpTransport();
std::unique_ptr<Transport> makeShmTransport();

std::unique_ptr<Transport> makeTransport(const std::string& name) {
  if (name == "tcp") return makeTcpTransport();
  if (name == "shm") return makeShmTransport();
  return nullptr;
}

}  // namespace coll
