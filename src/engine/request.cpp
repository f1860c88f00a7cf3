#include "engine/request.hpp"

#include <sstream>

#include "base/types.hpp"

namespace coll::engine {

const char* opTypeName(OpType op) {
  static const char* names[] = {"allreduce", "allgather", "broadcast", "alltoall",
                                "reducescatter", "barrier", "join", "add_process_set"};
  auto i = static_cast<unsigned>(op);
  return i < static_cast<unsigned>(OpType::kCount) ? names[i] : "invalid";
}

const char* compressKindName(CompressKind k) {
  static const char* names[] = {"none", "fp16", "bf16", "int8", "topk"};
  auto i = static_cast<unsigned>(k);
  return i <= static_cast<unsigned>(CompressKind::TopK) ? names[i] : "invalid";
}

int64_t RequestMeta::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

size_t RequestMeta::byteSize() const {
  return static_cast<size_t>(numElements()) * typeSize(dtype);
}

int64_t RequestMeta::rowElements() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

RequestMeta expectedLocalMeta(const Response& r, int rank) {
  RequestMeta m = r.meta;
  if (!r.firstDims.empty() && !m.shape.empty()) m.shape[0] = r.firstDims.at(rank);
  if (m.op == OpType::Alltoall && !r.splitMatrix.empty()) {
    size_t n = r.firstDims.size();
    m.splits.assign(r.splitMatrix.begin() + rank * n, r.splitMatrix.begin() + (rank + 1) * n);
  }
  return m;
}

bool cacheable(const Response& r) {
  if (r.error || !r.joined.empty()) return false;
  switch (r.meta.op) {
    case OpType::Allreduce: case OpType::Allgather: case OpType::Broadcast:
    case OpType::Alltoall: case OpType::Reducescatter: case OpType::Barrier:
      return true;
    default:
      return false;
  }
}

std::string shapeString(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? "," : "") << shape[i];
  os << "]";
  return os.str();
}

}  // namespace coll::engine
