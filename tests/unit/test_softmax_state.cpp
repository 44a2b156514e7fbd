// The shared online-softmax state (src/kernels/common/softmax_state.h): rescale, merge, the empty
// state and weight_of, against a direct float64 computation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/common/softmax_state.h"

namespace mla {
namespace {

using State = SoftmaxState<double>;

State of(const std::vector<double>& s) {
  State st = State::empty();
  for (double x : s) {
    st.rescale_to(x);
    st.add(std::exp(x - st.m));
  }
  return st;
}

double lse_direct(const std::vector<double>& s) {
  double m = -INFINITY, sum = 0;
  for (double x : s) m = std::max(m, x);
  for (double x : s) sum += std::exp(x - m);
  return s.empty() ? -INFINITY : m + std::log(sum);
}

TEST(SoftmaxState, EmptyStateIsTheIdentityOfMerge) {
  const State e = State::empty();
  EXPECT_TRUE(e.is_empty());
  EXPECT_EQ(e.lse(), -INFINITY);
  EXPECT_EQ(e.inv_l(), 0.0);
  const State a = of({0.5, -3.0, 7.25});
  double wa, wb;
  State m = State::merge(e, a, &wa, &wb);
  EXPECT_EQ(wa, 0.0);
  EXPECT_EQ(wb, 1.0);
  EXPECT_DOUBLE_EQ(m.lse(), a.lse());
  m = State::merge(a, e, &wa, &wb);
  EXPECT_EQ(wa, 1.0);
  EXPECT_EQ(wb, 0.0);
  EXPECT_DOUBLE_EQ(m.lse(), a.lse());
  m = State::merge(e, e, &wa, &wb);
  EXPECT_TRUE(m.is_empty());
  EXPECT_EQ(wa, 0.0);
  EXPECT_EQ(wb, 0.0);
  EXPECT_EQ(State::from_lse(-INFINITY).lse(), -INFINITY);
}

// A NaN term (a NaN logit or value upstream) keeps the state NaN through every operation: it never
// reads as an empty state, which would turn a corrupt row into zeros and an LSE of −inf.
// A block's weights against shift(): masked logits weigh 0 even while the state is empty (a row pair's
// first row before it sees a key), where exp(−inf − m) with m = −inf would be NaN.
TEST(SoftmaxState, ShiftOfTheEmptyStateWeighsMaskedLogitsZero) {
  SoftmaxState<double> st = SoftmaxState<double>::empty();
  EXPECT_EQ(st.shift(), 0.0);
  EXPECT_TRUE(std::isnan(SoftmaxState<double>::exp(-INFINITY - st.m)));
  EXPECT_EQ(SoftmaxState<double>::exp(-INFINITY - st.shift()), 0.0);
  st.rescale_to(-INFINITY);  // a block of masked logits only: still empty
  EXPECT_EQ(st.shift(), 0.0);
  st.rescale_to(2.5);
  EXPECT_EQ(st.shift(), 2.5);
}

TEST(SoftmaxState, NanIsNotEmpty) {
  State s = of({0.5, -3.0});
  s.add(NAN);
  EXPECT_FALSE(s.is_empty());
  EXPECT_TRUE(std::isnan(s.inv_l()));
  EXPECT_TRUE(std::isnan(s.lse()));
  EXPECT_TRUE(std::isnan(s.weight_of(0.0)));
  double wa, wb;
  const State m = State::merge(s, of({1.0}), &wa, &wb);
  EXPECT_FALSE(m.is_empty());
  EXPECT_TRUE(std::isnan(m.lse()));
  State only_nan = State::empty();  // every logit NaN: the max stays −inf, l becomes NaN
  only_nan.rescale_to(NAN);
  only_nan.add(std::exp(NAN));
  EXPECT_FALSE(only_nan.is_empty());
  EXPECT_TRUE(std::isnan(only_nan.inv_l()));
  EXPECT_TRUE(std::isnan(only_nan.lse()));
}

TEST(SoftmaxState, OnlineAndMergedMatchDirect) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> n(0.0, 30.0);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<double> a(1 + trial % 7), b(1 + trial % 5);
    for (double& x : a) x = n(rng);
    for (double& x : b) x = n(rng);
    std::vector<double> all = a;
    all.insert(all.end(), b.begin(), b.end());
    EXPECT_NEAR(of(a).lse(), lse_direct(a), 1e-12);
    double wa, wb;
    const State m = State::merge(of(a), of(b), &wa, &wb);
    EXPECT_NEAR(m.lse(), lse_direct(all), 1e-12);
    // The accumulators' weights carry each side's Σ exp(s − m) into the merged frame, summed here
    // directly over the logits (not from merge()'s own l).
    const double top = *std::max_element(all.begin(), all.end());
    double la = 0, lb = 0;
    for (double x : a) la += std::exp(x - top);
    for (double x : b) lb += std::exp(x - top);
    EXPECT_EQ(m.m, top);
    EXPECT_NEAR(wa * of(a).l, la, 1e-12 * la);
    EXPECT_NEAR(wb * of(b).l, lb, 1e-12 * lb);
    EXPECT_NEAR(m.l, la + lb, 1e-12 * (la + lb));
  }
}

TEST(SoftmaxState, WeightOfIsTheClosedFormOfMergingPartials) {
  const std::vector<double> lses = {3.0, -INFINITY, 2.5, 10.0, -40.0};
  State total = State::empty();
  for (double l : lses) {
    double wa, wb;
    total = State::merge(total, State::from_lse(l), &wa, &wb);
  }
  double sum = 0;
  for (double l : lses) {
    const double w = total.weight_of(l);
    EXPECT_GE(w, 0.0);
    if (l == -INFINITY) {
      EXPECT_EQ(w, 0.0);
    }
    sum += w;
  }
  EXPECT_NEAR(sum, 1.0, 1e-15);
  EXPECT_NEAR(total.weight_of(10.0), std::exp(10.0 - total.lse()), 1e-15);
  EXPECT_EQ(State::empty().weight_of(1.0), 0.0);
}

// combine_few_kernel's closed form (combine.cu): a group holding its partials' LSEs at once starts
// from the largest, {m, 0}, adds exp(x − m) per partial, and normalises its Σ exp(x − m)·O_x by
// inv_l(); groups meet through merge(). Same state and weights as chaining merge(…, from_lse(x)),
// with empty partials (−inf) and all-empty rows included.
TEST(SoftmaxState, ClosedFormOfHeldPartialsMatchesTheMergeChain) {
  const auto closed = [](const std::vector<double>& lses) {
    double m = -INFINITY;
    for (double x : lses) m = std::max(m, x);
    State st = State::empty();
    if (m != -INFINITY) {
      st = {m, 0.0};
      for (double x : lses) st.add(State::exp(x - m));
    }
    return st;
  };
  std::mt19937_64 rng(11);
  std::normal_distribution<double> n(0.0, 20.0);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<double> lses(1 + trial % 64);
    for (double& x : lses) x = trial % 5 == 0 ? -INFINITY : (rng() % 4 == 0 ? -INFINITY : n(rng));
    State chain = State::empty();
    for (double x : lses) {
      double wa, wb;
      chain = State::merge(chain, State::from_lse(x), &wa, &wb);
    }
    // One group, and the same partials in G strided groups merged in group order.
    const State one = closed(lses);
    for (int groups : {1, 2, 4}) {
      State merged = State::empty();
      for (int g = 0; g < groups; ++g) {
        std::vector<double> mine;
        for (std::size_t j = std::size_t(g); j < lses.size(); j += std::size_t(groups)) mine.push_back(lses[j]);
        double wa, wb;
        merged = State::merge(merged, closed(mine), &wa, &wb);
      }
      ASSERT_EQ(merged.is_empty(), chain.is_empty()) << "trial " << trial;
      if (chain.is_empty()) continue;
      EXPECT_NEAR(merged.lse(), chain.lse(), 1e-12) << "trial " << trial << " groups " << groups;
    }
    ASSERT_EQ(one.is_empty(), chain.is_empty());
    if (chain.is_empty()) {
      EXPECT_EQ(one.inv_l(), 0.0);  // the output of an all-empty row is zeros
      continue;
    }
    for (double x : lses) {
      const double w = State::exp(x - one.m) * one.inv_l();  // exp(−inf) = 0: an empty partial
      EXPECT_NEAR(w, chain.weight_of(x), 1e-12) << "trial " << trial;
    }
  }
}

}  // namespace
}  // namespace mla
