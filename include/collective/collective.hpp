// The whole C++ API of libcollective: #include <collective/collective.hpp>.
#pragma once

#include "collective.h"
#include "collective/communicator.hpp"
#include "collective/error.hpp"
#include "collective/hvd.hpp"
#include "collective/memory.hpp"
#include "collective/request.hpp"
#include "collective/types.hpp"
