#include "checkpoint.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <system_error>
#include <vector>

#include "base/error.hpp"

namespace collective::frontend {

namespace {

constexpr char kMagic[8] = {'C', 'F', 'M', 'C', 'K', 'P', 'T', '1'};
constexpr uint32_t kMaxName = 4096;
constexpr uint32_t kMaxDims = 8;

struct Named {
  std::string name;
  Tensor* tensor;
};

std::vector<Named> everything(Sequential& model, Sgd& opt) {
  std::vector<Named> all;
  for (Param* p : model.parameters()) all.push_back({p->name, &p->value});
  for (Buffer* b : model.buffers()) all.push_back({b->name, &b->value});
  for (Buffer* b : opt.state()) all.push_back({b->name, &b->value});
  return all;
}

template <typename T>
void put(std::ofstream& out, const T& v) {
  out.write(reinterpret_cast<const char*>(&v), sizeof(T));
}

template <typename T>
T get(std::ifstream& in, const std::string& path) {
  T v{};
  if (!in.read(reinterpret_cast<char*>(&v), sizeof(T)))
    COLL_THROW(collInvalidArgument, "checkpoint ", path, " is truncated");
  return v;
}

}  // namespace

void saveCheckpoint(const std::string& path, Sequential& model, Sgd& opt, CheckpointInfo info) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      COLL_THROW(collSystemError, "cannot write checkpoint ", tmp, ": ",
                 std::system_category().message(errno));
    out.write(kMagic, sizeof(kMagic));
    put(out, info.epoch);
    put(out, info.steps);
    const auto all = everything(model, opt);
    put(out, static_cast<uint32_t>(all.size()));
    for (const Named& e : all) {
      put(out, static_cast<uint32_t>(e.name.size()));
      out.write(e.name.data(), static_cast<std::streamsize>(e.name.size()));
      put(out, static_cast<uint32_t>(e.tensor->ndim()));
      for (int64_t d : e.tensor->shape()) put(out, d);
      out.write(reinterpret_cast<const char*>(e.tensor->data()),
                static_cast<std::streamsize>(e.tensor->bytes()));
    }
    out.flush();
    if (!out) COLL_THROW(collSystemError, "writing checkpoint ", tmp, " failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    COLL_THROW(collSystemError, "renaming ", tmp, " to ", path, ": ",
               std::system_category().message(errno));
}

CheckpointInfo loadCheckpoint(const std::string& path, Sequential& model, Sgd& opt) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    COLL_THROW(collSystemError, "cannot open checkpoint ", path, ": ",
               std::system_category().message(errno));
  char magic[sizeof(kMagic)];
  if (!in.read(magic, sizeof(magic)) || std::memcmp(magic, kMagic, sizeof(kMagic)) != 0)
    COLL_THROW(collInvalidArgument, path, " is not a frontend checkpoint (bad magic)");
  CheckpointInfo info;
  info.epoch = get<int64_t>(in, path);
  info.steps = get<int64_t>(in, path);
  std::map<std::string, Tensor*> want;
  for (const Named& e : everything(model, opt)) want[e.name] = e.tensor;
  const uint32_t entries = get<uint32_t>(in, path);
  COLL_ENFORCE_EQ(static_cast<size_t>(entries), want.size(), collInvalidArgument, "checkpoint ",
                  path, " holds a different number of tensors than the model and optimizer");
  for (uint32_t i = 0; i < entries; ++i) {
    const uint32_t len = get<uint32_t>(in, path);
    COLL_CHECK_ARG(len <= kMaxName, "checkpoint ", path, ": name length ", len, " > ", kMaxName);
    std::string name(len, '\0');
    if (!in.read(name.data(), len))
      COLL_THROW(collInvalidArgument, "checkpoint ", path, " is truncated");
    auto it = want.find(name);
    COLL_CHECK_ARG(it != want.end(), "checkpoint ", path, ": tensor '", name,
                   "' is not in the model");
    const uint32_t ndim = get<uint32_t>(in, path);
    COLL_CHECK_ARG(ndim <= kMaxDims, "checkpoint ", path, ": '", name, "' has ", ndim, " dims");
    Shape shape(ndim);
    for (auto& d : shape) d = get<int64_t>(in, path);
    Tensor& dst = *it->second;
    COLL_CHECK_ARG(shape == dst.shape(), "checkpoint ", path, ": '", name, "' has shape ",
                   shapeString(shape), ", the model expects ", shapeString(dst.shape()));
    if (!in.read(reinterpret_cast<char*>(dst.data()), static_cast<std::streamsize>(dst.bytes())))
      COLL_THROW(collInvalidArgument, "checkpoint ", path, " is truncated in '", name, "'");
    want.erase(it);
  }
  opt.setSteps(info.steps);
  return info;
}

}  // namespace collective::frontend
