/* Runs a command with stdout and stderr on /dev/null and prints
 * "WALL_NS MAXRSS_KB STATUS". A small parent of its own, because the kernel
 * keeps a process's peak RSS across exec: a child forked from Python starts
 * out "peaking" at Python's size (Scripts/bench startup).
 *
 *   cc -O2 -o maxrss maxrss.c && maxrss /path/to/bluectl --version
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: maxrss COMMAND [ARG...]\n"); return 64; }
    struct timespec start, end;
    clock_gettime(CLOCK_MONOTONIC, &start);
    pid_t pid = fork();
    if (pid < 0) { perror("maxrss: fork"); return 71; }
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execv(argv[1], argv + 1);
        _exit(127);
    }
    int status;
    struct rusage usage;
    if (wait4(pid, &status, 0, &usage) < 0) { perror("maxrss: wait4"); return 71; }
    clock_gettime(CLOCK_MONOTONIC, &end);
    long ns = (end.tv_sec - start.tv_sec) * 1000000000L + (end.tv_nsec - start.tv_nsec);
    printf("%ld %ld %d\n", ns, usage.ru_maxrss, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return 0;
}
