#include "engine/compression/residuals.hpp"

namespace coll::engine {

float* ResidualStore::get(const std::string& name, size_t n) {
  auto& v = map_[name];
  if (v.size() != n) v.assign(n, 0.0f);
  return v.data();
}

const std::vector<float>* ResidualStore::find(const std::string& name) const {
  auto it = map_.find(name);
  return it == map_.end() ? nullptr : &it->second;
}

}  // namespace coll::engine
