package cuda

import (
	"fmt"
	"strings"
)

// EmulatorSource returns the C++ text the emulator compiles for a source:
// the CUDA shim, the source, and one entry point per kernel.
func EmulatorSource(src *Source) (string, error) {
	decls, err := src.Kernels()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(emulatorHeader)
	b.WriteString("\n#line 1 \"" + src.Name + ".cu\"\n")
	b.WriteString(src.Code)
	b.WriteString("\n// Entry points.\n")
	for _, name := range sortedKeys(decls) {
		d := decls[name]
		fmt.Fprintf(&b, "static void rbemu_body_%s(void** p) {\n  %s(", name, name)
		for i, p := range d.Params {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "*(%s*)p[%d]", p.Type, i)
		}
		b.WriteString(");\n}\n")
		fmt.Fprintf(&b, "extern \"C\" int rbemu_%s(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int threaded, void** p) {\n", name)
		fmt.Fprintf(&b, "  return rbemu_launch(gx, gy, gz, bx, by, bz, threaded, p, rbemu_body_%s);\n}\n", name)
	}
	return b.String(), nil
}

const emulatorHeader = `// CUDA shim for the rulebook kernel emulator.
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rbemu_dim3 { unsigned x, y, z; };
static thread_local rbemu_dim3 threadIdx, blockIdx;
static rbemu_dim3 blockDim, gridDim;
static pthread_barrier_t rbemu_barrier;
static bool rbemu_threaded;

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__

static inline void __syncthreads() {
  if (!rbemu_threaded) {
    fprintf(stderr, "rbemu: __syncthreads in a kernel launched without threads\n");
    abort();
  }
  pthread_barrier_wait(&rbemu_barrier);
}
static inline float __int_as_float(int v) { float f; memcpy(&f, &v, sizeof f); return f; }
static inline double __longlong_as_double(long long v) { double d; memcpy(&d, &v, sizeof d); return d; }

typedef void (*rbemu_body)(void**);

// rbemu_blocks runs every block: thread t of each (threaded), or all its
// threads in turn.
static void rbemu_blocks(rbemu_body body, void** p, unsigned t, bool threaded) {
  unsigned n = blockDim.x * blockDim.y * blockDim.z;
  for (unsigned z = 0; z < gridDim.z; z++)
    for (unsigned y = 0; y < gridDim.y; y++)
      for (unsigned x = 0; x < gridDim.x; x++) {
        blockIdx.x = x; blockIdx.y = y; blockIdx.z = z;
        for (unsigned i = threaded ? t : 0; i < (threaded ? t + 1 : n); i++) {
          threadIdx.x = i % blockDim.x;
          threadIdx.y = (i / blockDim.x) % blockDim.y;
          threadIdx.z = i / (blockDim.x * blockDim.y);
          body(p);
        }
        // No thread starts the next block (and reuses the shared arrays)
        // before all have finished this one.
        if (threaded) pthread_barrier_wait(&rbemu_barrier);
      }
}

struct rbemu_job { rbemu_body body; void** p; unsigned t; };

static void* rbemu_thread(void* arg) {
  rbemu_job* j = (rbemu_job*)arg;
  rbemu_blocks(j->body, j->p, j->t, true);
  return 0;
}

static int rbemu_launch(unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, int threaded, void** p, rbemu_body body) {
  gridDim.x = gx; gridDim.y = gy; gridDim.z = gz;
  blockDim.x = bx; blockDim.y = by; blockDim.z = bz;
  rbemu_threaded = threaded != 0;
  if (!threaded) {
    rbemu_blocks(body, p, 0, false);
    return 0;
  }
  unsigned n = bx * by * bz;
  if (pthread_barrier_init(&rbemu_barrier, 0, n) != 0) return 1;
  pthread_t* threads = (pthread_t*)malloc(n * sizeof(pthread_t));
  rbemu_job* jobs = (rbemu_job*)malloc(n * sizeof(rbemu_job));
  for (unsigned t = 0; t < n; t++) {
    jobs[t].body = body; jobs[t].p = p; jobs[t].t = t;
    if (pthread_create(&threads[t], 0, rbemu_thread, &jobs[t]) != 0) {
      fprintf(stderr, "rbemu: pthread_create failed\n");
      abort();
    }
  }
  for (unsigned t = 0; t < n; t++) pthread_join(threads[t], 0);
  pthread_barrier_destroy(&rbemu_barrier);
  free(threads);
  free(jobs);
  return 0;
}
`
