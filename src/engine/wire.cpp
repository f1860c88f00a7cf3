#include "engine/wire.hpp"

namespace coll::engine {
namespace {
constexpr uint32_t kMagic = 0x43454e47;  // "CENG": catches a peer speaking another format
constexpr size_t kMaxNameBytes = 1 << 16;
// The fewest bytes one request takes (writeMeta with empty strings and vectors).
constexpr size_t kMinRequestBytes = 4 + 1 + 4 + 4 + 4 + 4 + 8 + 8 + 1 + 1 + 1 + 4 + 8 + 4 + 4 + 4 + 4 + 4;
}  // namespace

void ByteWriter::putString(const std::string& s) {
  put<uint32_t>(static_cast<uint32_t>(s.size()));
  buf_.insert(buf_.end(), s.begin(), s.end());
}

void ByteReader::need(size_t n) const {
  if (static_cast<size_t>(end_ - p_) < n)
    COLL_THROW(collRemoteError, "negotiation message truncated: need ", n, " bytes, have ",
               end_ - p_);
}

std::string ByteReader::getString() {
  uint32_t n = get<uint32_t>();
  if (n > kMaxNameBytes) COLL_THROW(collRemoteError, "negotiation message: string of ", n, " bytes");
  need(n);
  std::string s(reinterpret_cast<const char*>(p_), n);
  p_ += n;
  return s;
}

void writeMeta(ByteWriter& w, const RequestMeta& m) {
  w.putString(m.name);
  w.put<uint8_t>(static_cast<uint8_t>(m.op));
  w.put<int32_t>(m.dtype);
  w.putVector(m.shape);
  w.put<int32_t>(m.redOp);
  w.put<int32_t>(m.root);
  w.put<double>(m.prescale);
  w.put<double>(m.postscale);
  w.put<uint8_t>(static_cast<uint8_t>(m.compression.kind));
  w.put<uint8_t>(m.compression.stochastic);
  w.put<uint8_t>(m.compression.errorFeedback);
  w.put<int32_t>(m.compression.blockSize);
  w.put<double>(m.compression.density);
  w.put<int32_t>(m.device);
  w.putString(m.group);
  w.put<int32_t>(m.groupSize);
  w.putVector(m.splits);
  w.putVector(m.ranks);
}

RequestMeta readMeta(ByteReader& r) {
  RequestMeta m;
  m.name = r.getString();
  auto op = r.get<uint8_t>();
  if (op >= static_cast<uint8_t>(OpType::kCount))
    COLL_THROW(collRemoteError, "negotiation message: bad op type ", int(op), " for '", m.name, "'");
  m.op = static_cast<OpType>(op);
  m.dtype = static_cast<collDataType_t>(r.get<int32_t>());
  m.shape = r.getVector<int64_t>();
  m.redOp = static_cast<collRedOp_t>(r.get<int32_t>());
  m.root = r.get<int32_t>();
  m.prescale = r.get<double>();
  m.postscale = r.get<double>();
  m.compression.kind = static_cast<CompressKind>(r.get<uint8_t>());
  m.compression.stochastic = r.get<uint8_t>() != 0;
  m.compression.errorFeedback = r.get<uint8_t>() != 0;
  m.compression.blockSize = r.get<int32_t>();
  m.compression.density = r.get<double>();
  m.device = r.get<int32_t>();
  m.group = r.getString();
  m.groupSize = r.get<int32_t>();
  m.splits = r.getVector<int64_t>();
  m.ranks = r.getVector<int32_t>();
  return m;
}

std::vector<uint8_t> encodeRequests(const std::vector<RequestMeta>& reqs) {
  ByteWriter w;
  w.put<uint32_t>(kMagic);
  w.put<uint32_t>(static_cast<uint32_t>(reqs.size()));
  for (const auto& m : reqs) writeMeta(w, m);
  return std::move(w.bytes());
}

std::vector<RequestMeta> decodeRequests(const uint8_t* data, size_t size) {
  ByteReader r(data, size);
  uint32_t magic = r.get<uint32_t>();
  if (magic != kMagic) COLL_THROW(collRemoteError, "negotiation message: bad magic 0x", std::hex, magic);
  uint32_t n = r.get<uint32_t>();
  std::vector<RequestMeta> out;
  // Reserved by what the bytes can hold, not by the count they claim: 8 bytes claiming
  // 65536 requests made this reserve megabytes for a message that fails a field later.
  out.reserve(std::min<size_t>(n, size / kMinRequestBytes));
  for (uint32_t i = 0; i < n; ++i) out.push_back(readMeta(r));
  if (!r.atEnd()) COLL_THROW(collRemoteError, "negotiation message: trailing bytes after ", n, " requests");
  return out;
}

}  // namespace coll::engine
