// error_test.cc: per-handle messages (common/error.h): each handle keeps its
// own; a message made from another handle's survives that slot being taken
// over; a cleared handle reads empty; forward moves a message.
#include <gtest/gtest.h>

#include <string>

extern "C" {
#include "common/error.h"
}

namespace {

int handles[64];

TEST(Error, EachHandleKeepsItsOwnMessage) {
  fl_fail(&handles[0], FL_ERR_CUDA, "zero %d", 0);
  fl_fail(&handles[1], FL_ERR_CUDA, "one %d", 1);
  EXPECT_EQ(std::string(fl_error_get(&handles[0])), "zero 0");
  EXPECT_EQ(std::string(fl_error_get(&handles[1])), "one 1");
  EXPECT_EQ(std::string(fl_error_get(&handles[2])), "");
}

// A message copied from another handle's, when the new handle's slot is
// the one that held the source (the ring full, the source the oldest).
TEST(Error, AMessageMadeFromAnotherHandlesSurvivesItsSlotTakenOver) {
  for (int round = 0; round < 3; round++) {
    for (int i = 10; i < 40; i++) fl_fail(&handles[i], FL_ERR_CUDA, "filler %d", i);
    fl_fail(&handles[3], FL_ERR_NOT_FOUND, "table 3: id %d not found", 4500);
    // Many handles later, copy into handles that are new each time.
    for (int i = 40; i < 64; i++) {
      EXPECT_EQ(fl_fail(&handles[i], FL_ERR_NOT_FOUND, "%s", fl_error_get(&handles[3])),
                FL_ERR_NOT_FOUND);
      std::string got = fl_error_get(&handles[i]);
      if (got.empty()) break;  // handles[3] was dropped from the ring: fine
      EXPECT_EQ(got, "table 3: id 4500 not found") << "handle " << i;
    }
  }
}

TEST(Error, ClearForgetsAndForwardMoves) {
  fl_fail(&handles[5], FL_ERR_CUDA, "old");
  fl_error_clear(&handles[5]);
  EXPECT_EQ(std::string(fl_error_get(&handles[5])), "");
  fl_fail(&handles[6], FL_ERR_CUDA, "inner failure");
  fl_error_forward(&handles[6], nullptr);
  EXPECT_EQ(std::string(fl_error_get(nullptr)), "inner failure");
  fl_error_forward(&handles[5], nullptr);  // nothing to move: unchanged
  EXPECT_EQ(std::string(fl_error_get(nullptr)), "inner failure");
}

}  // namespace
