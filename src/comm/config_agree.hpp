// Tunables that every rank of a job must set alike. They decide which algorithm a call
// runs, how it cuts its messages and which transport joins two ranks; a rank that differs
// runs another exchange than its peers, which ends in a size mismatch, a timeout or, where
// the sizes happen to match, wrong data. Each communicator checks them when it forms.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/config.hpp"

namespace coll {

class Bootstrap;

// The names, in a fixed order.
const std::vector<const char*>& jobWideParams();

// One digest per job-wide tunable, of its effective value in a canonical form ("1M" and
// "1048576" are the same size; COLL_ALGO by the algorithms it forces, so its items in
// any order unless two force the same collective; the tuner plugin by file name).
// Throws collInvalidArgument for a value that does not parse.
std::vector<uint64_t> jobWideDigest(const Config& cfg);

// `all` holds every rank's digest, rank after rank. Throws collInvalidArgument naming the
// first tunable on which another rank differs from `rank`, with this rank's value.
void checkJobWideAgree(const Config& cfg, int rank, const std::vector<uint64_t>& all);

// Exchanges the digests through the bootstrap and checks them.
void checkConfigAgrees(Bootstrap& boot, const Config& cfg);

}  // namespace coll
