#include "comm/config_agree.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sstream>

#include "bootstrap/bootstrap.hpp"
#include "base/error.hpp"
#include "tuning/select.hpp"

namespace coll {
namespace {

enum class Form { Text, Size, SizeOrWord, Number, List, FileName, Algorithms };

struct JobWide {
  const char* env;
  Form form;
};

// What a rank's choice of algorithm, message cuts and transports depends on, and what the
// engine's ranks must share to negotiate. Tunables of one side of a link only (ring and
// staging sizes of shm, TCP streams and striping, the pipeline depth) are left out: the
// transports agree on those between the two ends.
constexpr JobWide kJobWide[] = {
    // Compared by what it forces: the order of its items matters only where two of them
    // force the same collective (the later wins).
    {"COLL_ALGO", Form::Algorithms},
    {"COLL_TUNER_PLUGIN", Form::FileName},
    {"COLL_TRANSPORT", Form::Text},
    {"COLL_LAZY_CONNECT", Form::Text},
    {"COLL_NET", Form::Text},
    {"COLL_NET_PLUGIN", Form::FileName},
    {"COLL_CHUNK_BYTES", Form::Size},
    {"COLL_REPRODUCIBLE", Form::Text},
    {"COLL_HIER_VARIANT", Form::Text},
    {"COLL_HIER_SEGMENT_BYTES", Form::Size},
    {"COLL_TUNE_MSG_US", Form::Number},
    {"COLL_TUNE_NET_MSG_US", Form::Number},
    {"COLL_TUNE_WAKE_US", Form::Number},
    {"COLL_TUNE_OVERSUB_US", Form::Number},
    {"COLL_TUNE_REDUCE_GBS", Form::Number},
    {"COLL_TOPO_LINK_BW", Form::List},
    {"COLL_TOPO_LINK_LAT", Form::List},
    {"COLL_CUDA_IPC", Form::Text},
    {"COLL_CUDA_IPC_BUFFER", Form::Size},
    {"COLL_CUDA_STAGE_CHUNK", Form::Size},
    // The engine's negotiation: the response cache's slots are addressed by number, and
    // which tensors skip fusion decides what each round runs.
    {"COLL_CACHE_CAPACITY", Form::Number},
    {"COLL_FUSION_DIRECT_BYTES", Form::SizeOrWord},
};

bool declared(const char* env) {
  for (const ParamDecl& d : declaredParams())
    if (strcmp(d.env, env) == 0) return true;
  return false;
}

// The value in a form that is equal wherever the meaning is.
std::string canonical(const Config& cfg, const JobWide& p) {
  if (!declared(p.env)) return "";  // not in this build (CUDA): the same everywhere it is absent
  switch (p.form) {
    case Form::Size: return std::to_string(cfg.getSize(p.env));
    case Form::SizeOrWord: {
      const std::string& text = cfg.getStr(p.env);
      try {
        return std::to_string(parseSize(text, p.env));
      } catch (const Error&) {
        return text;  // "auto": the ranks agree on the size round by round
      }
    }
    case Form::Number: {
      char text[32];
      snprintf(text, sizeof text, "%.17g", cfg.getDouble(p.env));
      return text;
    }
    case Form::List: {
      std::vector<std::string> items;
      std::stringstream ss(cfg.getStr(p.env));
      std::string item;
      while (std::getline(ss, item, ','))
        if (!item.empty()) items.push_back(item);
      std::sort(items.begin(), items.end());
      std::string out;
      for (const std::string& i : items) out += i + ",";
      return out;
    }
    case Form::FileName: {
      const std::string& path = cfg.getStr(p.env);
      return path.substr(path.find_last_of('/') + 1);
    }
    case Form::Algorithms: return forcedAlgorithmsCanonical(cfg.getStr(p.env));
    case Form::Text: break;
  }
  return cfg.getStr(p.env);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

const std::vector<const char*>& jobWideParams() {
  static const std::vector<const char*> names = [] {
    std::vector<const char*> v;
    for (const JobWide& p : kJobWide) v.push_back(p.env);
    return v;
  }();
  return names;
}

std::vector<uint64_t> jobWideDigest(const Config& cfg) {
  std::vector<uint64_t> out;
  for (const JobWide& p : kJobWide) out.push_back(fnv1a(canonical(cfg, p)));
  return out;
}

void checkJobWideAgree(const Config& cfg, int rank, const std::vector<uint64_t>& all) {
  const size_t k = std::size(kJobWide);
  COLL_ENFORCE_EQ(all.size() % k, size_t{0}, collInternalError, "job-wide tunables: digest size");
  const size_t n = all.size() / k;
  COLL_CHECK_ARG(rank >= 0 && static_cast<size_t>(rank) < n, "job-wide tunables: rank ", rank, " of ", n);
  for (size_t i = 0; i < k; ++i) {
    const uint64_t mine = all[rank * k + i];
    std::vector<size_t> others;
    for (size_t r = 0; r < n; ++r)
      if (all[r * k + i] != mine) others.push_back(r);
    if (others.empty()) continue;
    std::string ranks;
    for (size_t j = 0; j < others.size() && j < 8; ++j) ranks += (j ? ", " : "") + std::to_string(others[j]);
    if (others.size() > 8) ranks += " and " + std::to_string(others.size() - 8) + " more";
    const char* env = kJobWide[i].env;
    COLL_THROW(collInvalidArgument, env, " differs between the ranks: '", declared(env) ? cfg.getStr(env) : "",
               "' on rank ", rank, ", another value on rank", others.size() > 1 ? "s " : " ", ranks,
               ". Every rank must set it alike (doc/usage.md, \"Environment variables\")");
  }
}

void checkConfigAgrees(Bootstrap& boot, const Config& cfg) {
  const std::vector<uint64_t> mine = jobWideDigest(cfg);
  std::vector<uint8_t> bytes = boot.allGather(mine.data(), mine.size() * sizeof(uint64_t));
  COLL_ENFORCE_EQ(bytes.size(), mine.size() * sizeof(uint64_t) * boot.nranks(), collInternalError,
                  "job-wide tunables: all-gather size");
  std::vector<uint64_t> all(bytes.size() / sizeof(uint64_t));
  memcpy(all.data(), bytes.data(), bytes.size());
  checkJobWideAgree(cfg, boot.rank(), all);
}

}  // namespace coll
