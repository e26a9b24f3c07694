#ifndef LOCATIOND_CLINUX_H
#define LOCATIOND_CLINUX_H
/* Linux system interfaces that Swift's Glibc module does not export: epoll(7), eventfd(2) and
 * glibc's posix_spawn_file_actions_addclosefrom_np (declared only under _GNU_SOURCE). */
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

/* posix_spawn_file_actions_addclosefrom_np(actions, from) (glibc 2.34): the child closes every
 * descriptor from `from` up. Returns 0, or an errno value. */
int locationd_spawn_close_from(posix_spawn_file_actions_t *actions, int from);
#endif
