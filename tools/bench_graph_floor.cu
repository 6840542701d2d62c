// bench_graph_floor.cu: the fixed cost of a small batch's graph structure
// (bench_graph_floor.h), timed from the host as a query's caller sees it.
#include "tools/bench_graph_floor.h"

#include <cuda_runtime.h>

#include "common/clock.h"
#include "common/launch_to.h"

#include <algorithm>
#include <vector>

namespace {

constexpr unsigned kBlocks = 26, kThreads = 256;  // the 256-sample batch's index grid
constexpr int kWarmup = 200;

// The last block to finish raises *flag, as fused_index's publish does;
// with host_word, every block first reads it (pinned, device-mapped).
// With set_cond, the last block also sets the graph's IF condition to 0, as
// the index kernel would for a batch with nothing for the gate.
__global__ void publish(unsigned *done, volatile unsigned *flag, const uint64_t *host_word,
                        uint64_t *sink, cudaGraphConditionalHandle cond, int set_cond) {
  __shared__ bool last;
  if (host_word && threadIdx.x == 0) sink[blockIdx.x] = *(const volatile uint64_t *)host_word;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = (atomicAdd(done, 1u) + 1) % gridDim.x == 0;  // the counter is never reset
  }
  __syncthreads();
  if (last && threadIdx.x == 0) {
    __threadfence_system();
    *flag = 1u;
    if (set_cond) cudaGraphSetConditional(cond, 0);
  }
}

__global__ void after(uint64_t *sink) {
  fl_await_prior();
  if (threadIdx.x == 0) sink[kBlocks + blockIdx.x] = blockIdx.x;
}

struct bufs {
  unsigned char *host = nullptr, *dev = nullptr;
  unsigned *done = nullptr;
  uint64_t *sink = nullptr;
  volatile unsigned *flag() const { return (volatile unsigned *)host; }
  const uint64_t *host_word() const { return (const uint64_t *)(host + 256); }
  unsigned char *header() const { return host + 512; }
};

// The kernel node's parameters (pointers to values: they must outlive the
// graph's building and each cudaGraphExecKernelNodeSetParams).
struct publish_args {
  unsigned *done;
  volatile unsigned *flag;
  const uint64_t *word;
  uint64_t *sink;
  cudaGraphConditionalHandle cond = 0;
  int set_cond = 0;
  void *params[6] = {&done, &flag, &word, &sink, &cond, &set_cond};
};

// What each shape is made of (bench_graph_floor.h), in shape order.
// more: kernels after the second (the gate's place), in an IF node's body
// with in_if (skipped: the first kernel sets its condition to 0).
struct shape_parts {
  const char *name;
  bool graph, upload, second, early, reads_host, new_params;
  int more;
  bool in_if;
};
constexpr shape_parts kShapes[FL_FLOOR_SHAPES] = {
    {"kernel", true, false, false, false, false, false, 0, false},
    {"upload+kernel", true, true, false, false, false, false, 0, false},
    {"upload+2 kernels", true, true, true, false, false, false, 0, false},
    {"upload+2 kernels, early", true, true, true, true, false, false, 0, false},
    {"kernel reads host", true, false, false, false, true, false, 0, false},
    {"kernel, new params", true, false, false, false, false, true, 0, false},
    {"2 kernels, early, new params", true, false, true, true, false, true, 0, false},
    {"plain launch", false, false, false, false, false, false, 0, false},
    {"upload+4 kernels, early", true, true, true, true, false, false, 2, false},
    {"upload+2 kernels, early, IF of 2 skipped", true, true, true, true, false, false, 2, true},
};

// An IF node after the last node added to `to`, whose body (built into
// *body as `to` is) runs only when a kernel before it set `cond` nonzero.
cudaError_t add_if(fl_launch_to to, cudaGraphConditionalHandle cond, fl_launch_to *body,
                   void **body_last) {
  cudaGraphNodeParams p{};  // the reserved fields must be 0
  p.type = cudaGraphNodeTypeConditional;
  p.conditional.handle = cond;
  p.conditional.type = cudaGraphCondTypeIf;
  p.conditional.size = 1;
  cudaGraphNode_t prev = (cudaGraphNode_t)*to.last, n = nullptr;
  cudaError_t e = cudaGraphAddNode(&n, (cudaGraph_t)to.graph, prev ? &prev : nullptr, nullptr,
                                   prev ? 1 : 0, &p);
  if (e != cudaSuccess) return e;
  *to.last = n;
  *body_last = nullptr;
  *body = {nullptr, p.conditional.phGraph_out[0], body_last, to.early};
  return cudaSuccess;
}

// The graph outlives its instance: a parameter update names the node of the
// graph the instance was made from. Built node by node as the library builds
// its graphs (common/launch_to.h).
cudaError_t build(const shape_parts &sp, const bufs &b, uint64_t header_bytes, publish_args *pa,
                  cudaGraph_t *graph, cudaGraphExec_t *exec, cudaGraphNode_t *kernel) {
  cudaError_t e = cudaGraphCreate(graph, 0);
  void *last = nullptr;
  fl_launch_to to = {nullptr, *graph, &last, sp.early};
  if (e == cudaSuccess && sp.upload)
    e = fl_launch_copy(to, b.dev, b.header(), header_bytes, cudaMemcpyHostToDevice);
  pa->word = sp.reads_host ? b.host_word() : nullptr;
  pa->flag = b.flag();
  pa->done = b.done;
  pa->sink = b.sink;
  pa->set_cond = sp.in_if;
  // The condition is 0 at each launch unless a kernel sets it.
  if (e == cudaSuccess && sp.in_if)
    e = cudaGraphConditionalHandleCreate(&pa->cond, *graph, 0, cudaGraphCondAssignDefault);
  if (e == cudaSuccess)
    e = fl_launch_kernel(to, (const void *)publish, kBlocks, kThreads, 0, pa->params);
  *kernel = (cudaGraphNode_t)last;
  uint64_t *sink = b.sink;
  void *params2[] = {&sink};
  if (e == cudaSuccess && sp.second)
    e = fl_launch_kernel(to, (const void *)after, kBlocks, kThreads, 0, params2);
  void *body_last = nullptr;
  fl_launch_to more = to;
  if (e == cudaSuccess && sp.in_if) e = add_if(to, pa->cond, &more, &body_last);
  for (int i = 0; e == cudaSuccess && i < sp.more; i++)
    e = fl_launch_kernel(more, (const void *)after, kBlocks, kThreads, 0, params2);
  if (e == cudaSuccess) e = cudaGraphInstantiate(exec, *graph, 0);
  return e;
}

cudaError_t time_shape(const shape_parts &sp, const bufs &b, uint64_t header_bytes, int reps,
                       cudaStream_t s, fl_floor_result *out) {
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaGraphNode_t kernel = nullptr;
  publish_args pa;
  cudaError_t e =
      sp.graph ? build(sp, b, header_bytes, &pa, &graph, &exec, &kernel) : cudaSuccess;
  cudaKernelNodeParams kp = {};
  kp.func = (void *)publish;
  kp.gridDim = dim3(kBlocks);
  kp.blockDim = dim3(kThreads);
  kp.kernelParams = pa.params;
  std::vector<double> batch, flag;
  for (int r = 0; e == cudaSuccess && r < kWarmup + reps; r++) {
    *b.flag() = 0;
    double t0 = 1e6 * fl_now_s();
    if (exec) {
      if (sp.new_params) e = cudaGraphExecKernelNodeSetParams(exec, kernel, &kp);
      if (e == cudaSuccess) e = cudaGraphLaunch(exec, s);
    } else {
      publish<<<kBlocks, kThreads, 0, s>>>(b.done, b.flag(), nullptr, b.sink, 0, 0);
      e = cudaGetLastError();
    }
    if (e != cudaSuccess) break;
    while (*b.flag() == 0) {
    }
    double t1 = 1e6 * fl_now_s();
    e = cudaStreamSynchronize(s);
    double t2 = 1e6 * fl_now_s();
    if (r >= kWarmup) batch.push_back(t2 - t0), flag.push_back(t1 - t0);
  }
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  if (e != cudaSuccess) return e;
  std::sort(batch.begin(), batch.end());
  std::sort(flag.begin(), flag.end());
  out->batch_p50_us = batch[reps / 2];
  out->batch_p90_us = batch[reps * 9 / 10];
  out->flag_p50_us = flag[reps / 2];
  return cudaSuccess;
}

}  // namespace

extern "C" const char *fl_floor_shape_name(int shape) {
  return shape >= 0 && shape < FL_FLOOR_SHAPES ? kShapes[shape].name : "?";
}

extern "C" int fl_bench_graph_floor(uint64_t header_bytes, int reps, fl_floor_result *out) {
  if (reps < 1) reps = 1;
  bufs b;
  cudaStream_t s = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaHostAlloc(&b.host, 512 + header_bytes, cudaHostAllocMapped);
  if (e == cudaSuccess) e = cudaMalloc(&b.dev, header_bytes ? header_bytes : 1);
  if (e == cudaSuccess) e = cudaMalloc(&b.done, sizeof *b.done);
  if (e == cudaSuccess) e = cudaMemset(b.done, 0, sizeof *b.done);
  if (e == cudaSuccess) e = cudaMalloc(&b.sink, 2 * kBlocks * sizeof *b.sink);
  for (int shape = 0; e == cudaSuccess && shape < FL_FLOOR_SHAPES; shape++)
    e = time_shape(kShapes[shape], b, header_bytes, reps, s, &out[shape]);
  cudaFreeHost(b.host);
  cudaFree(b.dev);
  cudaFree(b.done);
  cudaFree(b.sink);
  if (s) cudaStreamDestroy(s);
  return (int)e;
}
