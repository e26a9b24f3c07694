#define _GNU_SOURCE
#include "CLinux.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <limits.h>
#include <sys/resource.h>
#include <sys/select.h>

int locationd_spawn_close_from(posix_spawn_file_actions_t *actions, int from) {
  return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

int locationd_open_descriptor_count(void) {
  DIR *directory = opendir("/proc/self/fd");
  if (directory == NULL) return -1;
  int count = 0;
  for (struct dirent *entry = readdir(directory); entry != NULL; entry = readdir(directory)) {
    if (entry->d_name[0] != '.') count++;
  }
  closedir(directory);
  return count - 1;
}

long locationd_free_descriptors(int wanted) {
  struct rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return LONG_MAX;
  int open = locationd_open_descriptor_count();
  if (open < 0) return LONG_MAX;
  long available = (long)limit.rlim_cur - open;
  if (available >= wanted || limit.rlim_cur >= limit.rlim_max || limit.rlim_cur >= FD_SETSIZE) return available;
  /* Twice the limit, or what is open and twice the wanted margin, whichever is more; within the
   * hard limit and FD_SETSIZE. */
  rlim_t target = (rlim_t)open + 2 * (rlim_t)wanted;
  if (target < 2 * limit.rlim_cur) target = 2 * limit.rlim_cur;
  if (target > FD_SETSIZE) target = FD_SETSIZE;
  if (target > limit.rlim_max) target = limit.rlim_max;
  struct rlimit raised = {target, limit.rlim_max};
  if (setrlimit(RLIMIT_NOFILE, &raised) != 0) return available;
  return (long)target - open;
}

int locationd_flush_standard_output(void) {
  errno = 0;
  if (fflush(stdout) != 0) {
    int code = errno != 0 ? errno : EIO;
    clearerr(stdout);
    return code;
  }
  if (!ferror(stdout)) return 0;
  clearerr(stdout);
  /* The failed write's errno is gone: a pipe whose reader has closed polls as an error. */
  struct pollfd output = {.fd = fileno(stdout), .events = POLLOUT, .revents = 0};
  if (poll(&output, 1, 0) == 1 && (output.revents & POLLERR)) return EPIPE;
  return EIO;
}
