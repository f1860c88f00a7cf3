// The C++ API as an application sees it once installed: <collective/collective.hpp> from
// the installed include directory, linked with pkg-config's flags.
#include <collective/collective.hpp>

#include <cstdio>
#include <vector>

int main() {
  collUniqueId id;
  if (collGetUniqueId(&id) != collSuccess) return 1;
  collective::Communicator comm(id, 0, 1);
  std::vector<int> v{1, 2, 3};
  comm.allReduce(std::span(v), collective::Op::Sum);
  if (v[2] != 3) return 1;
  std::printf("C++ consumer: OK (%d ranks)\n", comm.size());
  return 0;
}
