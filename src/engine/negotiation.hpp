// The negotiation state machine. Every rank feeds it the same all-gathered messages in
// the same order, so every rank reaches the same decisions in the same order without a
// coordinator: a tensor becomes ready once every rank (or every rank that has not
// joined) submitted it, and is then checked for agreement across ranks.
//
// Pure logic: no communication, no clocks (the caller passes `now`).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/request.hpp"

namespace coll::engine {

class Negotiator {
 public:
  explicit Negotiator(int nranks);

  // One round: msgs[r] holds rank r's new requests, in its submission order.
  void addRound(const std::vector<std::vector<RequestMeta>>& msgs, double now);
  // Responses decided since the last call, in decision order.
  std::vector<Response> takeReady();

  struct Stalled {
    std::string name;
    std::vector<int> submitted;
    std::vector<int> missing;
    double ageSeconds;
    // For each missing rank (same order), what it waits in instead: "<op> '<name>'" of the
    // oldest other pending tensor it submitted, or empty when it submitted none.
    std::vector<std::string> missingWaitsIn;
  };
  // Tensors waiting longer than minAge seconds, oldest first.
  std::vector<Stalled> stalled(double now, double minAge) const;
  bool isJoined(int rank) const { return joined_.at(rank); }
  size_t pendingCount() const { return table_.size(); }

 private:
  struct Pending {
    std::vector<std::optional<RequestMeta>> byRank;
    int count = 0;
    double firstSeen = 0;
    std::string duplicateError;
  };
  void add(int rank, const RequestMeta& m, double now);
  void join(int rank);
  void finishIfReady(const std::string& name);
  void sweep();  // after a join: tensors that waited only for joined ranks
  Response decide(const std::string& name, const Pending& p) const;
  void emit(Response r);

  int nranks_;
  std::vector<bool> joined_;
  int lastJoined_ = -1;
  uint64_t nextOrder_ = 0;
  std::map<uint64_t, std::string> order_;  // insertion order -> name (deterministic sweeps)
  std::unordered_map<std::string, std::pair<uint64_t, Pending>> table_;
  std::unordered_map<std::string, std::vector<Response>> groups_;  // held until complete
  std::vector<Response> ready_;
};

// The mismatch text for one tensor, or "" when all submitted metas agree. Exposed for tests.
std::string describeMismatch(const std::vector<std::optional<RequestMeta>>& byRank);

}  // namespace coll::engine
