// Connections of the TCP transport made when first used: at set-up each rank opens one
// listener and all-gathers its address (one bootstrap round, as the eager set-up), and a
// thread of its own accepts and authenticates whatever peers dial it from then on. The
// link to a peer is made when an algorithm first needs it: the lower rank of the pair
// dials the higher; the higher gets at once a link that holds what is posted on it until
// its thread has accepted the peer's streams (which progress() then takes). Since the
// thread serves every dialer whatever the rank's own thread does, and posting never
// waits, no order in which two ranks reach each other can deadlock them; a job holds
// only the links its algorithms use (a ring: two).
#pragma once

#include <memory>
#include <vector>

#include "transport/tcp/tcp_connect.hpp"
#include "transport/transport.hpp"

namespace coll::tcp {

class LazyAcceptor;

class LazyFactory final : public LinkFactory {
 public:
  // Collective over ctx.bootstrap (one all-gather, also with no peers).
  LazyFactory(const TransportContext& ctx, const std::vector<int>& peers, const StreamOptions& opt);
  ~LazyFactory() override;
  std::unique_ptr<Link> connect(int peer, const Deadline& deadline) override;
  size_t descriptors() const override;

 private:
  int rank_;
  Bootstrap* bootstrap_;
  std::string jobTag_;
  const uint8_t* secret_;
  StreamOptions opt_;
  std::vector<ListenRecord> recs_;
  std::vector<char> isPeer_;
  std::unique_ptr<LazyAcceptor> acceptor_;
};

}  // namespace coll::tcp
