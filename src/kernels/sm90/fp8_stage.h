// The shared-memory layout of one 64-token fp8 tile in decode_fp8.cu — plain arithmetic, host and
// device, so that the unit tests (tests/unit/test_fp8_stage.cpp) check it without a GPU.
//
// Rows are unpadded (576 bytes, as stored: a stage is the tile's 36,864 bytes); 16-byte chunk c of
// row r sits at kv_offset(r, c) = 576r + 16·(c ^ f(r)), f(r) = (r / 2) % 4. The XOR flips the
// chunk's two low bits only, so every 128-byte line of the tile stays one line of the stage (a
// whole-line copy by 8 lanes hits 8 distinct bank groups), and the 8 rows of an ldmatrix matrix at
// one chunk land in 8 distinct bank groups (rows 2m and 2m + 1 are 36 chunks ≡ 4 groups apart; the
// row pairs' f differ).
#pragma once

#include "kernels/common/host_device.h"

namespace mla::sm90::fp8_stage {

constexpr int kRowBytes = 576;  // e4m3 KV row
constexpr int kRows = 64;       // tokens per tile
constexpr int kChunks = kRowBytes / 16;
constexpr int kBytes = kRows * kRowBytes;

MLA_HD constexpr int swizzle(int r) {
  return (r >> 1) & 3;
}
// Byte offset of 16-byte chunk c of tile row r.
MLA_HD constexpr int kv_offset(int r, int c) {
  return r * kRowBytes + 16 * (c ^ swizzle(r));
}
// A dense tile copied linearly: piece n (bytes 16n .. 16n + 15 of the tile) = chunk n % 36 of row
// n / 36, whose f is (n / 72) % 4.
MLA_HD constexpr int dense_offset(int n) {
  return (16 * n) ^ (((n / (2 * kChunks)) & 3) << 4);
}
// ldmatrix of the K fragments (S): lane's row 16w + lane % 8 + 8·((lane / 8) % 2), chunk k + lane / 16
// for an even k — f(row) = (lane / 2) % 4, so the chunk is (k & ~3) + (((k & 2) | lane / 16) ^ f):
// the offset from the row's start, two values per lane.
MLA_HD constexpr int k_chunk_offset(int lane, int k) {
  return 16 * (k & ~3) + 16 * (((k & 2) | (lane / 16)) ^ ((lane >> 1) & 3));
}
// ldmatrix.trans of the V fragments (P·V): row 32ks + lane, chunk 4mt + w: f(row) = (lane / 2) % 4
// flips only w's bits.
MLA_HD constexpr int v_offset(int lane, int warp, int ks, int mt) {
  return (32 * ks + lane) * kRowBytes + 64 * mt + 16 * (warp ^ ((lane >> 1) & 3));
}

}  // namespace mla::sm90::fp8_stage
