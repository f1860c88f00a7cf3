#include "engine/negotiation.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <sstream>

#include "base/error.hpp"
#include "base/types.hpp"

namespace coll::engine {
namespace {

using Field = std::pair<const char*, std::function<std::string(const RequestMeta&)>>;

// Fields are compared as text, so the text must tell every distinct value apart
// (std::to_string keeps six decimals: 1e-7 and 2e-7 both read 0.000000). The shortest of
// %.15g / %.17g that reads back as the same double keeps messages readable.
std::string exactString(double v) {
  char buf[40];
  snprintf(buf, sizeof(buf), "%.15g", v);
  if (std::strtod(buf, nullptr) != v && v == v) snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

std::string compressionString(const CompressionSpec& c) {
  std::ostringstream os;
  os << compressKindName(c.kind);
  if (c.kind == CompressKind::Int8)
    os << "(block=" << c.blockSize << "," << (c.stochastic ? "stochastic" : "nearest") << ",ef="
       << c.errorFeedback << ")";
  if (c.kind == CompressKind::TopK)
    os << "(density=" << exactString(c.density) << ",ef=" << c.errorFeedback << ")";
  return os.str();
}

std::vector<int64_t> tail(const std::vector<int64_t>& s) {
  return s.empty() ? s : std::vector<int64_t>(s.begin() + 1, s.end());
}

// Which fields must agree depends on the operation; the op type itself comes first so
// that a name used for two different operations is reported as such.
std::vector<Field> agreedFields(OpType op) {
  std::vector<Field> f;
  f.push_back({"operation", [](const RequestMeta& m) { return std::string(opTypeName(m.op)); }});
  if (op == OpType::Barrier || op == OpType::Join) return f;
  if (op == OpType::AddProcessSet) {
    f.push_back({"ranks", [](const RequestMeta& m) {
                   return shapeString(std::vector<int64_t>(m.ranks.begin(), m.ranks.end()));
                 }});
    return f;
  }
  f.push_back({"dtype", [](const RequestMeta& m) { return std::string(typeName(m.dtype)); }});
  if (op == OpType::Allgather || op == OpType::Alltoall) {
    f.push_back({"rank of shape", [](const RequestMeta& m) { return std::to_string(m.shape.size()); }});
    f.push_back({"shape after the first dimension",
                 [](const RequestMeta& m) { return shapeString(tail(m.shape)); }});
  } else {
    f.push_back({"shape", [](const RequestMeta& m) { return shapeString(m.shape); }});
  }
  if (op == OpType::Allreduce || op == OpType::Reducescatter) {
    f.push_back({"reduce op", [](const RequestMeta& m) { return std::string(opName(m.redOp)); }});
    f.push_back({"prescale", [](const RequestMeta& m) { return exactString(m.prescale); }});
    f.push_back({"postscale", [](const RequestMeta& m) { return exactString(m.postscale); }});
  }
  if (op == OpType::Allreduce)
    f.push_back({"compression", [](const RequestMeta& m) { return compressionString(m.compression); }});
  if (op == OpType::Broadcast)
    f.push_back({"root", [](const RequestMeta& m) { return std::to_string(m.root); }});
  f.push_back({"device", [](const RequestMeta& m) { return std::to_string(m.device); }});
  f.push_back({"group", [](const RequestMeta& m) {
                 return m.group.empty() ? std::string("none")
                                        : m.group + "/" + std::to_string(m.groupSize);
               }});
  return f;
}

std::string ranksString(const std::vector<int>& ranks) {
  std::ostringstream os;
  os << (ranks.size() == 1 ? "rank " : "ranks ");
  for (size_t i = 0; i < ranks.size(); ++i) os << (i ? "," : "") << ranks[i];
  return os.str();
}

}  // namespace

std::string describeMismatch(const std::vector<std::optional<RequestMeta>>& byRank) {
  const RequestMeta* first = nullptr;
  for (const auto& m : byRank)
    if (m) { first = &*m; break; }
  if (!first) return "";
  for (const auto& [fname, get] : agreedFields(first->op)) {
    // Group ranks by value, values in order of their lowest rank.
    std::vector<std::pair<std::string, std::vector<int>>> groups;
    for (size_t r = 0; r < byRank.size(); ++r) {
      if (!byRank[r]) continue;
      std::string v = get(*byRank[r]);
      auto it = std::find_if(groups.begin(), groups.end(), [&](auto& g) { return g.first == v; });
      if (it == groups.end()) groups.push_back({v, {static_cast<int>(r)}});
      else it->second.push_back(static_cast<int>(r));
    }
    if (groups.size() <= 1) continue;
    std::ostringstream os;
    os << "tensor '" << first->name << "': mismatched " << fname << " across ranks: ";
    for (size_t g = 0; g < groups.size(); ++g)
      os << (g ? "; " : "") << ranksString(groups[g].second) << " submitted " << groups[g].first;
    return os.str();
  }
  return "";
}

Negotiator::Negotiator(int nranks) : nranks_(nranks), joined_(nranks, false) {}

void Negotiator::addRound(const std::vector<std::vector<RequestMeta>>& msgs, double now) {
  for (size_t r = 0; r < msgs.size() && r < static_cast<size_t>(nranks_); ++r)
    for (const auto& m : msgs[r]) {
      if (m.op == OpType::Join) join(static_cast<int>(r));
      else add(static_cast<int>(r), m, now);
    }
}

void Negotiator::add(int rank, const RequestMeta& m, double now) {
  auto it = table_.find(m.name);
  if (it == table_.end()) {
    Pending p;
    p.byRank.resize(nranks_);
    p.firstSeen = now;
    uint64_t ord = nextOrder_++;
    order_[ord] = m.name;
    it = table_.emplace(m.name, std::make_pair(ord, std::move(p))).first;
  }
  Pending& p = it->second.second;
  if (p.byRank[rank]) {
    // The submitting side rejects duplicates in flight; seeing one here means two
    // requests of one rank crossed in the same round. Fail the tensor everywhere.
    p.duplicateError = strCat("tensor '", m.name, "' was submitted twice by rank ", rank,
                              " before the first completed");
    return;
  }
  p.byRank[rank] = m;
  ++p.count;
  finishIfReady(m.name);
}

void Negotiator::join(int rank) {
  if (!joined_[rank]) {
    joined_[rank] = true;
    lastJoined_ = rank;
  }
  sweep();
  if (std::all_of(joined_.begin(), joined_.end(), [](bool j) { return j; })) {
    Response r;
    r.meta.name = "__join";
    r.meta.op = OpType::Join;
    r.lastJoined = lastJoined_;
    emit(std::move(r));
    std::fill(joined_.begin(), joined_.end(), false);
    lastJoined_ = -1;
  }
}

void Negotiator::sweep() {
  std::vector<std::string> names;
  for (const auto& [ord, name] : order_) names.push_back(name);
  for (const auto& n : names) finishIfReady(n);
}

void Negotiator::finishIfReady(const std::string& name) {
  auto it = table_.find(name);
  if (it == table_.end()) return;
  const Pending& p = it->second.second;
  int have = 0;
  for (int r = 0; r < nranks_; ++r) have += (p.byRank[r] || joined_[r]) ? 1 : 0;
  if (have < nranks_ || p.count == 0) return;
  Response resp = decide(name, p);
  order_.erase(it->second.first);
  table_.erase(it);
  emit(std::move(resp));
}

Response Negotiator::decide(const std::string& name, const Pending& p) const {
  Response r;
  const RequestMeta* first = nullptr;
  for (const auto& m : p.byRank)
    if (m) { first = &*m; break; }
  r.meta = *first;
  for (int k = 0; k < nranks_; ++k)
    if (!p.byRank[k]) r.joined.push_back(k);
  auto fail = [&](collResult_t code, std::string msg) {
    r.error = true;
    r.errorCode = code;
    r.errorMessage = std::move(msg);
    return r;
  };
  if (!p.duplicateError.empty()) return fail(collInvalidUsage, p.duplicateError);
  std::string mismatch = describeMismatch(p.byRank);
  if (!mismatch.empty()) return fail(collInvalidUsage, mismatch);
  if (!r.joined.empty()) {
    std::vector<int> j(r.joined.begin(), r.joined.end());
    if (first->op != OpType::Allreduce)
      return fail(collInvalidUsage, strCat("tensor '", name, "' (", opTypeName(first->op),
                                           ") cannot complete: ", ranksString(j),
                                           " joined; only allreduce runs with joined ranks"));
    if (!zerosNeutral(first->redOp))
      return fail(collInvalidUsage, strCat("tensor '", name, "': ", ranksString(j),
                                           " joined and contribute zeros, which only Sum and "
                                           "Average allow (op is ", opName(first->redOp), ")"));
  }
  if (first->op == OpType::Allgather || first->op == OpType::Alltoall) {
    for (int k = 0; k < nranks_; ++k)
      r.firstDims.push_back(p.byRank[k]->shape.empty() ? 1 : p.byRank[k]->shape[0]);
  }
  if (first->op == OpType::Alltoall) {
    for (int k = 0; k < nranks_; ++k) {
      const auto& s = p.byRank[k]->splits;
      if (static_cast<int>(s.size()) != nranks_)
        return fail(collInvalidArgument, strCat("tensor '", name, "': rank ", k, " gave ",
                                                s.size(), " splits for ", nranks_, " ranks"));
      r.splitMatrix.insert(r.splitMatrix.end(), s.begin(), s.end());
    }
  }
  return r;
}

void Negotiator::emit(Response r) {
  const RequestMeta& m = r.meta;
  if (m.group.empty() || m.groupSize <= 1) {
    ready_.push_back(std::move(r));
    return;
  }
  // Grouped members are released together so the fusion policy sees them side by side.
  auto& held = groups_[m.group];
  int size = m.groupSize;
  std::string group = m.group;
  held.push_back(std::move(r));
  if (static_cast<int>(held.size()) >= size) {
    for (auto& x : held) ready_.push_back(std::move(x));
    groups_.erase(group);
  }
}

std::vector<Response> Negotiator::takeReady() {
  std::vector<Response> out;
  out.swap(ready_);
  return out;
}

std::vector<Negotiator::Stalled> Negotiator::stalled(double now, double minAge) const {
  std::vector<Stalled> out;
  for (const auto& [ord, name] : order_) {
    const Pending& p = table_.at(name).second;
    double age = now - p.firstSeen;
    if (age < minAge) continue;
    Stalled s{name, {}, {}, age, {}};
    for (int r = 0; r < nranks_; ++r) {
      if (p.byRank[r]) s.submitted.push_back(r);
      else if (!joined_[r]) s.missing.push_back(r);
    }
    for (int r : s.missing) {
      std::string waits;
      for (const auto& [ord2, other] : order_) {  // oldest first
        const auto& q = table_.at(other).second;
        if (other != name && q.byRank[r]) {
          waits = strCat(opTypeName(q.byRank[r]->op), " '", other, "'");
          break;
        }
      }
      s.missingWaitsIn.push_back(std::move(waits));
    }
    out.push_back(std::move(s));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Stalled& a, const Stalled& b) { return a.ageSeconds > b.ageSeconds; });
  return out;
}

}  // namespace coll::engine
