/* pid 1 of a sandboxed call, exec'd by the call's Python pid 1 once it has forked the tool.
 *
 *     pid1 TOOL_PID TERM_TARGET
 *
 * Reaps every process of the namespace (orphans of setsid, nohup, double forks), forwards
 * SIGTERM to TERM_TARGET (-1: every process of the pid namespace; a pid when there is no
 * pid namespace, test-only), and when TOOL_PID ends, exits with its status (128 + signal
 * for a killed tool): pid 1 exiting makes the kernel SIGKILL what is left of the namespace.
 *
 * Once a SIGTERM was forwarded (the zygote ends the call: timeout, cancel), the tool's end
 * no longer ends the namespace: every process got the SIGTERM and has the zygote's grace to
 * act on it (a program's handler removing its lock file), so pid 1 goes on reaping until
 * none is left (ECHILD), then exits with the tool's status; one that outlasts the grace
 * dies with pid 1 by the zygote's SIGKILL. Without that, a Python tool (shell_exec's
 * runner) dying of the SIGTERM at once took everything else with it, before the grace.
 *
 * Why a program of its own: the Python copy of the zygote that set the call up would
 * otherwise stay alive only to wait, its ~25 MB address space torn down at the end of
 * every call, on the path to the result. This is a few hundred bytes, exits at once.
 *
 * Freestanding x86_64 Linux: no libc, raw system calls, no signal handlers (SIGTERM and
 * SIGCHLD arrive blocked from the exec'ing process and are taken with rt_sigtimedwait; a
 * blocked signal is never discarded, not even for a pid-namespace init).
 */

typedef unsigned long u64;

#define SYS_rt_sigprocmask 14
#define SYS_wait4 61
#define SYS_kill 62
#define SYS_rt_sigtimedwait 128
#define SYS_prctl 157
#define SYS_exit_group 231

#define SIGTERM 15
#define SIGCHLD 17
#define SIG_BLOCK 0
#define WNOHANG 1
#define ECHILD 10
#define PR_SET_DUMPABLE 4
#define EXIT_PROTOCOL 126

#include "rawsys.h"

__attribute__((noreturn)) static void finish(long code) {
    for (;;) sys4(SYS_exit_group, code, 0, 0, 0);
}

static long parse(const char *s) {
    long sign = 1, v = 0;
    if (!s) finish(EXIT_PROTOCOL);
    if (*s == '-') {
        sign = -1;
        s++;
    }
    if (!*s) finish(EXIT_PROTOCOL);
    for (; *s; s++) {
        if (*s < '0' || *s > '9') finish(EXIT_PROTOCOL);
        v = v * 10 + (*s - '0');
    }
    return sign * v;
}

static long exit_code(int status) {
    int sig = status & 0x7f;
    if (sig == 0) return (status >> 8) & 0xff; /* exited */
    if (sig != 0x7f) return 128 + sig;         /* killed by a signal */
    return 127;
}

__attribute__((noreturn, used)) void pid1_main(long *sp) {
    long argc = sp[0];
    char **argv = (char **)(sp + 1);
    if (argc != 3) finish(EXIT_PROTOCOL);
    long tool = parse(argv[1]);
    long target = parse(argv[2]);
    if (tool <= 0 || target == 0) finish(EXIT_PROTOCOL);
    /* Not dumpable: the tool (same uid, same user namespace) gets no ptrace-style access
     * to this process, its /proc/1 entries (root, cwd, fds) included. */
    sys4(SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0);
    u64 mask = (1UL << (SIGTERM - 1)) | (1UL << (SIGCHLD - 1));
    sys4(SYS_rt_sigprocmask, SIG_BLOCK, (long)&mask, 0, 8);
    int terminating = 0;          /* a SIGTERM was forwarded: wait for every process */
    long code = EXIT_PROTOCOL;    /* the tool's status once reaped */
    for (;;) {
        int status = 0;
        long pid;
        while ((pid = sys4(SYS_wait4, -1, (long)&status, WNOHANG, 0)) > 0) {
            if (pid != tool) continue;
            code = exit_code(status);
            if (!terminating) finish(code);
        }
        /* No child left: the namespace is empty after a SIGTERM, or the tool was never
         * ours (EXIT_PROTOCOL). */
        if (pid == -ECHILD) finish(code);
        long sig = sys4(SYS_rt_sigtimedwait, (long)&mask, 0, 0, 8);
        if (sig == SIGTERM) {
            sys4(SYS_kill, target, SIGTERM, 0, 0);
            terminating = 1;
        }
    }
}

/* The kernel starts us with argc at the stack pointer; align the stack for the call. */
__asm__(
    ".text\n"
    ".global _start\n"
    "_start:\n"
    "    xor %rbp, %rbp\n"
    "    mov %rsp, %rdi\n"
    "    and $-16, %rsp\n"
    "    call pid1_main\n"
    "    hlt\n");
