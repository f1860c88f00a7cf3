// Hook for the tuner's part of collective-info: which algorithm the library would run
// for each collective and message size on this communicator. It asks src/tuning's
// Selector, so it prints exactly what a call would use; when the cost model replaces the
// size table, this is the one function to point at it.
#pragma once

#include <ostream>

#include "collective.h"

namespace coll::tools {

void printAlgorithmChoices(std::ostream& os, collComm_t comm);

}  // namespace coll::tools
