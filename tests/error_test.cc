// error_test.cc: per-handle messages (common/error.h), each test on a fresh
// thread so that its ring of slots starts empty: each handle keeps its own;
// a message made from another handle's survives taking over that very slot;
// a cleared slot is taken before any live one; forward moves a message.
#include <gtest/gtest.h>

#include <string>
#include <thread>

extern "C" {
#include "common/error.h"
}

namespace {

int handles[16];

// Runs fn on a thread of its own (a fresh ring of 8 slots).
template <class F>
void OnFreshThread(F fn) {
  std::thread t(fn);
  t.join();
}

TEST(Error, EachHandleKeepsItsOwnMessage) {
  OnFreshThread([] {
    fl_fail(&handles[0], FL_ERR_CUDA, "zero %d", 0);
    fl_fail(&handles[1], FL_ERR_CUDA, "one %d", 1);
    EXPECT_EQ(std::string(fl_error_get(&handles[0])), "zero 0");
    EXPECT_EQ(std::string(fl_error_get(&handles[1])), "one 1");
    EXPECT_EQ(std::string(fl_error_get(&handles[2])), "");
  });
}

// The ring is full and the source is its oldest slot: the new handle's
// message takes that slot while being made from its text.
TEST(Error, AMessageMadeFromAnotherHandlesSurvivesTakingOverItsSlot) {
  OnFreshThread([] {
    fl_fail(&handles[0], FL_ERR_NOT_FOUND, "table 3: id %d not found", 4500);
    for (int i = 1; i < 8; i++) fl_fail(&handles[i], FL_ERR_CUDA, "filler %d", i);
    EXPECT_EQ(fl_fail(&handles[8], FL_ERR_NOT_FOUND, "query: %s", fl_error_get(&handles[0])),
              FL_ERR_NOT_FOUND);
    EXPECT_EQ(std::string(fl_error_get(&handles[8])), "query: table 3: id 4500 not found");
    EXPECT_EQ(std::string(fl_error_get(&handles[0])), "");  // its slot was the oldest
  });
}

// A cleared handle's slot goes to the next new handle; the live ones keep
// theirs.
TEST(Error, ClearFreesASlotForTheNextHandle) {
  OnFreshThread([] {
    for (int i = 0; i < 8; i++) fl_fail(&handles[i], FL_ERR_CUDA, "message %d", i);
    fl_error_clear(&handles[5]);
    EXPECT_EQ(std::string(fl_error_get(&handles[5])), "");
    fl_fail(&handles[9], FL_ERR_CUDA, "new");
    EXPECT_EQ(std::string(fl_error_get(&handles[9])), "new");
    for (int i = 0; i < 8; i++)
      if (i != 5) EXPECT_EQ(std::string(fl_error_get(&handles[i])), "message " + std::to_string(i));
  });
}

TEST(Error, ForwardMovesAMessage) {
  OnFreshThread([] {
    fl_fail(&handles[6], FL_ERR_CUDA, "inner failure");
    fl_error_forward(&handles[6], nullptr);
    EXPECT_EQ(std::string(fl_error_get(nullptr)), "inner failure");
    fl_error_forward(&handles[7], nullptr);  // nothing to move: unchanged
    EXPECT_EQ(std::string(fl_error_get(nullptr)), "inner failure");
  });
}

}  // namespace
