// Host-side reading of a validated Problem whose arrays are host memory (CPU backend, reference).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "mla/mla.h"

namespace mla {

inline std::int32_t kv_length(const Problem& p, int b) {
  return p.kv_indptr[b + 1] - p.kv_indptr[b];
}

// Logical token n of request b → physical KV row (SPEC §1).
inline std::int64_t physical_row(const Problem& p, int b, std::int64_t n) {
  const Paging& pg = p.paging;
  if (pg.page_size == 0) return std::int64_t(p.kv_indptr[b]) + n;
  const std::int64_t base =
      pg.page_table_stride > 0 ? std::int64_t(b) * pg.page_table_stride : std::int64_t(p.kv_indptr[b]);
  const std::int64_t page = pg.page_table[base + n / pg.page_size];
  return page * pg.page_size + n % pg.page_size;
}

// Keys visible to query token i (0-based) of a request with L keys and s_q query tokens.
inline std::int64_t visible_keys(std::int64_t L, int s_q, int i) {
  const std::int64_t v = L - s_q + i + 1;
  return v < 0 ? 0 : (v > L ? L : v);
}

// The CUDA plan's virtual requests, one per query token: row b·s_q + i sees visible_keys(L_b, s_q, i)
// keys of request b, whose KV holds `request_lengths[b]` tokens.
inline std::vector<std::int32_t> query_row_lengths(std::span<const std::int32_t> request_lengths, int s_q) {
  std::vector<std::int32_t> rows;
  rows.reserve(request_lengths.size() * std::size_t(s_q));
  for (std::int32_t len : request_lengths) {
    for (int i = 0; i < s_q; ++i) rows.push_back(std::int32_t(visible_keys(len, s_q, i)));
  }
  return rows;
}

// Row pairs (s_q even; the CUDA plan's pair kernels): pair k of request b, q rows b·s_q + 2k and + 1,
// is the virtual request b·(s_q / 2) + k, of its second row's visible keys (the first sees one fewer,
// or none when the second sees none).
inline std::vector<std::int32_t> row_pair_lengths(std::span<const std::int32_t> request_lengths, int s_q) {
  std::vector<std::int32_t> pairs;
  pairs.reserve(request_lengths.size() * std::size_t(s_q / 2));
  for (std::int32_t len : request_lengths) {
    for (int k = 0; k < s_q / 2; ++k) pairs.push_back(std::int32_t(visible_keys(len, s_q, 2 * k + 1)));
  }
  return pairs;
}

}  // namespace mla
