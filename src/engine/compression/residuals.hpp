// Error feedback state: per tensor, what compression did not deliver yet. It is added to
// the tensor's next gradient before compressing, so nothing is lost for good, only late.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

namespace coll::engine {

class ResidualStore {
 public:
  // The residual of `name`, n floats; zero when new or when the tensor changed size.
  float* get(const std::string& name, size_t n);
  const std::vector<float>* find(const std::string& name) const;
  size_t size() const { return map_.size(); }

 private:
  std::unordered_map<std::string, std::vector<float>> map_;
};

}  // namespace coll::engine
