// Slurm hostlist and tasks-per-node parsing (formats as documented by Slurm's sbatch and
// srun output environment variables).
#include <cstdio>
#include <cstdlib>

#include "bootstrap/env_internal.hpp"
#include "base/error.hpp"

namespace coll {
namespace {

// Splits at commas outside brackets.
std::vector<std::string> splitTopLevel(const std::string& s, const std::string& whole) {
  std::vector<std::string> out;
  std::string cur;
  int depth = 0;
  for (char c : s) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    COLL_CHECK_ARG(depth >= 0 && depth <= 1, "hostlist '", whole, "': unbalanced or nested brackets");
    if (c == ',' && depth == 0) { out.push_back(cur); cur.clear(); continue; }
    cur += c;
  }
  COLL_CHECK_ARG(depth == 0, "hostlist '", whole, "': unclosed '['");
  out.push_back(cur);
  return out;
}

unsigned long parseNumber(const std::string& s, const std::string& whole) {
  COLL_CHECK_ARG(!s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos,
                 "hostlist '", whole, "': '", s, "' is not a number");
  return strtoul(s.c_str(), nullptr, 10);
}

// Expands one bracket group's ranges ("01-04,07") into the numbers as strings.
std::vector<std::string> expandRanges(const std::string& ranges, const std::string& whole, size_t maxHosts) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= ranges.size()) {
    size_t comma = ranges.find(',', pos);
    std::string item = ranges.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t dash = item.find('-');
    std::string lo = item.substr(0, dash);
    std::string hi = dash == std::string::npos ? lo : item.substr(dash + 1);
    unsigned long a = parseNumber(lo, whole), b = parseNumber(hi, whole);
    COLL_CHECK_ARG(a <= b, "hostlist '", whole, "': range ", item, " runs backwards");
    COLL_CHECK_ARG(b - a < maxHosts && out.size() + (b - a) < maxHosts, "hostlist '", whole,
                   "' names more than ", maxHosts, " hosts");
    int width = static_cast<int>(lo.size());  // "01-10" keeps two digits
    for (unsigned long v = a; v <= b; ++v) {
      char buf[32];
      snprintf(buf, sizeof(buf), "%0*lu", width, v);
      out.push_back(buf);
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

// Expands one host pattern, which may hold several bracket groups ("r[1-2]n[3-4]").
void expandPattern(const std::string& pat, const std::string& whole, size_t maxHosts,
                   std::vector<std::string>* out) {
  size_t lb = pat.find('[');
  if (lb == std::string::npos) {
    COLL_CHECK_ARG(pat.find(']') == std::string::npos, "hostlist '", whole, "': stray ']'");
    COLL_CHECK_ARG(out->size() < maxHosts, "hostlist '", whole, "' names more than ", maxHosts, " hosts");
    out->push_back(pat);
    return;
  }
  size_t rb = pat.find(']', lb);
  COLL_CHECK_ARG(rb != std::string::npos, "hostlist '", whole, "': unclosed '['");
  std::string prefix = pat.substr(0, lb);
  std::vector<std::string> rest;
  expandPattern(pat.substr(rb + 1), whole, maxHosts, &rest);
  for (const auto& n : expandRanges(pat.substr(lb + 1, rb - lb - 1), whole, maxHosts))
    for (const auto& r : rest) {
      COLL_CHECK_ARG(out->size() < maxHosts, "hostlist '", whole, "' names more than ", maxHosts, " hosts");
      out->push_back(prefix + n + r);
    }
}

}  // namespace

std::vector<std::string> expandHostlist(const std::string& list, size_t maxHosts) {
  std::vector<std::string> out;
  for (const auto& item : splitTopLevel(list, list)) {
    COLL_CHECK_ARG(!item.empty(), "hostlist '", list, "' has an empty entry");
    expandPattern(item, list, maxHosts, &out);
  }
  return out;
}

int tasksOnNode(const std::string& spec, int node) {
  COLL_CHECK_ARG(node >= 0, "tasks per node: node index ", node, " is negative");
  int first = 0;
  size_t pos = 0;
  while (pos < spec.size()) {
    size_t comma = spec.find(',', pos);
    std::string item = spec.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    // "2(x3)": 2 tasks on each of 3 nodes.
    size_t paren = item.find("(x");
    std::string countText = item.substr(0, paren);
    unsigned long count = parseNumber(countText, spec);
    unsigned long reps = 1;
    if (paren != std::string::npos) {
      COLL_CHECK_ARG(item.back() == ')', "tasks per node '", spec, "': '", item, "' lacks ')'");
      reps = parseNumber(item.substr(paren + 2, item.size() - paren - 3), spec);
    }
    if (static_cast<unsigned long>(node - first) < reps) return static_cast<int>(count);
    first += static_cast<int>(reps);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  COLL_THROW(collInvalidArgument, "tasks per node '", spec, "' lists ", first, " nodes; node index ", node,
             " is not among them");
}

}  // namespace coll
