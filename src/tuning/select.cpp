#include "tuning/select.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>
#include <sstream>

#include "algorithms/ring_stream.hpp"
#include "algorithms/team.hpp"
#include "base/config.hpp"
#include "base/error.hpp"
#include "base/log.hpp"
#include "base/types.hpp"
#include "tuning/cost_model.hpp"
#include "tuning/tuner_plugin.hpp"

namespace coll {

COLL_PARAM(kAlgo, "COLL_ALGO", "", "force algorithms: 'ring' or 'allreduce:rd,broadcast:chain'");
COLL_PARAM(kTunerPlugin, "COLL_TUNER_PLUGIN", "", "tuner plugin (.so) that may override the cost model");

namespace {
const char* kKindNames[] = {"allreduce", "broadcast", "reduce", "allgather", "reducescatter",
                            "alltoall", "send", "recv", "barrier", "gather", "scatter"};
static_assert(std::size(kKindNames) == kNumOpKinds);
}

bool parseOpKind(const std::string& text, OpKind* kind) {
  for (int i = 0; i < kNumOpKinds; ++i)
    if (text == kKindNames[i]) {
      *kind = static_cast<OpKind>(i);
      return true;
    }
  return false;
}

const char* opKindName(OpKind k) { return kKindNames[static_cast<int>(k)]; }

size_t modelBytes(const OpArgs& args) { return args.count * typeSize(args.dtype); }

namespace {

// "ring, rd, hd" for one collective (kind), or every name once (all).
std::string algorithmNames(const OpKind* kind) {
  std::string out;
  for (const Algorithm* a : algorithmTable()) {
    if (kind && a->kind() != *kind) continue;
    const std::string name = a->name();
    if ((", " + out + ", ").find(", " + name + ", ") != std::string::npos) continue;
    out += (out.empty() ? "" : ", ") + name;
  }
  return out.empty() ? "none" : out;
}

// The collectives COLL_ALGO can force: those with an algorithm of their own.
std::string forcibleKinds() {
  std::string out;
  for (int k = 0; k < kNumOpKinds; ++k) {
    const OpKind kind = static_cast<OpKind>(k);
    if (algorithmNames(&kind) != "none") out += (out.empty() ? "" : ", ") + std::string(kKindNames[k]);
  }
  return out;
}

}  // namespace

std::map<OpKind, const Algorithm*> parseForcedAlgorithms(const std::string& spec) {
  auto byName = [](OpKind kind, const std::string& name) -> const Algorithm* {
    for (const Algorithm* a : algorithmTable())
      if (a->kind() == kind && name == a->name()) return a;
    return nullptr;
  };
  std::map<OpKind, const Algorithm*> forced;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    auto colon = item.find(':');
    if (colon == std::string::npos) {
      bool any = false;
      for (int k = 0; k < kNumOpKinds; ++k)
        if (const Algorithm* a = byName(static_cast<OpKind>(k), item)) {
          forced[static_cast<OpKind>(k)] = a;
          any = true;
        }
      COLL_CHECK_ARG(any, "COLL_ALGO: no collective has an algorithm named '", item, "' (names: ",
                     algorithmNames(nullptr), ")");
      continue;
    }
    OpKind kind;
    std::string coll = item.substr(0, colon), name = item.substr(colon + 1);
    COLL_CHECK_ARG(parseOpKind(coll, &kind), "COLL_ALGO: unknown collective '", coll, "' (", forcibleKinds(), ")");
    const Algorithm* a = byName(kind, name);
    COLL_CHECK_ARG(a, "COLL_ALGO: ", coll, " has no algorithm named '", name, "' (it has ", algorithmNames(&kind),
                   ")");
    forced[kind] = a;
  }
  return forced;
}

std::string forcedAlgorithmsCanonical(const std::string& spec) {
  std::string out;
  for (const auto& [kind, algo] : parseForcedAlgorithms(spec))
    out += std::string(opKindName(kind)) + ":" + algo->name() + ",";
  return out;
}

Selector::Selector(const Config& cfg) : forced_(parseForcedAlgorithms(cfg.getStr(kAlgo))) {
  if (!cfg.getStr(kTunerPlugin).empty()) tuner_ = TunerPlugin::open(cfg.getStr(kTunerPlugin));
}

Selector::~Selector() = default;

const Algorithm* Selector::deviceAlgorithm(OpKind kind) const {
  auto f = forced_.find(kind);
  if (f != forced_.end()) return f->second->onDevice() ? f->second : nullptr;
  for (const Algorithm* a : algorithmTable())
    if (a->kind() == kind && a->onDevice()) return a;
  return nullptr;
}

const CostModel& Selector::model(const Team& comm) const {
  std::call_once(modelOnce_, [&] {
    const JobTopo& job = comm.topology();
    model_ = std::make_unique<CostModel>(job, CostParams::forJob(comm.config(), pipelineChunkBytes(comm), job));
    initTuner(job);
  });
  return *model_;
}

bool Selector::initTuner(const JobTopo& job) const {
  if (!tuner_) return true;
  TunerJob tj{job.nranks(), job.nhosts(), 1};
  for (const HostGroup& h : job.hosts()) tj.maxLocalRanks = std::max<int>(tj.maxLocalRanks, h.ranks.size());
  return tuner_->init(tj);
}

void Selector::dropTuner() { tuner_.reset(); }

std::vector<Candidate> candidatesFor(const CostContext& job, const OpArgs& args) {
  const size_t bytes = modelBytes(args);
  std::vector<Candidate> out;
  for (const Algorithm* a : algorithmTable())
    if (a->kind() == args.kind && a->supports(job, args)) out.push_back({a, a->estimate(job, bytes)});
  return out;
}

const Algorithm* cheapest(const std::vector<Candidate>& cands) {
  if (cands.empty()) return nullptr;
  size_t best = 0;
  for (size_t i = 1; i < cands.size(); ++i)
    if (cands[i].costUs < cands[best].costUs) best = i;
  return cands[best].algo;
}

std::vector<Candidate> Selector::candidates(const Team& comm, const OpArgs& args) const {
  return candidatesFor(model(comm).context(), args);
}

// Every field of the key moves every bit of the slot index. (The index once came from
// the count's bits alone: calls of one count that differ in type, reduction or root, such
// as a float64 max and a uint64 min of one element, took the same slot in turn, so each
// ran the cost model again and filled the store, after which nothing new was cached.)
size_t Selector::choiceSlot(const OpArgs& args) {
  auto mix = [](uint64_t x) {
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  };
  uint64_t h = mix(args.count);
  h = mix(h ^ (static_cast<uint64_t>(args.kind) | static_cast<uint64_t>(args.dtype) << 8 |
               static_cast<uint64_t>(args.op) << 16 | static_cast<uint64_t>(static_cast<uint32_t>(args.root)) << 32));
  return static_cast<size_t>(h % kChoiceSlots);
}

size_t Selector::choicesPriced() const {
  std::lock_guard<std::mutex> lock(choiceMu_);
  return choiceStore_.size();
}

const Algorithm& Selector::select(const Team& comm, const OpArgs& args) const {
  auto it = forced_.find(args.kind);
  if (it != forced_.end()) {
    if (it->second->supports(model(comm).context(), args)) return *it->second;
    std::atomic<bool>& said = forcedPassedOver_[static_cast<size_t>(args.kind)];
    if (!said.load(std::memory_order_relaxed) && !said.exchange(true, std::memory_order_relaxed))
      COLL_WARN("COLL_ALGO forces %s for %s, which cannot run a call of %zu elements on this communicator "
                "(%d ranks); the automatic choice runs the calls it cannot (said once per collective)",
                it->second->name(), opKindName(args.kind), args.count, comm.nranks());
  }
  if (tuner_) return choose(comm, args);
  std::atomic<const CachedChoice*>& slot = choices_[choiceSlot(args)];
  const CachedChoice* c = slot.load(std::memory_order_acquire);
  if (c && c->kind == args.kind && c->count == args.count && c->dtype == args.dtype && c->op == args.op &&
      c->root == args.root)
    return *c->algo;
  const Algorithm& algo = choose(comm, args);
  COLL_INFO("selection: %s of %zu bytes (%zu elements) runs %s", opKindName(args.kind), modelBytes(args),
            args.count, algo.name());
  std::lock_guard<std::mutex> lock(choiceMu_);
  if (choiceStore_.size() < kMaxChoices) {
    choiceStore_.push_back(std::make_unique<CachedChoice>(
        CachedChoice{args.kind, args.count, args.dtype, args.op, args.root, &algo}));
    slot.store(choiceStore_.back().get(), std::memory_order_release);
  }
  return algo;
}

const Algorithm& Selector::choose(const Team& comm, const OpArgs& args) const {
  std::vector<Candidate> cands = candidates(comm, args);
  if (cands.empty()) COLL_THROW(collInternalError, "no algorithm supports ", opKindName(args.kind));
  // The cheapest estimate; ties and unknown costs go to the earlier table entry.
  const Algorithm* model = cheapest(cands);
  int best = 0;
  while (cands[best].algo != model) ++best;
  if (tuner_ && cands.size() > 1) {
    std::vector<const char*> names;
    std::vector<double> costs;
    for (const Candidate& c : cands) {
      names.push_back(c.algo->name());
      costs.push_back(c.costUs);
    }
    int pick = tuner_->choose(args, modelBytes(args), names, costs, best);
    if (pick >= 0) best = pick;
  }
  return *cands[best].algo;
}

}  // namespace coll
