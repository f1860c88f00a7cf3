// The torch.distributed process group (python/c10d) driven from C++ without Python: the
// ranks are threads of this process rendezvousing through one c10d HashStore. Checks
// values against references computed here; exits non-zero on the first difference.
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "process_group.hpp"

namespace {

void expect(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error(what);
}

void rankMain(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size) {
  auto pg = c10::make_intrusive<collective_c10d::ProcessGroupCollective>(store, rank, size,
                                                                        std::chrono::milliseconds(60000));
  // all-reduce, with a future chained on it
  std::vector<at::Tensor> t{at::full({7}, static_cast<double>(rank + 1), at::kDouble)};
  auto work = pg->allreduce(t);
  auto fut = work->getFuture()->then(
      [](c10::ivalue::Future& f) { return c10::IValue(f.value().toTensorVector()[0] * 2); },
      c10::TensorType::get());
  fut->wait();
  expect(work->isCompleted() && work->isSuccess(), "allreduce work completed");
  const double sum = size * (size + 1) / 2.0;
  expect(at::equal(t[0], at::full({7}, sum, at::kDouble)), "allreduce sum");
  expect(at::equal(fut->value().toTensor(), at::full({7}, 2 * sum, at::kDouble)), "future then");
  // uneven all-to-all: rank r sends r + p + 1 rows of 2 to rank p
  std::vector<int64_t> in, out;
  int64_t inRows = 0, outRows = 0;
  for (int p = 0; p < size; ++p) {
    in.push_back(rank + p + 1);
    out.push_back(p + rank + 1);
    inRows += in.back();
    outRows += out.back();
  }
  at::Tensor input = at::empty({inRows, 2}, at::kInt);
  for (int p = 0, row = 0; p < size; ++p)
    for (int k = 0; k < in[p]; ++k, ++row) input[row].fill_(100 * rank + p);
  at::Tensor output = at::zeros({outRows, 2}, at::kInt);
  pg->alltoall_base(output, input, out, in)->wait();
  for (int p = 0, row = 0; p < size; ++p)
    for (int k = 0; k < out[p]; ++k, ++row)
      expect(output[row][0].item<int>() == 100 * p + rank && output[row][1].item<int>() == 100 * p + rank,
             "alltoall_base row " + std::to_string(row));
  // send/recv around a ring, both in flight
  std::vector<at::Tensor> s{at::full({5}, static_cast<float>(rank))}, r{at::zeros({5})};
  auto sw = pg->send(s, (rank + 1) % size, 3);
  auto rw = pg->recv(r, (rank + size - 1) % size, 3);
  sw->wait();
  rw->wait();
  expect(at::equal(r[0], at::full({5}, static_cast<float>((rank + size - 1) % size))), "send/recv ring");
  // a bad argument raises at the call
  bool raised = false;
  try {
    std::vector<at::Tensor> b{at::zeros({2})};
    c10d::BroadcastOptions o;
    o.rootRank = size;
    pg->broadcast(b, o);
  } catch (const std::exception& e) {
    raised = std::string(e.what()).find("out of range") != std::string::npos;
  }
  expect(raised, "broadcast with root out of range raises");
  // monitored barriers, every rank there (the group's timeout, then one of 10 s)
  pg->monitoredBarrier();
  c10d::BarrierOptions mo;
  mo.timeout = std::chrono::milliseconds(10000);
  pg->monitoredBarrier(mo, true);
  pg->barrier()->wait();
}

}  // namespace

int main() {
  const int size = 3;
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::thread> ranks;
  std::vector<std::string> errors(size);
  for (int r = 0; r < size; ++r)
    ranks.emplace_back([&, r] {
      try {
        rankMain(store, r, size);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : ranks) t.join();
  int rc = 0;
  for (int r = 0; r < size; ++r)
    if (!errors[r].empty()) {
      std::fprintf(stderr, "rank %d: %s\n", r, errors[r].c_str());
      rc = 1;
    }
  if (rc == 0) std::printf("process group: %d thread ranks OK\n", size);
  return rc;
}
