// fastdiv_test: common/fastdiv.h's multiply against the hardware's division,
// for the divisors the store uses (slots per chunk, vector strides) and the
// edges of the 32-bit range: every numerator up to 2^20 and a million drawn
// over the whole range, per divisor.
#include "common/fastdiv.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace {

TEST(FastDiv, EqualsDivisionForEveryNumerator) {
  std::vector<uint32_t> divisors = {2,     3,     7,     8,     24,      40,         127,
                                    144,   528,   3971,  14563, 16400,   87381,      1u << 20,
                                    65537, 99991, (1u << 31) - 1, 1u << 31, 4294967291u, UINT32_MAX};
  std::mt19937_64 rng(7);
  for (uint32_t d : divisors) {
    fl_div32 v = fl_div32_of(d);
    for (uint32_t n = 0; n <= (1u << 20); n++)
      ASSERT_EQ(fl_div32_q(v, n), n / d) << n << " / " << d;
    for (int i = 0; i < 1000000; i++) {
      uint32_t n = (uint32_t)rng();
      ASSERT_EQ(fl_div32_q(v, n), n / d) << n << " / " << d;
    }
    for (uint32_t n : {UINT32_MAX, UINT32_MAX - 1, d - 1, d, d + 1, 2 * d - 1})
      ASSERT_EQ(fl_div32_q(v, n), n / d) << n << " / " << d;
  }
}

}  // namespace
