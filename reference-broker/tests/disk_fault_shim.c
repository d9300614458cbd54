// An LD_PRELOAD shim for disk_fault_test.py: fails one fdatasync() of the broker below the broker, in libc's place,
// the way a failing disk does. Linux reports a writeback error once per file, to whichever fsync comes first, and
// says 0 to the next one; so does this shim: the failing call returns -1 with FAULT_ERRNO, and every later call is
// the real one. The failing call first sleeps FAULT_DELAY_MS, so that another thread's fdatasync of the same file
// can be made meanwhile (the race of issue 27, item 7a). Built by the test: cc -shared -fPIC -o shim.so this -ldl.
//
//   FAULT_PATH          the call fails only for a file whose path contains this ("segment-")
//   FAULT_NTH           which such call fails, counting from 1
//   FAULT_ERRNO         "EIO" (the default) or "ENOSPC"
//   FAULT_DELAY_MS      how long the failing call takes (0 by default)
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_long matching_calls;

// Whether `fd` is a file whose path contains FAULT_PATH (read from /proc, as the broker never says).
static int is_chosen_file(int fd) {
  const char* wanted = getenv("FAULT_PATH");
  if (wanted == NULL) return 0;
  char link[64], path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n < 0) return 0;
  path[n] = '\0';
  return strstr(path, wanted) != NULL;
}

static int chosen_errno(void) {
  const char* name = getenv("FAULT_ERRNO");
  return name != NULL && strcmp(name, "ENOSPC") == 0 ? ENOSPC : EIO;
}

int fdatasync(int fd) {
  static int (*real)(int);
  if (real == NULL) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
  const char* nth = getenv("FAULT_NTH");
  if (nth != NULL && is_chosen_file(fd) && atomic_fetch_add(&matching_calls, 1) + 1 == atol(nth)) {
    const char* delay = getenv("FAULT_DELAY_MS");
    const long ms = delay != NULL ? atol(delay) : 0;
    const struct timespec pause = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&pause, NULL);
    errno = chosen_errno();
    return -1;
  }
  return real(fd);
}
