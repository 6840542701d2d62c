/* launch_to.h: where a launcher puts its work: on a stream, or as nodes of
 * a CUDA graph being built, each after the last one added. A graph built
 * node by node, unlike one captured from a stream, leaves no window in
 * which another thread's cudaDeviceSynchronize fails (it does while any
 * stream of the context is capturing). */
#ifndef FL_COMMON_LAUNCH_TO_H
#define FL_COMMON_LAUNCH_TO_H

#include <cuda_runtime_api.h>

typedef struct fl_launch_to {
  void *stream; /* cudaStream_t, when graph is NULL */
  void *graph;  /* cudaGraph_t being built, or NULL */
  void **last;  /* with graph: the last node added (NULL: none yet); updated */
  int early;    /* with graph: a kernel after a kernel launches once every block
                   of the one before has begun (a programmatic edge), so that its
                   launch latency hides behind that kernel's run; every kernel
                   launched so must call fl_await_prior() (below) before
                   it touches memory the kernels before it write */
} fl_launch_to;

#ifdef __CUDACC__
/* In a kernel launched early (fl_launch_to.early): waits until the kernels
 * before it have ended and their writes are visible; nothing in a kernel
 * launched otherwise. */
__device__ __forceinline__ void fl_await_prior(void) { asm volatile("griddepcontrol.wait;" ::: "memory"); }
#endif

/* Work on a stream, outside any graph. */
static inline fl_launch_to fl_launch_on(void *stream) {
  fl_launch_to t = {stream, NULL, NULL, 0};
  return t;
}

/* Kernel fn with its parameters (pointers to values of its parameter
 * types, as cudaLaunchKernel takes them; a graph node copies them). Every
 * launch of the library goes through here: cudaLaunchKernel's status is the
 * launch's own, where cudaGetLastError() after <<<>>> also returns an
 * earlier failed runtime call of this thread that nothing cleared (a
 * reservoir's cudaMalloc that fell back), and failed the launch for it. */
static inline cudaError_t fl_launch_kernel(fl_launch_to t, const void *fn, dim3 grid, dim3 block,
                                           size_t smem, void **params) {
  if (!t.graph) return cudaLaunchKernel(fn, grid, block, params, smem, (cudaStream_t)t.stream);
  struct cudaKernelNodeParams p;
  p.func = (void *)fn;
  p.gridDim = grid;
  p.blockDim = block;
  p.sharedMemBytes = (unsigned)smem;
  p.kernelParams = params;
  p.extra = NULL;
  cudaGraphNode_t prev = (cudaGraphNode_t)*t.last, n = NULL;
  enum cudaGraphNodeType prev_type = cudaGraphNodeTypeEmpty;
  if (prev && t.early && cudaGraphNodeGetType(prev, &prev_type) != cudaSuccess)
    prev_type = cudaGraphNodeTypeEmpty;
  int early = prev_type == cudaGraphNodeTypeKernel;
  cudaError_t e = cudaGraphAddKernelNode(&n, (cudaGraph_t)t.graph, prev && !early ? &prev : NULL,
                                         prev && !early ? 1 : 0, &p);
  if (e == cudaSuccess && early) {
    cudaGraphEdgeData edge = {0};
    edge.from_port = cudaGraphKernelNodePortLaunchCompletion;
    edge.type = cudaGraphDependencyTypeProgrammatic;
    e = cudaGraphAddDependencies((cudaGraph_t)t.graph, &prev, &n, &edge, 1);
  }
  if (e == cudaSuccess) *t.last = n; /* the next node depends on this one */
  return e;
}

/* A linear copy of `bytes` (pinned host memory, when on the host). */
static inline cudaError_t fl_launch_copy(fl_launch_to t, void *dst, const void *src, size_t bytes,
                                         enum cudaMemcpyKind kind) {
  if (!t.graph) return cudaMemcpyAsync(dst, src, bytes, kind, (cudaStream_t)t.stream);
  cudaGraphNode_t prev = (cudaGraphNode_t)*t.last, n = NULL;
  cudaError_t e = cudaGraphAddMemcpyNode1D(&n, (cudaGraph_t)t.graph, prev ? &prev : NULL,
                                           prev ? 1 : 0, dst, src, bytes, kind);
  if (e == cudaSuccess) *t.last = n;
  return e;
}

/* Loads kernels now: cudaFuncGetAttributes loads a kernel that lazy module
 * loading (the default since CUDA 12.2) has not loaded yet, which its first
 * launch would otherwise do, stalling whichever query meets it. Returns the
 * first failure (a cudaError_t), 0 when every kernel is loaded. */
static inline int fl_load_kernels(const void *const *kernels, int n) {
  struct cudaFuncAttributes at;
  for (int i = 0; i < n; i++) {
    cudaError_t e = cudaFuncGetAttributes(&at, kernels[i]);
    if (e != cudaSuccess) return (int)e;
  }
  return 0;
}

#endif
