#include "engine/stall.hpp"

#include <cstdio>
#include <sstream>

namespace coll::engine {
namespace {
std::string list(const std::vector<int>& v) {
  std::ostringstream os;
  for (size_t i = 0; i < v.size(); ++i) os << (i ? "," : "") << v[i];
  return os.str();
}
}  // namespace

std::string StallInspector::describe(const Negotiator::Stalled& s, int processSet) {
  char age[32];
  snprintf(age, sizeof(age), "%.1f", s.ageSeconds);
  std::ostringstream os;
  os << "stalled tensor '" << s.name << "' (process set " << processSet << ") waiting " << age
     << " s: submitted by rank(s) " << (s.submitted.empty() ? "none" : list(s.submitted))
     << "; missing rank(s) " << (s.missing.empty() ? "none" : list(s.missing));
  // Ranks that disagree on the order of their calls wait in each other's: say where.
  for (size_t i = 0; i < s.missing.size() && i < s.missingWaitsIn.size(); ++i)
    if (!s.missingWaitsIn[i].empty()) os << "; rank " << s.missing[i] << " waits in " << s.missingWaitsIn[i];
  return os.str();
}

std::vector<std::string> StallInspector::check(const Negotiator& n, double now) {
  std::vector<std::string> out;
  if (p_.warnSeconds <= 0 || now - lastReport_ < p_.warnSeconds) return out;
  for (const auto& s : n.stalled(now, p_.warnSeconds)) out.push_back(describe(s, processSet_));
  if (!out.empty()) lastReport_ = now;
  return out;
}

std::string StallInspector::shutdownReason(const Negotiator& n, double now) const {
  if (p_.shutdownSeconds <= 0) return "";
  auto st = n.stalled(now, p_.shutdownSeconds);
  if (st.empty()) return "";
  return describe(st.front(), processSet_) + " (past COLL_STALL_SHUTDOWN_SECONDS)";
}

std::string StallInspector::followerReason(const Negotiator& n, double now) const {
  auto st = n.stalled(now, 0);
  if (st.empty()) return "a tensor stalled past COLL_STALL_SHUTDOWN_SECONDS on rank 0";
  return describe(st.front(), processSet_) + " (past COLL_STALL_SHUTDOWN_SECONDS on rank 0)";
}

}  // namespace coll::engine
