#define _GNU_SOURCE
#include "CLinux.h"

int locationd_spawn_close_from(posix_spawn_file_actions_t *actions, int from) {
  return posix_spawn_file_actions_addclosefrom_np(actions, from);
}
