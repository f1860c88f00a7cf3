// Helpers to drive Engine directly (ranks as threads over FakeWorld).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/engine.hpp"
#include "fake_collectives.hpp"

namespace coll::engine::testing {

using HandlePtr = std::shared_ptr<collective::hvd::detail::HandleState>;

inline EngineParams testParams() {
  EngineParams p;
  p.cycleMs = 1;
  p.stall.warnSeconds = 0;
  p.shutdownTimeoutSeconds = 20;
  return p;
}

inline EntryPtr arEntry(const std::string& name, const float* in, float* out, int64_t n,
                        collRedOp_t op = collSum, HandlePtr h = nullptr) {
  auto e = std::make_unique<Entry>();
  e->meta.name = name;
  e->meta.op = OpType::Allreduce;
  e->meta.dtype = collFloat32;
  e->meta.shape = {n};
  e->meta.redOp = op;
  e->input = in;
  e->output = out;
  e->handle = h ? h : std::make_shared<collective::hvd::detail::HandleState>(1, 30.0);
  return e;
}

// Submits and returns the handle.
inline HandlePtr submit(Engine& eng, EntryPtr e) {
  HandlePtr h = e->handle;
  eng.submit(std::move(e));
  return h;
}

}  // namespace coll::engine::testing
