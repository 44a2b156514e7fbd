// The online-softmax state of one query row and its merge rule — the one definition used by the
// CUDA kernels, the CPU backend, the split combine and the tests.
//
// A state summarises a set of logits {s_n} (already multiplied by sm_scale) as
//   m = max_n s_n,   l = Σ_n exp(s_n − m)       (and, beside it, acc = Σ_n exp(s_n − m) · v_n)
// The empty state is m = −inf, l = 0: merging it with anything is the identity, and finishing
// it gives output 0 and LSE −inf (SPEC §1: L = 0).
#pragma once

#include <cmath>

#include "kernels/common/host_device.h"

namespace mla {

template <typename T>
struct SoftmaxState {
  T m;  // running max of the logits seen, −inf when empty
  T l;  // Σ exp(s − m)

  static MLA_HD SoftmaxState empty() { return {-INFINITY, T(0)}; }
  // Exactly zero: a NaN l (a NaN logit or value upstream) is not empty, so the NaN reaches the
  // output and the LSE rather than reading as a request with no keys (zeros and −inf).
  MLA_HD bool is_empty() const { return l == T(0); }

  // Folds in a block whose max logit is `block_max`. Returns the factor by which everything
  // accumulated so far (l and acc) must be multiplied; the caller then adds the block's
  // exp(s − m) terms (to l via add(), to acc directly). Safe when both are −inf.
  MLA_HD T rescale_to(T block_max) {
    const T m_new = block_max > m ? block_max : m;
    const T factor = (m == m_new) ? T(1) : exp(m - m_new);  // m = −inf → 0
    m = m_new;
    l *= factor;
    return factor;
  }
  MLA_HD void add(T p) { l += p; }
  // The max a block's weights are taken against, exp(s − shift()): m, or 0 for the empty state, whose
  // masked logits (−inf) then weigh exp(−inf) = 0 where −inf − (−inf) would be NaN. (A kernel whose
  // state can still be empty at a block — a row that sees none of the block's keys — needs it.)
  MLA_HD T shift() const { return m == T(-INFINITY) ? T(0) : m; }

  // Merges two partial states; writes the weights each side's accumulator gets
  // (acc = wa·acc_a + wb·acc_b). Empty sides get weight 0.
  static MLA_HD SoftmaxState merge(const SoftmaxState& a, const SoftmaxState& b, T* wa, T* wb) {
    if (a.is_empty()) {
      *wa = T(0);
      *wb = b.is_empty() ? T(0) : T(1);
      return b;
    }
    if (b.is_empty()) {
      *wa = T(1);
      *wb = T(0);
      return a;
    }
    const T m = a.m > b.m ? a.m : b.m;
    *wa = exp(a.m - m);
    *wb = exp(b.m - m);
    return {m, a.l * *wa + b.l * *wb};
  }

  // Natural-log LSE of the logits; −inf when empty.
  MLA_HD T lse() const { return is_empty() ? T(-INFINITY) : m + log_(l); }
  // Factor turning acc into the output: 1/l, or 0 when empty (output zeros).
  MLA_HD T inv_l() const { return is_empty() ? T(0) : T(1) / l; }

  // Weight of a partial with log-sum-exp `lse` inside the merged state `total` of all partials:
  // the closed form of a chain of merge() calls (Σ weights = 1; empty partial → 0).
  MLA_HD T weight_of(T partial_lse) const {
    return (is_empty() || partial_lse == T(-INFINITY)) ? T(0) : exp(partial_lse - m) / l;
  }

  // From an LSE back to a state with l = 1 (how split partials are stored).
  static MLA_HD SoftmaxState from_lse(T lse) { return lse == T(-INFINITY) ? empty() : SoftmaxState{lse, T(1)}; }

  // The exponential of every weight above, also used by the kernels for their P = exp(s − m). On
  // the device in float: 2^(x·log2 e) by ex2.approx.ftz (relative error ~2^-22; results below
  // 2^-126 flush to 0, exp(−inf) = 0) — two instructions, where __expf adds a range fix-up for
  // subnormal results that a softmax weight never needs.
  static MLA_HD T exp(T x) {
#if defined(__CUDA_ARCH__)
    if constexpr (sizeof(T) == 4) {
      float r;
      asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x * 1.4426950408889634f));
      return r;
    } else {
      return ::exp(x);
    }
#else
    return std::exp(x);
#endif
  }

 private:
  static MLA_HD T log_(T x) {
#if defined(__CUDA_ARCH__)
    if constexpr (sizeof(T) == 4)
      return __logf(x);
    else
      return ::log(x);
#else
    return std::log(x);
#endif
  }
};

}  // namespace mla
