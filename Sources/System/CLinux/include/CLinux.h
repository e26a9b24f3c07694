#ifndef LOCATIOND_CLINUX_H
#define LOCATIOND_CLINUX_H
/* Linux system interfaces that Swift's Glibc module does not export: epoll(7) and eventfd(2). */
#include <sys/epoll.h>
#include <sys/eventfd.h>
#endif
