// The peer process of the UCX plugin's two-process tests (started fresh by fork + exec,
// so its UCX state owes nothing to the parent's). It connects both ways with the parent,
// exchanging blobs over two pipes, then:
//   echo N  receives N messages (sizes and patterns the parent chose, told by the tag),
//           checks them and sends each back with tag + 1;
//   hold    sends one message, writes "R" to the pipe and sleeps until killed.
// Usage: net_ucx_peer <plugin.so> <read fd> <write fd> echo N | hold
// Exit status: 0 when all went right; otherwise 1 with a message on stderr.
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "net_ucx_util.hpp"

using namespace net_ucx_test;

namespace {

const Api* api;
void* ctx;

[[noreturn]] void die(const std::string& what) {
  fprintf(stderr, "net_ucx_peer: %s: %s\n", what.c_str(), ctx ? api->lastError(ctx) : "");
  exit(1);
}

void readAll(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n) {
    ssize_t got = read(fd, c, n);
    if (got <= 0) die("reading the pipe");
    c += got;
    n -= size_t(got);
  }
}

void writeAll(int fd, const void* p, size_t n) {
  if (write(fd, p, n) != ssize_t(n)) die("writing the pipe");
}

void wait(void* req, size_t* size, uint64_t* tag, const char* what) {
  std::string why;
  if (waitRequest(api, ctx, req, size, tag, 60, &why)) die(std::string(what) + ": " + why);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) die("usage: net_ucx_peer <plugin.so> <read fd> <write fd> echo N | hold");
  std::string why;
  api = loadPlugin(argv[1], &why);
  if (!api) die(why);
  int rfd = atoi(argv[2]), wfd = atoi(argv[3]);
  std::string mode = argv[4];
  collNetInit_t in{logToStderr};
  if (api->init(&in, &ctx)) die("init");
  // Parent -> peer: the parent listens, the peer connects. Peer -> parent: the other way.
  char handle[COLL_NET_HANDLE_BYTES], reply[COLL_NET_HANDLE_BYTES];
  void *send = nullptr, *recv = nullptr, *listen = nullptr;
  readAll(rfd, handle, sizeof handle);
  if (api->connect(ctx, 0, handle, reply, &send)) die("connect");
  writeAll(wfd, reply, sizeof reply);
  if (api->listen(ctx, 0, handle, &listen)) die("listen");
  writeAll(wfd, handle, sizeof handle);
  readAll(rfd, reply, sizeof reply);
  if (api->accept(listen, reply, &recv)) die("accept");

  if (mode == "hold") {
    char msg[64] = "still here";
    void* req = nullptr;
    if (api->isend(send, msg, sizeof msg, 1, &req) || !req) die("isend");
    wait(req, nullptr, nullptr, "send");
    writeAll(wfd, "R", 1);
    for (;;) pause();
  }
  if (mode != "echo" || argc < 6) die("unknown mode " + mode);
  int n = atoi(argv[5]);
  // The parent puts the size in the tag's low 32 bits and the pattern seed above.
  std::vector<unsigned char> buf(64 << 20);
  for (int i = 0; i < n; ++i) {
    void* req = nullptr;
    size_t size = 0;
    uint64_t tag = 0;
    if (api->irecv(recv, buf.data(), buf.size(), &req) || !req) die("irecv");
    wait(req, &size, &tag, "receive");
    if (size != (tag & 0xFFFFFFFFu)) die("message " + std::to_string(i) + " has the wrong size");
    if (checkPattern(buf.data(), size, tag >> 32) != size) die("message " + std::to_string(i) + " arrived wrong");
    if (api->isend(send, buf.data(), size, tag + 1, &req) || !req) die("isend");
    wait(req, nullptr, nullptr, "send back");
  }
  if (api->closeSend(send) || api->closeRecv(recv)) die("close");
  api->finalize(ctx);
  return 0;
}
