#include "transport/cuda_ipc/ipc_records.hpp"

#include <cstdint>
#include <cstring>

#include "base/error.hpp"

namespace coll::cuda {

void setRecordError(IpcScratchRecord& r, const std::string& what) {
  r.ok = 0;
  std::memset(r.error, 0, sizeof r.error);
  std::memcpy(r.error, what.data(), what.size() < sizeof r.error - 1 ? what.size() : sizeof r.error - 1);
}

void validateRecord(const IpcScratchRecord& r, int expectRank) {
  if (r.magic != kIpcRecordMagic || r.version != kIpcRecordVersion)
    COLL_THROW(collRemoteError, "rank ", expectRank, " sent a malformed CUDA IPC record (magic ", r.magic,
               ", version ", r.version, ")");
  if (r.rank != expectRank)
    COLL_THROW(collRemoteError, "CUDA IPC record of rank ", expectRank, " says rank ", r.rank);
  if (r.ok != 0 && r.ok != 1)
    COLL_THROW(collRemoteError, "CUDA IPC record of rank ", expectRank, ": ok = ", r.ok);
  if (std::memchr(r.error, 0, sizeof r.error) == nullptr)
    COLL_THROW(collRemoteError, "CUDA IPC record of rank ", expectRank, ": unterminated error text");
  if (r.ok && (r.bytes == 0 || r.address == 0 || r.device < 0))
    COLL_THROW(collRemoteError, "CUDA IPC record of rank ", expectRank, ": ", r.bytes, " bytes at ",
               r.address, " on device ", r.device);
}

std::string firstRecordFailure(const std::vector<IpcScratchRecord>& all) {
  for (const IpcScratchRecord& r : all)
    if (!r.ok) return strCat("rank ", r.rank, ": ", r.error);
  return "";
}

size_t agreedScratchBytes(const std::vector<IpcScratchRecord>& all) {
  size_t bytes = SIZE_MAX;
  for (const IpcScratchRecord& r : all)
    if (r.bytes < bytes) bytes = static_cast<size_t>(r.bytes);
  return all.empty() ? 0 : bytes;
}

}  // namespace coll::cuda
