// One submitted request on its way through the engine: the negotiable metadata plus the
// caller's memory and completion handle, which never leave this process.
#pragma once

#include <chrono>
#include <memory>

#include "engine/handle_state.hpp"
#include "engine/request.hpp"

namespace coll::engine {

using Clock = std::chrono::steady_clock;

struct Entry {
  RequestMeta meta;
  const void* input = nullptr;
  void* output = nullptr;
  std::shared_ptr<collective::hvd::detail::HandleState> handle;
  collective::hvd::Allocator allocate;  // allgather / alltoall / reducescatter output
  Clock::time_point submitted{};
  Clock::time_point drained{};
};

using EntryPtr = std::unique_ptr<Entry>;

}  // namespace coll::engine
