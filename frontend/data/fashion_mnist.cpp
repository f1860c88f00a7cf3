#include "data/fashion_mnist.hpp"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <system_error>

#include "base/error.hpp"

namespace collective::frontend {

namespace {

// Statistics of the 60000 training images (pixel / 255), as torchvision examples use.
constexpr float kMean = 0.2860f;
constexpr float kStd = 0.3530f;
// Guards against a corrupt header asking for absurd allocations.
constexpr int64_t kMaxElements = int64_t{1} << 31;
constexpr uint8_t kClasses = 10;

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

void readExact(gzFile f, void* dst, size_t n, const std::string& path) {
  auto* p = static_cast<unsigned char*>(dst);
  while (n > 0) {
    const unsigned chunk = static_cast<unsigned>(std::min<size_t>(n, 1u << 30));
    const int got = gzread(f, p, chunk);
    if (got <= 0) {
      int err = 0;
      const char* msg = gzerror(f, &err);
      COLL_THROW(collSystemError, "reading ", path, ": ",
                 got == 0 ? "file is shorter than its IDX header says" : msg);
    }
    p += got;
    n -= static_cast<size_t>(got);
  }
}

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%08x", v);
  return buf;
}

uint32_t bigEndian(const unsigned char* b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

}  // namespace

std::vector<uint8_t> readIdx(const std::string& path, int dims, std::vector<int64_t>& shape) {
  std::unique_ptr<gzFile_s, GzCloser> f(gzopen(path.c_str(), "rb"));
  if (!f)
    COLL_THROW(collSystemError, "cannot open ", path, ": ", std::system_category().message(errno));
  unsigned char head[4];
  readExact(f.get(), head, 4, path);
  const uint32_t magic = bigEndian(head);
  const uint32_t want = 0x0800u | static_cast<uint32_t>(dims);  // 0x08: unsigned byte
  if (magic != want)
    COLL_THROW(collInvalidArgument, path, ": IDX magic ", hex(magic), ", expected ", hex(want),
               " (unsigned bytes, ", dims, " dimensions)");
  shape.assign(dims, 0);
  int64_t total = 1;
  for (int i = 0; i < dims; ++i) {
    readExact(f.get(), head, 4, path);
    shape[i] = bigEndian(head);
    total *= shape[i];
    COLL_CHECK_ARG(total <= kMaxElements, path, ": IDX dimensions multiply to more than ",
                   kMaxElements, " elements");
  }
  std::vector<uint8_t> data(static_cast<size_t>(total));
  readExact(f.get(), data.data(), data.size(), path);
  if (gzread(f.get(), head, 1) != 0)
    COLL_THROW(collInvalidArgument, path, ": trailing data after ", total, " elements");
  return data;
}

Dataset loadFashionMnist(const std::string& dir, bool train, int64_t limit) {
  const std::string prefix = dir + (train ? "/train" : "/t10k");
  Dataset d;
  std::vector<int64_t> imgShape, labShape;
  d.pixels = readIdx(prefix + "-images-idx3-ubyte.gz", 3, imgShape);
  std::vector<uint8_t> labels = readIdx(prefix + "-labels-idx1-ubyte.gz", 1, labShape);
  COLL_ENFORCE_EQ(imgShape[0], labShape[0], collInvalidArgument, prefix,
                  ": image and label files disagree on the sample count");
  // Checked here, where every rank fails alike: the loss would find a bad label only on
  // the rank whose shard holds it, mid-training, while the others wait for it.
  for (size_t i = 0; i < labels.size(); ++i)
    COLL_CHECK_ARG(labels[i] < kClasses, prefix, "-labels-idx1-ubyte.gz: label ",
                   int{labels[i]}, " of sample ", i, " is not a class in [0, ", int{kClasses}, ")");
  d.count = imgShape[0];
  d.rows = imgShape[1];
  d.cols = imgShape[2];
  if (limit > 0 && limit < d.count) {
    d.count = limit;
    d.pixels.resize(static_cast<size_t>(limit * d.rows * d.cols));
    labels.resize(static_cast<size_t>(limit));
  }
  d.labels.assign(labels.begin(), labels.end());
  return d;
}

void gatherBatch(const Dataset& data, std::span<const int64_t> indices, Tensor& images,
                 std::vector<int32_t>& labels) {
  const int64_t n = static_cast<int64_t>(indices.size()), plane = data.rows * data.cols;
  ensureBuffer(images, {n, 1, data.rows, data.cols});
  labels.resize(indices.size());
  // x_norm = (p / 255 - mean) / std = p * a + b
  const float a = 1.0f / (255.0f * kStd), b = -kMean / kStd;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t s = indices[i];
    COLL_CHECK_ARG(s >= 0 && s < data.count, "gatherBatch: sample index ", s, " outside [0, ",
                   data.count, ")");
    const uint8_t* src = data.pixels.data() + s * plane;
    float* dst = images.data() + i * plane;
    for (int64_t j = 0; j < plane; ++j) dst[j] = static_cast<float>(src[j]) * a + b;
    labels[i] = data.labels[s];
  }
}

}  // namespace collective::frontend
