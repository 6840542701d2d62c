// slots_test.cc: cluster routing without a cluster: CRC16 key slots and hash
// tags (the Redis Cluster spec's examples), the slot map, and MOVED/ASK
// parsing.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

extern "C" {
#include "cluster/slots.h"
}

namespace {

uint16_t Slot(const std::string &k) { return fl_key_slot(k.data(), k.size()); }

TEST(Slots, Crc16MatchesTheSpec) {
  EXPECT_EQ(fl_crc16("123456789", 9), 0x31C3);  // CRC16/XMODEM check value
  EXPECT_EQ(fl_crc16("", 0), 0);
}

TEST(Slots, KnownKeys) {
  // Values from redis-cli CLUSTER KEYSLOT.
  EXPECT_EQ(Slot("foo"), 12182);
  EXPECT_EQ(Slot("bar"), 5061);
  EXPECT_EQ(Slot("key:000000000001"), 8924);
  EXPECT_EQ(Slot("{user1000}.following"), 3443);
  EXPECT_EQ(Slot("hello"), 866);
}

TEST(Slots, HashTags) {
  EXPECT_EQ(Slot("{user1000}.following"), Slot("{user1000}.followers"));
  EXPECT_EQ(Slot("{user1000}.following"), Slot("user1000"));
  // An empty tag hashes the whole key; only the first {...} counts.
  EXPECT_EQ(Slot("foo{}{bar}"), fl_crc16("foo{}{bar}", 10) & 16383);
  EXPECT_EQ(Slot("foo{{bar}}zap"), Slot("{bar"));
  EXPECT_EQ(Slot("foo{bar}{zap}"), Slot("bar"));
  EXPECT_EQ(Slot("no{close"), fl_crc16("no{close", 8) & 16383);
}

TEST(Slots, MapSetsRangesAndKeepsNodeNumbers) {
  fl_slot_map m;
  fl_slot_map_init(&m);
  EXPECT_EQ(m.master[0], -1);
  fl_slot_range r[2] = {{0, 99, "127.0.0.1", 9, 7000}, {100, 16383, "127.0.0.1", 9, 7001}};
  ASSERT_EQ(fl_slot_map_set(&m, r, 2), 0);
  EXPECT_EQ(m.n_nodes, 2);
  int a = m.master[0], b = m.master[100];
  EXPECT_NE(a, b);
  EXPECT_EQ(m.nodes[b].port, 7001);
  EXPECT_STREQ(m.nodes[a].host, "127.0.0.1");
  // A failover: 7001's slots move to 7004; node numbers stay.
  fl_slot_range f[2] = {{0, 99, "127.0.0.1", 9, 7000}, {100, 16383, "127.0.0.1", 9, 7004}};
  ASSERT_EQ(fl_slot_map_set(&m, f, 2), 0);
  EXPECT_EQ(m.master[0], a);
  EXPECT_EQ(m.n_nodes, 3);
  EXPECT_EQ(m.nodes[m.master[16383]].port, 7004);
  EXPECT_EQ(fl_slot_map_node(&m, "127.0.0.1", 9, 7001), b);
  // A malformed range leaves the map as it was.
  fl_slot_range bad[1] = {{5, 3, "127.0.0.1", 9, 7000}};
  EXPECT_EQ(fl_slot_map_set(&m, bad, 1), -1);
  EXPECT_EQ(m.nodes[m.master[16383]].port, 7004);
}

TEST(Slots, Redirects) {
  const char *moved = "MOVED 3999 127.0.0.1:6381";
  fl_redirect r = fl_redirect_parse(moved, std::strlen(moved));
  EXPECT_EQ(r.kind, FL_REDIRECT_MOVED);
  EXPECT_EQ(r.slot, 3999);
  EXPECT_STREQ(r.host, "127.0.0.1");
  EXPECT_EQ(r.port, 6381);
  const char *ask = "ASK 12 ::1:7002";
  r = fl_redirect_parse(ask, std::strlen(ask));
  EXPECT_EQ(r.kind, FL_REDIRECT_ASK);
  EXPECT_STREQ(r.host, "::1");
  EXPECT_EQ(r.port, 7002);
  for (const char *bad : {"TRYAGAIN Multiple keys", "MOVED x 1.2.3.4:5", "MOVED 16384 h:1",
                          "ASK 1 nohost", "MOVED 1 h:0", "CLUSTERDOWN"})
    EXPECT_EQ(fl_redirect_parse(bad, std::strlen(bad)).kind, FL_REDIRECT_NONE) << bad;
}

}  // namespace
