// fifo_queue_test.cc: the ideal FIFO queue of k servers (tools/fifo_queue.h)
// that serve_bench sets each level's requests through: hand-built cases, the
// refused inputs, and M/M/1 and M/M/4 queues against their closed forms.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

extern "C" {
#include "common/error.h"
#include "tools/fifo_queue.h"
}

namespace {

std::vector<double> Latency(const std::vector<int64_t> &arrive_ns,
                            const std::vector<double> &service_us, uint32_t k) {
  std::vector<double> lat(arrive_ns.size(), -1);
  EXPECT_EQ(fl_fifo_latency(arrive_ns.data(), service_us.data(), arrive_ns.size(), k, lat.data()),
            FL_OK);
  return lat;
}

TEST(FifoQueue, OneServerQueuesEachRequestBehindTheOnesBefore) {
  EXPECT_EQ(Latency({0, 1000, 2000}, {2, 2, 2}, 1), (std::vector<double>{2, 3, 4}));
}

TEST(FifoQueue, ARequestTakesTheServerFreeEarliest) {
  // Three at once on two servers: the third starts when the 1 us one ends,
  // not after the 5 us one.
  EXPECT_EQ(Latency({0, 0, 0}, {5, 1, 1}, 2), (std::vector<double>{5, 1, 2}));
  // Enough servers: nobody waits.
  EXPECT_EQ(Latency({0, 0, 0}, {5, 1, 1}, 3), (std::vector<double>{5, 1, 1}));
}

TEST(FifoQueue, AnIdleServerDoesNotCarryTimeForward) {
  EXPECT_EQ(Latency({0, 10000, 10500}, {1, 1, 1}, 1), (std::vector<double>{1, 1, 1.5}));
  EXPECT_EQ(Latency({}, {}, 4), (std::vector<double>{}));
}

TEST(FifoQueue, RefusesNoServersAndArrivalsOutOfOrderWritingNothing) {
  std::vector<int64_t> at{0, 5, 3};
  std::vector<double> s{1, 1, 1}, lat{-1, -1, -1};
  EXPECT_EQ(fl_fifo_latency(at.data(), s.data(), 2, 0, lat.data()), FL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fl_error_get(NULL)).find("0 servers"), std::string::npos);
  EXPECT_EQ(fl_fifo_latency(at.data(), s.data(), 3, 2, lat.data()), FL_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(fl_error_get(NULL)).find("request 2 arrives at 3 ns"), std::string::npos)
      << fl_error_get(NULL);
  EXPECT_EQ(lat, (std::vector<double>{-1, -1, -1}));
}

// Poisson arrivals at rate lambda (per us) and exponential service of mean 1
// us through k servers: the latencies and the services drawn.
struct Queued {
  std::vector<double> lat, service;
};

Queued Markov(double lambda, uint32_t k, uint64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::exponential_distribution<double> gap(lambda), serve(1.0);
  std::vector<int64_t> at(n);
  Queued r{std::vector<double>(n), std::vector<double>(n)};
  double t = 0;
  for (uint64_t i = 0; i < n; i++) {
    t += gap(rng);
    at[i] = (int64_t)std::llround(t * 1e3);
    r.service[i] = serve(rng);
  }
  r.lat = Latency(at, r.service, k);
  return r;
}

// Erlang C: the probability that a request of an M/M/k queue at offered
// load a = lambda / mu waits.
double ErlangC(uint32_t k, double a) {
  double term = 1, sum = 0;
  for (uint32_t j = 0; j < k; j++) sum += term, term *= a / (j + 1);
  double top = term * k / (k - a);
  return top / (sum + top);
}

TEST(FifoQueue, MM1MeanLatencyIsOneOverMuMinusLambda) {
  Queued r = Markov(0.5, 1, 400000, 1);
  double mean = 0;
  for (double v : r.lat) mean += v;
  mean /= r.lat.size();
  EXPECT_NEAR(mean, 1 / (1 - 0.5), 0.06);  // 2 us
}

TEST(FifoQueue, MM4WaitsAsErlangCSays) {
  const uint32_t k = 4;
  const double lambda = 2.8;  // 70% of 4 servers of rate 1
  Queued r = Markov(lambda, k, 400000, 2);
  uint64_t waited = 0;
  double wait_sum = 0;
  std::vector<double> wait(r.lat.size());
  for (size_t i = 0; i < r.lat.size(); i++) {
    wait[i] = r.lat[i] - r.service[i];
    waited += wait[i] > 1e-9;
    wait_sum += wait[i];
  }
  double c = ErlangC(k, lambda);  // 0.43
  EXPECT_NEAR((double)waited / r.lat.size(), c, 0.01);
  EXPECT_NEAR(wait_sum / r.lat.size(), c / (k - lambda), 0.02);  // 0.36 us
  // P(wait > t) = C exp(-(k mu - lambda) t): its 99th percentile.
  std::sort(wait.begin(), wait.end());
  double p99 = wait[(size_t)(0.99 * wait.size())];
  EXPECT_NEAR(p99, std::log(c / 0.01) / (k - lambda), 0.15);  // 3.1 us
}

}  // namespace
