// shims.h: thin C++ shims over the public C API for the tests: RAII owners of
// the C handles, status assertions that print the handle's message, and the
// GPU-skip guard.
#ifndef FL_TESTS_SHIMS_H
#define FL_TESTS_SHIMS_H

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "include/fleche.h"

namespace fl {

struct StoreDeleter { void operator()(fl_store *s) const { fl_store_destroy(s); } };
struct CacheDeleter { void operator()(fl_cache *c) const { fl_cache_destroy(c); } };
struct EncodingDeleter { void operator()(fl_encoding *e) const { fl_encoding_destroy(e); } };
using Store = std::unique_ptr<fl_store, StoreDeleter>;
using Cache = std::unique_ptr<fl_cache, CacheDeleter>;
using Encoding = std::unique_ptr<fl_encoding, EncodingDeleter>;

// "FL_ERR_X: message" for assertion output.
inline std::string Describe(fl_status s, const char *msg) {
  return std::string(fl_status_name(s)) + ": " + (msg ? msg : "");
}

}  // namespace fl

#define FL_ASSERT_OK_STORE(call, store)                                               \
  do {                                                                                 \
    fl_status fl_s_ = (call);                                                          \
    ASSERT_EQ(fl_s_, FL_OK) << fl::Describe(fl_s_, fl_store_last_error(store));        \
  } while (0)

#define FL_ASSERT_OK_CACHE(call, cache)                                               \
  do {                                                                                 \
    fl_status fl_s_ = (call);                                                          \
    ASSERT_EQ(fl_s_, FL_OK) << fl::Describe(fl_s_, fl_cache_last_error(cache));        \
  } while (0)

// Skips the current test unless a CUDA device is usable and not disabled by
// FL_BACKEND=host (the sanitizer configs set that).
#define FL_REQUIRE_GPU()                                                               \
  do {                                                                                 \
    const char *fl_b_ = std::getenv("FL_BACKEND");                                     \
    if (fl_b_ && std::string(fl_b_) == "host") GTEST_SKIP() << "FL_BACKEND=host";      \
    if (fl_cuda_device_count() <= 0) GTEST_SKIP() << "no usable CUDA device";          \
  } while (0)

#endif
