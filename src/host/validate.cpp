#include "host/validate.h"

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>

namespace mla {
namespace {

Status invalid(const std::string& msg) {
  return {StatusCode::invalid_argument, msg};
}

bool mul_ok(std::int64_t a, std::int64_t b, std::int64_t* r) {
  return !__builtin_mul_overflow(a, b, r);
}

bool aligned(const void* ptr, std::uintptr_t n) {
  return (reinterpret_cast<std::uintptr_t>(ptr) % n) == 0;
}

bool known_format(KvFormat f) {
  switch (f) {
    case KvFormat::bf16:
    case KvFormat::fp8:
    case KvFormat::mxfp4:
      return true;
  }
  return false;
}

}  // namespace

std::int64_t kv_row_bytes(KvFormat format) {
  switch (format) {
    case KvFormat::bf16:
      return 2 * kHeadDim;
    case KvFormat::fp8:
      return kHeadDim;
    case KvFormat::mxfp4:
      return kHeadDim / 2;
  }
  return 0;
}

const char* to_string(KvFormat format) {
  switch (format) {
    case KvFormat::bf16:
      return "bf16";
    case KvFormat::fp8:
      return "fp8";
    case KvFormat::mxfp4:
      return "mxfp4";
  }
  return "unknown";
}

const char* to_string(Backend backend) {
  switch (backend) {
    case Backend::cpu:
      return "cpu";
    case Backend::cuda:
      return "cuda";
  }
  return "unknown";
}

Status validate_description(const Problem& p, Backend backend) {
  if (backend != Backend::cpu && backend != Backend::cuda) return invalid("unknown backend");
  if (p.batch <= 0) return invalid("batch must be >= 1, got " + std::to_string(p.batch));
  if (p.s_q < 1 || p.s_q > kMaxSq) return invalid("s_q must be in 1..4, got " + std::to_string(p.s_q));
  if (!p.q) return invalid("q is null");
  if (!p.qo_indptr) return invalid("qo_indptr is null");
  if (!p.kv_indptr) return invalid("kv_indptr is null");
  if (!p.out) return invalid("out is null");
  if (!p.kv.data) return invalid("kv.data is null");
  if (!known_format(p.kv.format)) return invalid("unknown KV format " + std::to_string(int(p.kv.format)));
  std::int64_t expect_q = 0;
  if (!mul_ok(p.batch, p.s_q, &expect_q) || p.total_q != expect_q) {
    return invalid("total_q must be batch * s_q = " + std::to_string(std::int64_t(p.batch) * p.s_q) + ", got " +
                   std::to_string(p.total_q));
  }
  if (p.total_q > kMaxTotalQ) {
    return invalid("batch * s_q = " + std::to_string(p.total_q) + " query rows exceeds kMaxTotalQ = 2^30");
  }
  if (!std::isfinite(p.sm_scale)) return invalid("sm_scale must be finite");
  if (p.kv.rows < 0) return invalid("kv.rows must be >= 0");
  const std::int64_t row_bytes = kv_row_bytes(p.kv.format);
  if (p.kv.row_stride_bytes < row_bytes) {
    return invalid("kv.row_stride_bytes " + std::to_string(p.kv.row_stride_bytes) + " < " + std::to_string(row_bytes) +
                   " bytes of a " + to_string(p.kv.format) + " row");
  }
  if (p.kv.format == KvFormat::fp8 && !(std::isfinite(p.kv.fp8_scale) && p.kv.fp8_scale > 0.0f)) {
    return invalid("kv.fp8_scale must be finite and > 0");
  }
  if (p.kv.format == KvFormat::mxfp4) {
    if (!p.kv.scales) return invalid("kv.scales (E8M0 matrix) is null for mxfp4");
    if (p.kv.scale_stride < kMxfp4ScalesPerRow) {
      return invalid("kv.scale_stride " + std::to_string(p.kv.scale_stride) + " < 18 scales per row");
    }
  }
  // Every byte offset the kernels form must fit in 64 bits.
  std::int64_t bytes = 0;
  if (!mul_ok(p.kv.rows, p.kv.row_stride_bytes, &bytes))
    return invalid("kv.rows * kv.row_stride_bytes overflows 64 bits");
  if (p.kv.format == KvFormat::mxfp4 && !mul_ok(p.kv.rows, p.kv.scale_stride, &bytes)) {
    return invalid("kv.rows * kv.scale_stride overflows 64 bits");
  }
  if (!mul_ok(p.total_q, std::int64_t(kNumHeads) * kHeadDim * 2, &bytes)) return invalid("q size overflows 64 bits");
  switch (p.paging.page_size) {
    case 0:
      break;
    case 1:
    case 16:
    case 64:
      if (!p.paging.page_table) return invalid("paging.page_table is null");
      if (p.paging.page_table_entries <= 0) return invalid("paging.page_table_entries must be >= 1");
      if (p.paging.page_table_stride < 0) return invalid("paging.page_table_stride must be >= 0");
      if (p.paging.page_table_stride == 0 && p.paging.page_size != 1) {
        return invalid("paging.page_table_stride 0 (flat kv_indices) needs page_size 1");
      }
      if (!mul_ok(p.batch, p.paging.page_table_stride, &bytes)) return invalid("page table size overflows 64 bits");
      break;
    default:
      return invalid("page_size must be 0 (contiguous), 1, 16 or 64, got " + std::to_string(p.paging.page_size));
  }
  if (backend == Backend::cuda) {
    if (!aligned(p.q, 16)) return invalid("q must be 16-byte aligned for the cuda backend");
    if (!aligned(p.out, 16)) return invalid("out must be 16-byte aligned for the cuda backend");
    if (!aligned(p.kv.data, 16)) return invalid("kv.data must be 16-byte aligned for the cuda backend");
    if (p.kv.row_stride_bytes % 16 != 0)
      return invalid("kv.row_stride_bytes must be a multiple of 16 for the cuda backend");
    if (p.kv.format == KvFormat::mxfp4 && !aligned(p.kv.scales, 16)) {
      return invalid("kv.scales must be 16-byte aligned for the cuda backend");
    }
    if (p.kv.format == KvFormat::mxfp4 && p.kv.scale_stride % 2 != 0) {  // the kernel reads scale pairs
      return invalid("kv.scale_stride must be even for the cuda backend, got " + std::to_string(p.kv.scale_stride));
    }
    if (p.lse && !aligned(p.lse, 16)) return invalid("lse must be 16-byte aligned for the cuda backend");
    if (!aligned(p.qo_indptr, 4) || !aligned(p.kv_indptr, 4) ||
        (p.paging.page_size && !aligned(p.paging.page_table, 4))) {
      return invalid("index arrays must be 4-byte aligned");
    }
  }
  return Status::success();
}

Status validate_contents(const Problem& p, const std::int32_t* qo, const std::int32_t* kv, const std::int32_t* pages) {
  if (qo[0] != 0) return invalid("qo_indptr[0] must be 0, got " + std::to_string(qo[0]));
  if (kv[0] != 0) return invalid("kv_indptr[0] must be 0, got " + std::to_string(kv[0]));
  for (int b = 0; b < p.batch; ++b) {
    const std::int64_t nq = std::int64_t(qo[b + 1]) - qo[b];
    if (nq != p.s_q) {
      return invalid("request " + std::to_string(b) + " has " + std::to_string(nq) +
                     " query rows (qo_indptr), expected s_q = " + std::to_string(p.s_q));
    }
    if (kv[b + 1] < kv[b]) return invalid("kv_indptr decreases at request " + std::to_string(b));
  }
  // qo[0] = 0 and steps of exactly s_q put qo[B] at B · s_q = total_q: inside the q buffer.
  const std::int64_t total_kv = kv[p.batch];
  if (p.paging.page_size == 0) {
    if (total_kv > p.kv.rows) {
      return invalid("kv_indptr[B] = " + std::to_string(total_kv) + " points past the " + std::to_string(p.kv.rows) +
                     " rows of the KV cache");
    }
    return Status::success();
  }
  const std::int64_t ps = p.paging.page_size;
  const std::int64_t num_pages = p.kv.rows / ps;
  for (int b = 0; b < p.batch; ++b) {
    const std::int64_t len = std::int64_t(kv[b + 1]) - kv[b];
    const std::int64_t used = (len + ps - 1) / ps;
    const std::int64_t stride = p.paging.page_table_stride;
    if (stride > 0 && used > stride) {
      return invalid("request " + std::to_string(b) + " needs " + std::to_string(used) +
                     " pages, more than page_table_stride " + std::to_string(stride));
    }
    const std::int64_t base = stride > 0 ? std::int64_t(b) * stride : std::int64_t(kv[b]);
    if (base + used > p.paging.page_table_entries) {
      return invalid("request " + std::to_string(b) + "'s pages run past the page table's " +
                     std::to_string(p.paging.page_table_entries) + " entries");
    }
    for (std::int64_t j = 0; j < used; ++j) {
      const std::int32_t e = pages[base + j];
      if (e < 0 || e >= num_pages) {
        return invalid("page-table entry " + std::to_string(base + j) + " = " + std::to_string(e) + " (request " +
                       std::to_string(b) + ") is outside the cache's " + std::to_string(num_pages) + " pages");
      }
    }
  }
  return Status::success();
}

}  // namespace mla
