// What ranks tell each other about a tensor they submitted, and what the negotiation
// decides about it. Pure data: no pointers into user memory (those stay in Entry).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collective.h"

namespace coll::engine {

enum class OpType : uint8_t {
  Allreduce = 0,
  Allgather = 1,
  Broadcast = 2,
  Alltoall = 3,
  Reducescatter = 4,
  Barrier = 5,
  Join = 6,
  AddProcessSet = 7,
  kCount = 8
};
const char* opTypeName(OpType op);

enum class CompressKind : uint8_t { None = 0, FP16 = 1, BF16 = 2, Int8 = 3, TopK = 4 };
const char* compressKindName(CompressKind k);

struct CompressionSpec {
  CompressKind kind = CompressKind::None;
  bool stochastic = true;     // int8 rounding
  bool errorFeedback = true;  // int8, topk
  int32_t blockSize = 256;    // int8
  double density = 0.01;      // topk
  bool operator==(const CompressionSpec&) const = default;
  bool usesErrorFeedback() const {
    return errorFeedback && (kind == CompressKind::Int8 || kind == CompressKind::TopK);
  }
};

// One rank's description of one request. Fields marked per-rank may differ between ranks;
// everything else must agree or the tensor fails on every rank.
struct RequestMeta {
  std::string name;
  OpType op = OpType::Allreduce;
  collDataType_t dtype = collFloat32;
  std::vector<int64_t> shape;  // allgather/alltoall: shape[0] is per-rank
  collRedOp_t redOp = collSum;
  int32_t root = 0;
  double prescale = 1.0;
  double postscale = 1.0;
  CompressionSpec compression;
  int32_t device = -1;          // -1: host memory
  std::string group;            // grouped allreduce: members wait for each other
  int32_t groupSize = 0;
  std::vector<int64_t> splits;  // alltoall, per-rank: rows sent to each rank
  std::vector<int32_t> ranks;   // add process set: member ranks

  bool operator==(const RequestMeta&) const = default;
  int64_t numElements() const;
  size_t byteSize() const;
  int64_t rowElements() const;  // elements per row of the first dimension
};

// The decision for one tensor, identical on every rank.
struct Response {
  RequestMeta meta;                  // agreed fields; per-rank fields are those of the first submitter
  bool error = false;
  collResult_t errorCode = collSuccess;
  std::string errorMessage;
  std::vector<int64_t> firstDims;    // allgather/alltoall: shape[0] of every rank
  std::vector<int64_t> splitMatrix;  // alltoall: nranks x nranks, row = sender
  std::vector<int32_t> joined;       // ranks that joined and contribute zeros
  int32_t lastJoined = -1;           // join: the last rank to join

  const std::string& name() const { return meta.name; }
};

// The request this rank would have sent for a response (for the response cache).
RequestMeta expectedLocalMeta(const Response& r, int rank);
// Only plain data collectives repeat step after step; join, process-set changes and
// errors always go through the full negotiation.
bool cacheable(const Response& r);
std::string shapeString(const std::vector<int64_t>& shape);

}  // namespace coll::engine
