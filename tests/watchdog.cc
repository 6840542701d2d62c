// watchdog.cc: with FL_TEST_WATCHDOG_S=N in the environment, a test binary
// that spends more than N seconds in one test prints, once for that test, the
// test's name and every thread's stack to stderr: return addresses with their
// module and offset (`addr2line -f -e BINARY OFFSET` names them). Made for
// stalls under compute-sanitizer, where no debugger can attach. Without the
// variable it does nothing.
#include <dirent.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

#include <gtest/gtest.h>

namespace {

// A real-time signal: the sanitizers and the CUDA driver leave these alone.
int DumpSignal() { return SIGRTMIN + 3; }

std::atomic<int> g_answered{0};

// Runs on the signalled thread: its own stack, then the answer.
void OnDumpSignal(int) {
  void *frames[64];
  int n = backtrace(frames, 64);
  char head[64];
  int len = std::snprintf(head, sizeof head, "-- thread %ld:\n", (long)syscall(SYS_gettid));
  if (write(2, head, (size_t)len) < 0) return;
  backtrace_symbols_fd(frames, n, 2);
  g_answered.store(1);
}

// Signals every thread of the process in turn, waiting up to 200 ms for each
// to print, so the stacks do not interleave.
void DumpAllThreads(const std::string &test, int seconds) {
  std::fprintf(stderr, "watchdog: %s has run for more than %d s; every thread's stack:\n",
               test.c_str(), seconds);
  std::fflush(stderr);
  DIR *d = opendir("/proc/self/task");
  if (!d) return;
  while (dirent *e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    long tid = std::atol(e->d_name);
    g_answered.store(0);
    if (syscall(SYS_tgkill, (long)getpid(), tid, DumpSignal()) != 0) continue;
    for (int i = 0; i < 200 && !g_answered.load(); i++)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    if (!g_answered.load()) std::fprintf(stderr, "-- thread %ld: no answer within 200 ms\n", tid);
  }
  closedir(d);
  std::fprintf(stderr, "watchdog: end of the stacks\n");
}

class Watchdog : public testing::EmptyTestEventListener {
 public:
  explicit Watchdog(int seconds) : seconds_(seconds) {
    std::thread([this] { Watch(); }).detach();
  }
  void OnTestStart(const testing::TestInfo &t) override {
    std::lock_guard<std::mutex> g(mu_);
    test_ = std::string(t.test_suite_name()) + "." + t.name();
    started_ = std::chrono::steady_clock::now();
    running_ = true;
    dumped_ = false;
  }
  void OnTestEnd(const testing::TestInfo &) override {
    std::lock_guard<std::mutex> g(mu_);
    running_ = false;
  }

 private:
  void Watch() {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      std::string test;
      {
        std::lock_guard<std::mutex> g(mu_);
        if (!running_ || dumped_ ||
            std::chrono::steady_clock::now() - started_ < std::chrono::seconds(seconds_))
          continue;
        dumped_ = true;
        test = test_;
      }
      DumpAllThreads(test, seconds_);
    }
  }

  const int seconds_;
  std::mutex mu_;
  std::string test_;
  std::chrono::steady_clock::time_point started_;
  bool running_ = false, dumped_ = false;
};

// Installed before gtest_main's main runs, when the variable asks for it.
[[maybe_unused]] const bool g_installed = [] {
  const char *v = std::getenv("FL_TEST_WATCHDOG_S");
  int seconds = v ? std::atoi(v) : 0;
  if (seconds <= 0) return false;
  struct sigaction sa = {};
  sa.sa_handler = OnDumpSignal;
  sa.sa_flags = SA_RESTART;
  sigaction(DumpSignal(), &sa, nullptr);
  void *warm[1];
  backtrace(warm, 1);  // loads the unwinder now, not inside the handler
  testing::UnitTest::GetInstance()->listeners().Append(new Watchdog(seconds));
  return true;
}();

}  // namespace
