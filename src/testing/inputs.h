// Seeded, deterministic test and benchmark inputs (SPEC §3): the challenge distribution
// (q, kv ~ 0.02·N(0,1)) and the peaked one (q ~ 150·N(0,1)); uniform, ragged and paged batches
// (shuffled pages); the three formats made from one bf16 source, as the challenge does.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mla/mla.h"
#include "mla/quantize.h"

namespace mla::testing {

enum class Distribution { challenge, peaked };

struct CaseSpec {
  std::vector<std::int32_t> kv_lens;  // one per request (batch = size)
  int s_q = 1;
  KvFormat format = KvFormat::bf16;
  Distribution dist = Distribution::challenge;
  int page_size = 0;               // 0 = contiguous; 1, 16, 64 = paged with shuffled pages
  bool pages_in_order = false;     // paged: pages not shuffled (request 0's pages first, in order), to
                                   // measure a page size's cost apart from the scattered reads
  bool flat_page_table = false;    // page_size 1 only: FlashInfer kv_indices (stride 0)
  std::int64_t scale_stride = 18;  // mxfp4: 18 or 24
  Mxfp4Rounding rounding = Mxfp4Rounding::rne;
  std::uint64_t seed = 1;
  // Extra rows at the end of the KV cache no request uses (they hold NaN/garbage in bf16 source
  // terms: the generator fills them with NaN bytes so that reading them poisons the result).
  // Paged: rounded up to whole spare pages, shuffled among the used ones. spare_rows > 0 also
  // fills the unused tail slots of partly used pages and the mxfp4 scale padding columns
  // (scale_stride > 18) with NaN bytes (0xFF); with spare_rows == 0 tail slots are zero rows.
  std::int64_t spare_rows = 0;
  // Bytes of padding after every KV row (a multiple of 16): the cache's row stride is the format's
  // row bytes plus this; the padding holds 0xFF bytes (NaN in bf16 and fp8), which no kernel may read.
  std::int64_t row_padding = 0;

  static CaseSpec uniform(int batch, int kv_len, KvFormat format);
  std::string name() const;  // e.g. "fp8 b4 kv1024 paged64 peaked"
};

// Host buffers of one case. Everything is owned here; problem() points into them.
struct HostInputs {
  CaseSpec spec;
  int batch = 0;
  std::int64_t total_q = 0;
  std::vector<std::uint16_t> q;         // [total_q × 16 × 576] bf16
  std::vector<std::int32_t> qo_indptr;  // [B+1]
  std::vector<std::int32_t> kv_indptr;  // [B+1]
  std::int64_t kv_rows = 0;             // physical rows
  std::vector<std::uint16_t> kv_bf16;   // [kv_rows × 576] the bf16 source (all formats)
  std::vector<std::uint8_t> kv_data;    // [kv_rows × kv_row_stride] the cache in `format`
  std::int64_t kv_row_stride = 0;       // kv_row_bytes(format) + spec.row_padding
  std::vector<std::uint8_t> kv_scales;  // mxfp4: [kv_rows × scale_stride]
  float fp8_scale = 1.0f;
  std::vector<std::int32_t> page_table;  // paged: [batch × stride] or flat [Σ L] (page_size 1)
  std::int64_t page_table_stride = 0;

  // A host-memory Problem over these buffers writing to `out` [total_q × 16 × 512] and `lse`.
  Problem problem(std::uint16_t* out, float* lse) const;
  // The same problem over the bf16 source (for the format error).
  Problem problem_bf16_source(std::uint16_t* out, float* lse) const;
  std::int64_t kv_bytes_read() const;  // KV bytes one call reads (data + scales), for GB/s
};

// threads: generator threads, 0 = hardware concurrency. The result never depends on it. The same
// seed gives the same logical q and KV values whatever the paging (only placement differs).
HostInputs make_inputs(const CaseSpec& spec, int threads = 0);

// Logits that climb through each request: every KV row of token n (of L) scaled by 2^(e·n/L), e =
// max_exponent (request index 3, if any, falls instead: 2^(e − e·n/L)), exact in bf16 (normal values), then the
// case's format quantized again from that source. Contiguous cases without spare rows or padding.
void climb_kv(HostInputs* in, int max_exponent);
// The climbing-logits case both backends' tests run: four requests (4096, 3000, 700, 1500 tokens;
// the last one's logits fall), seed 123, climbed by 2^16 (LSEs within fp32's reach of the 1e-4
// bound).
HostInputs climbing_inputs(KvFormat format);

// A NaN that request 0 reads and no other request does, planted in physical row `row` of a
// contiguous case (request 0's token `row`): bf16 element 5 (0xFFFF), fp8 byte 5 (e4m3 0x7F), or for
// MXFP4 the E8M0 scale of rope block 17 (dims 544..575: K only, never V) as 0xFF, with that block's
// codes all +1 and request 0's Q there all −1 in every head: no V term carries the NaN, the logits
// must. Both backends' NaN tests plant it the same way.
void plant_read_nan(HostInputs* in, std::int64_t row);

// Ragged lengths for tests: includes 0, 1, 63, 64, 65, primes and 8191 when count allows.
std::vector<std::int32_t> ragged_lengths(int batch, std::uint64_t seed, int max_len = 8191);

}  // namespace mla::testing
