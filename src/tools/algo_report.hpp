// Hook for the tuner's part of collective-info: which algorithm the library would run
// for each collective and message size on this communicator. It asks src/tuning's
// Selector, so it prints exactly what a call would use; when the cost model replaces the
// size table, this is the one function to point at it.
#pragma once

#include <cstddef>
#include <ostream>
#include <vector>

#include "collective.h"

namespace coll::tools {

// counts: float32 element counts as the C API takes them; empty: a default set from 1 to
// 256 Mi elements.
void printAlgorithmChoices(std::ostream& os, collComm_t comm, const std::vector<size_t>& counts = {});

}  // namespace coll::tools
