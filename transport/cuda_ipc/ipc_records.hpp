// The record each rank publishes of its device scratch for the CUDA IPC peers to open
// (IpcPeers::connect), exchanged as raw bytes through a host all-gather, and its checks.
// Pure logic, no CUDA header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace coll::cuda {

constexpr uint32_t kIpcRecordMagic = 0x52504943u;  // "CIPR"
constexpr uint32_t kIpcRecordVersion = 1;
constexpr size_t kIpcHandleBytes = 64;  // CUDA_IPC_HANDLE_SIZE
constexpr size_t kIpcErrorBytes = 120;

// One rank's scratch, for the others to open.
struct IpcScratchRecord {
  uint32_t magic = kIpcRecordMagic;
  uint32_t version = kIpcRecordVersion;
  int32_t rank = -1;
  int32_t pid = 0;
  int32_t device = -1;
  int32_t ok = 0;              // 0: allocation or export failed, error says why
  uint64_t process = 0;        // random per process: equal means one address space (pids
                               // alone can repeat across PID namespaces)
  uint64_t bytes = 0;
  uint64_t address = 0;        // for ranks of the same process (threads): no handle needed
  uint8_t handle[kIpcHandleBytes] = {};
  char error[kIpcErrorBytes] = {};  // NUL-terminated
};
static_assert(sizeof(IpcScratchRecord) == 232, "exchanged as raw bytes");

void setRecordError(IpcScratchRecord& r, const std::string& what);
// Throws collRemoteError naming the rank and the field for a malformed record.
void validateRecord(const IpcScratchRecord& r, int expectRank);
// "" when every record is ok; otherwise the first failing rank and its message.
std::string firstRecordFailure(const std::vector<IpcScratchRecord>& all);
// The scratch every rank can use: the smallest one offered.
size_t agreedScratchBytes(const std::vector<IpcScratchRecord>& all);

}  // namespace coll::cuda
