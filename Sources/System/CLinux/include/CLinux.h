#ifndef LOCATIOND_CLINUX_H
#define LOCATIOND_CLINUX_H
/* Linux system interfaces that Swift's Glibc module does not export: epoll(7), eventfd(2) and
 * glibc's posix_spawn_file_actions_addclosefrom_np (declared only under _GNU_SOURCE); and the
 * count of free descriptors, shared by SystemIO and the web server's C code. */
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

/* posix_spawn_file_actions_addclosefrom_np(actions, from) (glibc 2.34): the child closes every
 * descriptor from `from` up. Returns 0, or an errno value. */
int locationd_spawn_close_from(posix_spawn_file_actions_t *actions, int from);

/* The descriptors this process has open: the entries of /proc/self/fd, less the one that reads
 * it; -1 when /proc cannot be read. */
int locationd_open_descriptor_count(void);

/* How many descriptors are free below the soft RLIMIT_NOFILE limit, after raising that limit
 * when fewer than `wanted` are: toward the hard limit, at most to FD_SETSIZE (1024, so that a
 * library that waits with select(2) never gets a number it cannot watch). LONG_MAX when the
 * limit is unlimited or the count cannot be read. See SystemIO's DescriptorReserve. */
long locationd_free_descriptors(int wanted);

/* Flushes standard output and says whether anything written to it was lost: 0, or an errno
 * value. A stream whose error flag an earlier implicit flush set gives EPIPE when its reader has
 * gone (a pipe with no reader polls as an error), else EIO. Clears the flag. */
int locationd_flush_standard_output(void);
#endif
