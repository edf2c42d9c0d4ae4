// visibleGpuCount (see launch.h). The driver is asked in a short-lived child process, so this
// process never initialises CUDA (a CUDA-initialised parent cannot give CUDA to forked children),
// and the count honours CUDA_VISIBLE_DEVICES, containers and MIG exactly as the ranks will see them.
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "launch/launch.h"

namespace mkccl {
namespace launch {
namespace {

typedef int (*CuInitFn)(unsigned int);
typedef int (*CuDeviceGetCountFn)(int*);

// -1 when the driver is missing or fails.
int askDriver(void* lib) {
  CuInitFn init = (CuInitFn)dlsym(lib, "cuInit");
  CuDeviceGetCountFn count = (CuDeviceGetCountFn)dlsym(lib, "cuDeviceGetCount");
  int n = 0;
  if (!init || !count || init(0) != 0 || count(&n) != 0) return -1;
  return n;
}

}  // namespace

int visibleGpuCount() {
  // Already loaded here (the caller uses CUDA): asking in-process creates no context either.
  if (void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD)) {
    int n = askDriver(lib);
    dlclose(lib);
    return n < 0 ? 0 : n;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return 0;
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return 0;
  }
  if (pid == 0) {
    close(fds[0]);
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    int n = lib ? askDriver(lib) : -1;
    (void)!write(fds[1], &n, sizeof(n));
    _exit(0);
  }
  close(fds[1]);
  int n = -1;
  pollfd p = {fds[0], POLLIN, 0};
  // A wedged driver can make cuInit hang: give up after a while rather than with it.
  bool got = poll(&p, 1, 60000) == 1 && read(fds[0], &n, sizeof(n)) == (ssize_t)sizeof(n);
  close(fds[0]);
  if (!got) {
    n = -1;
    kill(pid, SIGKILL);
  }
  int st;
  waitpid(pid, &st, 0);
  return n < 0 ? 0 : n;
}

}  // namespace launch
}  // namespace mkccl
