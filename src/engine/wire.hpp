// Byte encoding of the negotiation messages that ranks all-gather. Every length read
// back is bounded by the bytes actually received, so a corrupt message fails with
// collRemoteError instead of reading out of bounds.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "base/error.hpp"
#include "engine/request.hpp"

namespace coll::engine {

class ByteWriter {
 public:
  template <typename T>
  void put(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    buf_.insert(buf_.end(), p, p + sizeof(T));
  }
  void putString(const std::string& s);
  template <typename T>
  void putVector(const std::vector<T>& v) {
    put<uint32_t>(static_cast<uint32_t>(v.size()));
    for (const T& x : v) put(x);
  }
  std::vector<uint8_t>& bytes() { return buf_; }

 private:
  std::vector<uint8_t> buf_;
};

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : p_(data), end_(data + size) {}
  template <typename T>
  T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  std::string getString();
  template <typename T>
  std::vector<T> getVector() {
    uint32_t n = get<uint32_t>();
    need(static_cast<size_t>(n) * sizeof(T));
    std::vector<T> v(n);
    for (auto& x : v) x = get<T>();
    return v;
  }
  bool atEnd() const { return p_ == end_; }

 private:
  void need(size_t n) const;
  const uint8_t* p_;
  const uint8_t* end_;
};

void writeMeta(ByteWriter& w, const RequestMeta& m);
RequestMeta readMeta(ByteReader& r);

// One rank's message for one negotiation round.
std::vector<uint8_t> encodeRequests(const std::vector<RequestMeta>& reqs);
std::vector<RequestMeta> decodeRequests(const uint8_t* data, size_t size);

}  // namespace coll::engine
