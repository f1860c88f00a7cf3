// Data-parallel training of the reference CNN on Fashion-MNIST:
//   collectiverun -np 2 train_fashion_mnist --epochs 2 --batch-size 64 --lr 0.05
// Surviving lost ranks (frontend/train/elastic.hpp):
//   collectiverun -np 4 --elastic --min-np 2 train_fashion_mnist --elastic --batch-size 48
#include <cstdio>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "blas.hpp"
#include "collective.h"
#include "collective/hvd.hpp"
#include "comm.hpp"
#include "base/error.hpp"
#include "data/fashion_mnist.hpp"
#include "train/elastic.hpp"
#include "train/options.hpp"
#include "train/pipeline_trainer.hpp"
#include "train/ps_trainer.hpp"
#include "train/trainer.hpp"

using namespace collective::frontend;
namespace hvd = collective::hvd;

namespace {

int train(const TrainOptions& o) {
  // Ranks share the machine's cores: a multi-threaded BLAS per rank would oversubscribe.
  setBlasThreads(o.blasThreads);
  collComm_t world = nullptr;
  collCheck(collCommInitFromEnv(&world), nullptr, "collCommInitFromEnv");
  OwnedComm worldOwner(world);
  if (o.mode == "ps") {
    const Dataset train = loadFashionMnist(o.dataDir, true, o.trainLimit);
    const Dataset test = loadFashionMnist(o.dataDir, false, o.testLimit);
    PsTrainer trainer(o, world, train, test, stdout);
    trainer.run();
    return 0;
  }
  if (o.mode == "pipeline") {
    const Dataset train = loadFashionMnist(o.dataDir, true, o.trainLimit);
    const Dataset test = loadFashionMnist(o.dataDir, false, o.testLimit);
    PipelineTrainer trainer(o, world, train, test, stdout);
    trainer.run();
    return 0;
  }
  if (o.elastic) {
    const Dataset train = loadFashionMnist(o.dataDir, true, o.trainLimit);
    const Dataset test = loadFashionMnist(o.dataDir, false, o.testLimit);
    runElastic(o, std::move(worldOwner), train, test, stdout);
    return 0;
  }
  // Split before the engine starts: afterwards its thread owns traffic on `world`.
  OwnedComm aux = OwnedComm::duplicate(world);
  auto ctx = hvd::Context::from_comm(world, false);
  COLL_CHECK_ARG(o.globalBatch % ctx->size() == 0, "--batch-size ", o.globalBatch,
                 " must be a multiple of the number of ranks ", ctx->size());
  const Dataset train = loadFashionMnist(o.dataDir, true, o.trainLimit);
  const Dataset test = loadFashionMnist(o.dataDir, false, o.testLimit);
  if (ctx->rank() == 0)
    std::printf(
        "train_fashion_mnist: %d rank(s), %lld train / %lld test images, local batch %lld\n",
        ctx->size(), static_cast<long long>(train.count), static_cast<long long>(test.count),
        static_cast<long long>(o.globalBatch / ctx->size()));
  {
    Trainer trainer(o, *ctx, aux.get(), train, test, stdout);
    trainer.run();
  }
  ctx->shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (const auto& a : args) {
    if (a == "-h" || a == "--help") {
      std::fputs(TrainOptions::usage().c_str(), stdout);
      return 0;
    }
  }
  try {
    return train(TrainOptions::parse(args));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_fashion_mnist: %s\n", e.what());
    return 1;
  }
}
