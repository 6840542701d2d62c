// cluster_test.cc: the store over a real local Redis Cluster (3 masters, 3
// replicas started by tools/redis_cluster.sh on ports 7100..7105): every
// gathered row equals the cluster's, the local tier stays in budget, writes
// invalidate other stores and another process, and each failure (connection
// refused, timeout, a corrupted value, a slot in migration, a master killed)
// gives its status and message and never a wrong row. Fails, not skips,
// without redis-server.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/shims.h"

extern "C" {
#include "cluster/rows.h"
}

namespace {

using fl::Store;
constexpr int kPort = 7100;

std::string Dir() {
  const char *d = std::getenv("TEST_TMPDIR");
  return std::string(d ? d : "/tmp") + "/redis-cluster";
}

std::string Sh(const std::string &cmd) {
  std::string out;
  FILE *p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  pclose(p);
  return out;
}

std::string Cli(int port, const std::string &args) {
  return Sh("redis-cli -h 127.0.0.1 -p " + std::to_string(port) + " " + args + " 2>&1");
}

int Pid(int port) {
  std::ifstream f(Dir() + "/" + std::to_string(port) + "/redis.pid");
  int pid = 0;
  f >> pid;
  return pid;
}

class Cluster : public ::testing::Environment {
 public:
  void SetUp() override {
    ASSERT_EQ(std::system(("tools/redis_cluster.sh start " + Dir() + " " + std::to_string(kPort)).c_str()), 0)
        << "cannot start the local Redis Cluster (is redis-server installed?)";
  }
  void TearDown() override { std::system(("tools/redis_cluster.sh stop " + Dir()).c_str()); }
};

const ::testing::Environment *const kCluster = ::testing::AddGlobalTestEnvironment(new Cluster);

fl_cluster_config Config(const char *ns, uint64_t budget = 1 << 20) {
  fl_cluster_config c;
  fl_cluster_config_default(&c);
  c.seed = "redis://127.0.0.1:7100";
  c.ns = ns;
  c.local_budget_bytes = budget;
  return c;
}

std::vector<fl_table_desc> Tables() {
  return {{"user", 5000, 16, FL_FP32, FL_IDS_DENSE}, {"item", 3000, 8, FL_FP16, FL_IDS_HASHED}};
}

Store ClusterStore(const fl_cluster_config &cfg, std::vector<fl_table_desc> t = Tables()) {
  fl_store *s = nullptr;
  fl_status st = fl_store_create_cluster(t.data(), (uint32_t)t.size(), 2, &cfg, &s);
  EXPECT_EQ(st, FL_OK) << fl::Describe(st, fl_store_last_error(nullptr));
  return Store(s);
}

Store PlainStore() {
  auto t = Tables();
  fl_store *s = nullptr;
  EXPECT_EQ(fl_store_create(t.data(), (uint32_t)t.size(), 2, &s), FL_OK);
  return Store(s);
}

size_t RowBytes(fl_store *s, uint32_t t) {
  fl_table_desc d;
  EXPECT_EQ(fl_store_table(s, t, &d), FL_OK);
  return d.dim * (d.dtype == FL_FP16 ? 2 : 4);
}

std::vector<unsigned char> Gather(fl_store *s, uint32_t t, const std::vector<uint64_t> &ids,
                                  fl_status *st = nullptr, fl_missing policy = FL_MISSING_ZERO) {
  std::vector<unsigned char> out(ids.size() * RowBytes(s, t), 0xAB);
  fl_table_query q = {t, ids.data(), ids.size(), out.data()};
  fl_status r = fl_store_gather(s, &q, 1, policy, nullptr);
  if (st) *st = r;
  else EXPECT_EQ(r, FL_OK) << fl::Describe(r, fl_store_last_error(s));
  return out;
}

// Ids of a table: dense ids in range; hashed ones mostly among the ids a
// synthetic fill creates (scrambled images of 0..2999), some absent.
std::vector<uint64_t> Ids(uint32_t t, size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> ids(n);
  for (size_t i = 0; i < n; i++) ids[i] = t == 0 ? rng() % 5000 : i % 7 == 6 ? rng() : rng() % 3000;
  return ids;
}

void Fill(fl_store *s) {
  FL_ASSERT_OK_STORE(fl_store_fill_synthetic(s, 0, 9), s);
  FL_ASSERT_OK_STORE(fl_store_fill_synthetic(s, 1, 9), s);
}

TEST(ClusterStore, GathersEqualThePlainStoreThroughBothTiers) {
  Store plain = PlainStore();
  Fill(plain.get());
  uint64_t budget = 20000;  // about a tenth of the model
  Store s = ClusterStore(Config("roundtrip", budget));
  Fill(s.get());
  for (uint32_t t = 0; t < 2; t++) {
    for (int round = 0; round < 6; round++) {
      // Missing hashed ids answer zero in both stores.
      std::vector<uint64_t> ids = Ids(t, 700, 100 * t + round % 3);
      auto want = Gather(plain.get(), t, ids);
      auto got = Gather(s.get(), t, ids);
      ASSERT_EQ(got, want) << "table " << t << " round " << round;
    }
  }
  fl_store_tier_stats ts;
  FL_ASSERT_OK_STORE(fl_store_tier_stats_get(s.get(), &ts), s.get());
  EXPECT_GT(ts.cluster_rows, 0u);
  EXPECT_GT(ts.local_hits, 0u);  // repeated rounds hit the local tier
  EXPECT_GT(ts.evictions, 0u);
  EXPECT_LE(ts.local_bytes, budget);
  EXPECT_EQ(ts.lookups, 2u * 6 * 700);
  EXPECT_EQ(ts.model_bytes, 5000u * 64 + 3000u * 16);
}

TEST(ClusterStore, MissingPolicyAndDenseZeros) {
  Store s = ClusterStore(Config("missing"));
  // Nothing loaded: dense rows read as zero, hashed ids are missing.
  auto z = Gather(s.get(), 0, {1, 2});
  EXPECT_EQ(z, std::vector<unsigned char>(z.size(), 0));
  fl_status st;
  Gather(s.get(), 1, {42}, &st, FL_MISSING_ERROR);
  EXPECT_EQ(st, FL_ERR_NOT_FOUND);
  EXPECT_NE(std::string(fl_store_last_error(s.get())).find("id 42"), std::string::npos);
}

TEST(ClusterStore, ModelMismatchIsRejected) {
  Store a = ClusterStore(Config("shape"));
  auto t = Tables();
  t[0].dim = 32;
  fl_store *s = nullptr;
  fl_cluster_config cfg = Config("shape");
  EXPECT_EQ(fl_store_create_cluster(t.data(), 2, 1, &cfg, &s), FL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fl_store_last_error(nullptr)).find("'user' dim 16"), std::string::npos)
      << fl_store_last_error(nullptr);
  // Open reads the tables from the cluster.
  FL_ASSERT_OK_STORE(fl_store_open_cluster(&cfg, 1, &s), nullptr);
  Store b(s);
  fl_table_desc d;
  ASSERT_EQ(fl_store_table(b.get(), 1, &d), FL_OK);
  EXPECT_STREQ(d.name, "item");
  EXPECT_EQ(d.dtype, FL_FP16);
  fl_cluster_config none = Config("no-such-model");
  EXPECT_EQ(fl_store_open_cluster(&none, 1, &s), FL_ERR_NOT_FOUND);
}

TEST(ClusterStore, ConnectionRefused) {
  fl_cluster_config cfg = Config("refused");
  cfg.seed = "127.0.0.1:1";
  fl_store *s = nullptr;
  auto t = Tables();
  EXPECT_EQ(fl_store_create_cluster(t.data(), 2, 1, &cfg, &s), FL_ERR_UNAVAILABLE);
  std::string msg = fl_store_last_error(nullptr);
  EXPECT_NE(msg.find("127.0.0.1:1"), std::string::npos) << msg;
  EXPECT_NE(msg.find("refused"), std::string::npos) << msg;
  cfg.seed = "nonsense";
  EXPECT_EQ(fl_store_create_cluster(t.data(), 2, 1, &cfg, &s), FL_ERR_INVALID_ARGUMENT);
}

TEST(ClusterStore, UpsertAndRemoveInvalidateOtherStores) {
  Store a = ClusterStore(Config("updates"));
  Store b = ClusterStore(Config("updates"));
  Fill(a.get());
  std::vector<uint64_t> ids = {3, 4};
  auto before = Gather(b.get(), 0, ids);  // now in b's local tier
  std::vector<float> v(2 * 16, 7.5f);
  FL_ASSERT_OK_STORE(fl_store_upsert(a.get(), 0, ids.data(), 2, v.data()), a.get());
  auto want = std::vector<unsigned char>((unsigned char *)v.data(), (unsigned char *)(v.data() + 32));
  EXPECT_EQ(Gather(a.get(), 0, ids), want);  // read-your-writes in the writer
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  while (Gather(b.get(), 0, ids) != want && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(Gather(b.get(), 0, ids), want) << "b still serves the old rows after 500 ms";
  // A removed hashed id disappears from the other store too.
  uint64_t id = 77;
  std::vector<uint16_t> h(8, 0x3c00);
  FL_ASSERT_OK_STORE(fl_store_upsert(a.get(), 1, &id, 1, h.data()), a.get());
  fl_status st;
  for (int i = 0; i < 500; i++) {
    Gather(b.get(), 1, {id}, &st, FL_MISSING_ERROR);
    if (st == FL_OK) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(st, FL_OK);
  FL_ASSERT_OK_STORE(fl_store_remove(a.get(), 1, &id, 1), a.get());
  for (int i = 0; i < 500; i++) {
    Gather(b.get(), 1, {id}, &st, FL_MISSING_ERROR);
    if (st == FL_ERR_NOT_FOUND) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(st, FL_ERR_NOT_FOUND);
  fl_store_tier_stats ts;
  ASSERT_EQ(fl_store_tier_stats_get(b.get(), &ts), FL_OK);
  EXPECT_GE(ts.invalidations, 3u);
}

// The reader process: a host-backend cache over its own cluster store. It
// answers each "version k" line on `in` once its query of id 5 returns rows
// of value k, writing the milliseconds it waited on `out`.
int Reader(int in, int out) {
  fl_cluster_config cfg = Config("twoproc");
  fl_store *s = nullptr;
  if (fl_store_open_cluster(&cfg, 1, &s) != FL_OK) return 2;
  fl_config cc;
  fl_config_default(&cc);
  cc.backend = FL_BACKEND_HOST;
  cc.budget_bytes = 1 << 20;
  cc.admit_policy = FL_ADMIT_COIN;
  cc.admit_probability = 1;
  cc.host_threads = 1;
  fl_cache *c = nullptr;
  if (fl_cache_create(s, &cc, &c) != FL_OK) return 3;
  FILE *fin = fdopen(in, "r");
  float k;
  while (fscanf(fin, "%f", &k) == 1) {
    auto t0 = std::chrono::steady_clock::now();
    float row[16];
    uint64_t id = 5;
    fl_table_query q = {0, &id, 1, row};
    for (;;) {
      if (fl_query(c, &q, 1, nullptr) != FL_OK) return 4;
      if (row[0] == k) break;
      if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(2)) return 5;
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    dprintf(out, "%f\n", ms);
  }
  fl_cache_destroy(c);
  fl_store_destroy(s);
  return 0;
}

TEST(ClusterStore, TwoProcessesSeeEachOthersUpdatesWithinTheBound) {
  Store w = ClusterStore(Config("twoproc"));
  Fill(w.get());
  int to_reader[2], from_reader[2];
  ASSERT_EQ(pipe(to_reader), 0);
  ASSERT_EQ(pipe(from_reader), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(to_reader[1]);
    close(from_reader[0]);
    _exit(Reader(to_reader[0], from_reader[1]));
  }
  close(to_reader[0]);
  close(from_reader[1]);
  FILE *replies = fdopen(from_reader[0], "r");
  uint64_t id = 5;
  for (int k = 1; k <= 5; k++) {
    std::vector<float> v(16, (float)k);
    // The reader first caches the current row (value k-1 or synthetic)...
    if (k > 1) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    FL_ASSERT_OK_STORE(fl_store_upsert(w.get(), 0, &id, 1, v.data()), w.get());
    dprintf(to_reader[1], "%d\n", k);
    double ms = -1;
    ASSERT_EQ(fscanf(replies, "%lf", &ms), 1) << "the reader process failed";
    // The bound of docs/TIERS.md: 2 heartbeats (100 ms) plus the I/O timeout;
    // delivered messages take about a millisecond.
    EXPECT_LT(ms, 1200) << "update " << k;
    std::printf("update %d seen by the other process after %.2f ms\n", k, ms);
  }
  close(to_reader[1]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "reader exit " << WEXITSTATUS(status);
  fclose(replies);
}

// The port of the master serving slot `slot`.
int MasterOf(uint16_t slot) {
  std::string nodes = Cli(kPort, "cluster nodes");
  size_t at = 0;
  while (at < nodes.size()) {
    size_t eol = nodes.find('\n', at);
    std::string line = nodes.substr(at, eol - at);
    at = eol == std::string::npos ? nodes.size() : eol + 1;
    if (line.find("master") == std::string::npos || line.find("fail") != std::string::npos) continue;
    int port = std::atoi(line.substr(line.find(':') + 1).c_str());
    size_t p = 0;
    for (int f = 0; f < 8 && p != std::string::npos; f++) p = line.find(' ', p + 1);
    while (p != std::string::npos && p < line.size()) {
      int lo = 0, hi = 0, got = std::sscanf(line.c_str() + p + 1, "%d-%d", &lo, &hi);
      if (got < 1) break;
      if (got == 1) hi = lo;
      if (slot >= lo && slot <= hi) return port;
      p = line.find(' ', p + 1);
    }
  }
  return -1;
}

std::string Key(const char *ns, uint32_t t, uint64_t id, uint16_t *slot) {
  fl_keyspace ks;
  fl_keyspace_init(&ks, ns, 1024);
  char k[FL_ROW_KEY_MAX];
  size_t n = fl_row_key(&ks, t, id, k);
  *slot = fl_row_slot(&ks, t, id);
  fl_keyspace_fini(&ks);
  return std::string(k, n);
}

// A value of the wrong length fails the gather (API.md: "never a wrong or
// zero vector"; outputs may be partly written): every output row is the
// poison it held or the id's true row, and the corrupted id's row is the
// poison.
TEST(ClusterStore, CorruptedValueFailsWithoutAWrongRow) {
  Store s = ClusterStore(Config("corrupt", 0));
  Fill(s.get());
  Store plain = PlainStore();
  Fill(plain.get());
  uint16_t slot;
  std::string key = Key("corrupt", 0, 11, &slot);
  Cli(MasterOf(slot), "set '" + key + "' abc");
  const std::vector<uint64_t> ids = {10, 11, 12, 11};
  fl_status st;
  std::vector<unsigned char> out = Gather(s.get(), 0, ids, &st);
  EXPECT_EQ(st, FL_ERR_FORMAT);
  std::string msg = fl_store_last_error(s.get());
  EXPECT_NE(msg.find(key), std::string::npos) << msg;
  EXPECT_NE(msg.find("3 bytes"), std::string::npos) << msg;
  const std::vector<unsigned char> want = Gather(plain.get(), 0, ids);
  const size_t rb = RowBytes(s.get(), 0);
  const std::vector<unsigned char> poison(rb, 0xAB);
  for (size_t i = 0; i < ids.size(); i++) {
    std::vector<unsigned char> got(out.begin() + i * rb, out.begin() + (i + 1) * rb);
    std::vector<unsigned char> right(want.begin() + i * rb, want.begin() + (i + 1) * rb);
    if (ids[i] == 11)
      EXPECT_EQ(got, poison) << "position " << i << ": the corrupted id's row was written";
    else
      EXPECT_TRUE(got == poison || got == right) << "position " << i << " (id " << ids[i] << ")";
  }
}

TEST(ClusterStore, TimeoutGivesUnavailableThenRecovers) {
  fl_cluster_config cfg = Config("timeout", 0);
  cfg.io_timeout_ms = 100;
  cfg.retry_ms = 400;
  Store s = ClusterStore(cfg);
  Fill(s.get());
  Store plain = PlainStore();
  Fill(plain.get());
  uint16_t slot;
  Key("timeout", 0, 1, &slot);
  int port = MasterOf(slot);
  ASSERT_GT(port, 0);
  kill(Pid(port), SIGSTOP);  // shorter than the cluster's node timeout: no failover
  fl_status st;
  auto t0 = std::chrono::steady_clock::now();
  Gather(s.get(), 0, {1, 2, 3}, &st);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  kill(Pid(port), SIGCONT);
  EXPECT_EQ(st, FL_ERR_UNAVAILABLE);
  std::string msg = fl_store_last_error(s.get());
  EXPECT_NE(msg.find("127.0.0.1:" + std::to_string(port)), std::string::npos) << msg;
  EXPECT_NE(msg.find("timed out"), std::string::npos) << msg;
  EXPECT_LT(ms, 900);
  EXPECT_EQ(Gather(s.get(), 0, {1, 2, 3}), Gather(plain.get(), 0, {1, 2, 3}));
}

TEST(ClusterStore, SlotInMigrationFollowsAskAndTryAgain) {
  Store s = ClusterStore(Config("migrate", 0));
  Fill(s.get());
  Store plain = PlainStore();
  Fill(plain.get());
  // Ids of one slot: MGETs of several keys, some moved, some not.
  uint16_t slot;
  Key("migrate", 0, 0, &slot);
  std::vector<uint64_t> ids;
  std::vector<std::string> keys;
  for (uint64_t id = 0; id < 5000 && ids.size() < 6; id++) {
    uint16_t sl;
    std::string k = Key("migrate", 0, id, &sl);
    if (sl == slot) ids.push_back(id), keys.push_back(k);
  }
  ASSERT_GE(ids.size(), 3u);
  int from = MasterOf(slot), to = from == kPort ? kPort + 1 : kPort;
  if (MasterOf(slot) == to || to == from) to = kPort + 2;
  std::string from_id = Cli(from, "cluster myid"), to_id = Cli(to, "cluster myid");
  from_id.erase(from_id.find_last_not_of("\n\r ") + 1);
  to_id.erase(to_id.find_last_not_of("\n\r ") + 1);
  std::string sl = std::to_string(slot);
  ASSERT_NE(Cli(to, "cluster setslot " + sl + " importing " + from_id).find("OK"), std::string::npos);
  ASSERT_NE(Cli(from, "cluster setslot " + sl + " migrating " + to_id).find("OK"), std::string::npos);
  // Half the keys moved: a multi-key MGET gets TRYAGAIN, single GETs get ASK.
  for (size_t i = 0; i < keys.size() / 2; i++)
    ASSERT_NE(Cli(from, "migrate 127.0.0.1 " + std::to_string(to) + " '" + keys[i] + "' 0 1000").find("OK"),
              std::string::npos);
  EXPECT_EQ(Gather(s.get(), 0, ids), Gather(plain.get(), 0, ids));
  // All keys moved: the whole MGET goes to the target with ASKING.
  for (size_t i = keys.size() / 2; i < keys.size(); i++)
    Cli(from, "migrate 127.0.0.1 " + std::to_string(to) + " '" + keys[i] + "' 0 1000");
  EXPECT_EQ(Gather(s.get(), 0, ids), Gather(plain.get(), 0, ids));
  // Finish the migration: MOVED updates the map.
  for (int p = kPort; p < kPort + 3; p++) Cli(p, "cluster setslot " + sl + " node " + to_id);
  EXPECT_EQ(Gather(s.get(), 0, ids), Gather(plain.get(), 0, ids));
}

// Last: it leaves the cluster with a master less.
TEST(ClusterStore, ReadsRetryThroughAFailover) {
  fl_cluster_config cfg = Config("failover", 0);
  Store s = ClusterStore(cfg);
  Fill(s.get());
  Store plain = PlainStore();
  Fill(plain.get());
  ASSERT_EQ(std::system(("tools/redis_cluster.sh wait " + Dir() + " " + std::to_string(kPort)).c_str()), 0);
  std::vector<uint64_t> ids(2000);
  for (size_t i = 0; i < ids.size(); i++) ids[i] = (i * 7919) % 5000;
  EXPECT_EQ(Gather(s.get(), 0, ids), Gather(plain.get(), 0, ids));
  uint16_t slot;
  Key("failover", 0, ids[0], &slot);
  int victim = MasterOf(slot);
  ASSERT_EQ(std::system(("tools/redis_cluster.sh kill " + Dir() + " " + std::to_string(victim)).c_str()), 0);
  auto t0 = std::chrono::steady_clock::now();
  auto got = Gather(s.get(), 0, ids);  // waits for the replica's promotion
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(got, Gather(plain.get(), 0, ids));
  EXPECT_NE(MasterOf(slot), victim);
  std::printf("master %d killed: reads answered again after %.0f ms\n", victim, ms);
}

}  // namespace
