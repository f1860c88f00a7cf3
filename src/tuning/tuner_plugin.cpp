#include "tuning/tuner_plugin.hpp"

#include <dlfcn.h>

#include "base/error.hpp"
#include "base/log.hpp"
#include "plugins/tuner/coll_tuner.h"

namespace coll {
namespace {
const collTunerPlugin_v1_t& api(const void* p) { return *static_cast<const collTunerPlugin_v1_t*>(p); }

collTunerColl_t tunerColl(OpKind k) {
  switch (k) {
    case OpKind::Broadcast: return collTunerBroadcast;
    case OpKind::Reduce: return collTunerReduce;
    case OpKind::AllGather: return collTunerAllGather;
    case OpKind::ReduceScatter: return collTunerReduceScatter;
    case OpKind::AllToAll: return collTunerAllToAll;
    default: return collTunerAllReduce;
  }
}
}  // namespace

std::unique_ptr<TunerPlugin> TunerPlugin::open(const std::string& path) {
  std::unique_ptr<TunerPlugin> t(new TunerPlugin);
  t->path_ = path;
  t->handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!t->handle_) {
    const char* why = dlerror();
    COLL_THROW(collInvalidArgument, "COLL_TUNER_PLUGIN='", path, "' cannot be loaded: ", why ? why : "unknown error");
  }
  const void* sym = dlsym(t->handle_, COLL_TUNER_SYMBOL);
  COLL_CHECK_ARG(sym, "COLL_TUNER_PLUGIN='", path, "' does not export ", COLL_TUNER_SYMBOL,
                 " (not a tuner plugin, or built for another interface version)");
  const auto& a = api(sym);
  COLL_CHECK_ARG(a.version == COLL_TUNER_PLUGIN_VERSION, "COLL_TUNER_PLUGIN='", path, "' has interface version ",
                 a.version, ", this library speaks ", COLL_TUNER_PLUGIN_VERSION);
  COLL_CHECK_ARG(a.init && a.getAlgorithm && a.finalize, "COLL_TUNER_PLUGIN='", path,
                 "' leaves init, getAlgorithm or finalize NULL");
  t->api_ = sym;
  t->name_ = a.name ? a.name : path;
  return t;
}

TunerPlugin::~TunerPlugin() {
  if (ready_) api(api_).finalize(context_);
  if (handle_) dlclose(handle_);
}

bool TunerPlugin::init(const TunerJob& job) {
  if (tried_) return ready_;
  tried_ = true;
  collTunerJob_t j{job.nranks, job.nhosts, job.maxLocalRanks};
  int rc = api(api_).init(&j, &context_);
  if (rc != 0) {
    COLL_WARN("tuner plugin '%s' (%s): init returned %d; using the cost model alone", name_.c_str(), path_.c_str(), rc);
    return false;
  }
  ready_ = true;
  COLL_INFO("tuner plugin '%s' loaded from %s", name_.c_str(), path_.c_str());
  return true;
}

int TunerPlugin::choose(const OpArgs& args, size_t bytes, const std::vector<const char*>& names,
                        const std::vector<double>& costs, int modelChoice) const {
  if (!ready_) return -1;
  // The plugin interface (version 1) has no code for gather or scatter: the cost model
  // decides those.
  if (args.kind == OpKind::Gather || args.kind == OpKind::Scatter) return -1;
  collTunerQuery_t q{};
  q.coll = tunerColl(args.kind);
  q.bytes = bytes;
  q.datatype = static_cast<int>(args.dtype);
  q.redop = static_cast<int>(args.op);
  q.numAlgorithms = static_cast<int>(names.size());
  q.algorithms = names.data();
  q.costUs = costs.data();
  q.modelChoice = modelChoice;
  int choice = -1;
  int rc = api(api_).getAlgorithm(context_, &q, &choice);
  if (rc != 0) {
    if (!warnedError_.exchange(true))
      COLL_WARN("tuner plugin '%s': getAlgorithm returned %d for %s of %zu bytes; keeping the model's choice "
                "(further such answers are not logged)", name_.c_str(), rc, opKindName(args.kind), bytes);
    return -1;
  }
  if (choice < -1 || choice >= q.numAlgorithms) {
    if (!warnedRange_.exchange(true))
      COLL_WARN("tuner plugin '%s' chose algorithm %d of %d for %s; keeping the model's choice "
                "(further such answers are not logged)", name_.c_str(), choice, q.numAlgorithms, opKindName(args.kind));
    return -1;
  }
  return choice;
}

}  // namespace coll
