// Wire format and striping rule of the TCP transport, kept free of I/O so both sides of
// a link (and the unit tests) compute the same layout.
//
// A link has S streams (sockets) per peer. Message `seq` (the seq-th send of a direction)
// is cut into pieces of at most `chunk` bytes (a 0-byte message is one empty piece);
// piece i travels on stream (seq + i) % S. Starting each message on stream seq % S
// spreads a window of small messages over all streams and, more importantly, makes the
// place of a message's first piece independent of the sizes of earlier messages.
//
// Only the first piece carries a header (on stream seq % S). The receiver reads a piece
// of message m on another stream only after m's header has proved that both sides agree
// on m's size; by induction every earlier message on every stream had agreed sizes too,
// so the byte layout of each stream is known exactly and a mismatch is always caught at
// a header, before it can shift anything.
#pragma once

#include <cstddef>
#include <cstdint>

namespace coll::tcp {

constexpr uint32_t kWireMagic = 0x54435032u;  // "TCP2"

struct WireHeader {
  uint32_t magic;
  uint32_t seq;    // low 32 bits of the message's sequence number
  uint64_t bytes;  // the sender's size of the whole message
  uint64_t call;   // the signature of the sender's call (Xfer::call)
};
static_assert(sizeof(WireHeader) == 24, "the header is part of the wire format");

inline uint32_t pieceCount(size_t bytes, size_t chunk) {
  return bytes == 0 ? 1u : static_cast<uint32_t>((bytes + chunk - 1) / chunk);
}
inline size_t pieceOffset(uint32_t piece, size_t chunk) { return size_t(piece) * chunk; }
inline size_t pieceLength(size_t bytes, uint32_t piece, size_t chunk) {
  size_t off = pieceOffset(piece, chunk);
  return bytes - off < chunk ? bytes - off : chunk;
}
inline int pieceStream(uint64_t seq, uint32_t piece, int streams) {
  return static_cast<int>((seq + piece) % uint64_t(streams));
}
// The first piece of message `seq` that travels on stream s (it may be past the end).
inline uint32_t firstPieceOn(uint64_t seq, int s, int streams) {
  uint64_t S = uint64_t(streams);
  return static_cast<uint32_t>((uint64_t(s) + S - seq % S) % S);
}

}  // namespace coll::tcp
