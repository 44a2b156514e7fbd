// Checking a backend's output against the float64 reference (SPEC §3).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mla/mla.h"

namespace mla::testing {

struct Reference {
  std::vector<double> out;  // [total_q × 16 × 512]
  std::vector<double> lse;  // [total_q × 16], -inf for requests with no visible key
};

// Float64 attention over the dequantized KV of a validated host-memory problem.
Reference reference_decode(const Problem& p);

struct Comparison {
  double relerr = 0;           // ‖O − O_ref‖₂ / ‖O_ref‖₂ (0/0 → 0 when both are zero)
  double lse_max_abs = 0;      // max |LSE − LSE_ref| over finite entries
  std::int64_t nonfinite = 0;  // NaN/Inf outputs (including −inf-vs-finite LSE mismatches)
  bool ok(double relerr_bound = 4e-3, double lse_bound = 1e-4) const;
  std::string summary() const;
};

// `lse` may be empty (not compared).
Comparison compare(const std::vector<std::uint16_t>& out_bf16, const std::vector<float>& lse, const Reference& ref);

// Relative error between two float64 results (format error: dequantized vs bf16 source).
double relerr(const std::vector<double>& a, const std::vector<double>& ref);

}  // namespace mla::testing
