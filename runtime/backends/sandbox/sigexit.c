/* Fatal signals for a tool process that is itself pid 1 of its call's pid namespace.
 *
 * A Python tool that does not run programs is the call's only process, and so pid 1 of the
 * call's pid namespace (child.py, "one copy per call"). The kernel protects a namespace's
 * init: a signal it has no handler for is dropped when it comes from inside the namespace
 * (kill(getpid(), SIGSEGV), raise, abort's first SIGABRT) or from an ancestor (the zygote's
 * timeout SIGTERM), and a kernel-sent one such as RLIMIT_CPU's SIGXCPU too. Only SIGKILL,
 * SIGSTOP and real faults get through. So the tool installs this handler for every signal
 * whose default action ends a process: it exits with 128 + the signal number, the status
 * the reaper (pid1.c) reports for a tool killed by a signal, so the broker's reading of an
 * exit does not depend on which model ran the call.
 *
 * A C handler, not a Python one: a Python handler runs only between bytecodes (never for a
 * tool stuck in C code) and would make a real fault re-execute the faulting instruction
 * forever. exit_group is async-signal-safe and ends every thread.
 *
 * Freestanding x86_64 Linux shared object: no libc, raw system calls. The zygote maps it
 * once (from a sealed memfd); every call inherits the mapping.
 */

typedef unsigned long u64;

#define SYS_rt_sigaction 13
#define SYS_exit_group 231
#define SA_RESTORER 0x04000000UL

#include "rawsys.h"

/* The head of the kernel's siginfo (x86_64): number, errno, code. */
struct siginfo_head {
    int signo;
    int errno_;
    int code;
};

#define SIGSYS 31
#define SYS_SECCOMP 1
#define SA_SIGINFO 4UL

/* A seccomp RET_TRAP raises SIGSYS with the filter's 16-bit data in si_errno: the call's
 * extra filter (``pid1.self_kill_filter``) traps a SIGKILL the process sends itself, which
 * the kernel would drop for an init, and puts 9 there: the process ends as if killed. */
static void die(int sig, struct siginfo_head *info, void *ctx) {
    (void)ctx;
    long code = 128 + sig;
    if (sig == SIGSYS && info && info->code == SYS_SECCOMP && info->errno_ > 0 &&
        info->errno_ < 65)
        code = 128 + info->errno_;
    for (;;) sys4(SYS_exit_group, code, 0, 0, 0);
}

struct kernel_sigaction {
    void (*handler)(int, struct siginfo_head *, void *);
    u64 flags;
    void (*restorer)(void);
    u64 mask;
};

/* Default action "terminate" or "core". Not SIGXFSZ: Python ignores it, so a write past
 * RLIMIT_FSIZE fails with EFBIG as in any tool process; not SIGKILL or SIGSTOP (cannot be
 * caught); not the ones ignored or stopping by default (SIGCHLD, SIGCONT, SIGTSTP, SIGTTIN,
 * SIGTTOU, SIGURG, SIGWINCH). Real-time signals 34..64 end a process by default too. */
static const unsigned char FATAL[] = {1,  2,  3,  4,  5,  6,  7,  8,  10, 11,
                                      12, 13, 14, 15, 16, 24, 26, 27, 29, 30, 31};

/* Install the exit handler; 0, or the negative errno of the first refusal. */
__attribute__((visibility("default"))) long runtime_sigexit_install(void) {
    /* x86_64 delivers a handled signal only with SA_RESTORER; the handler never returns,
     * so the restorer is never used. Every signal is blocked while it runs. */
    struct kernel_sigaction sa = {die, SA_SIGINFO | SA_RESTORER, (void (*)(void))die, ~0UL};
    for (unsigned i = 0; i < sizeof FATAL; i++) {
        long r = sys4(SYS_rt_sigaction, FATAL[i], (long)&sa, 0, 8);
        if (r < 0) return r;
    }
    for (long sig = 34; sig <= 64; sig++) {
        long r = sys4(SYS_rt_sigaction, sig, (long)&sa, 0, 8);
        if (r < 0) return r;
    }
    return 0;
}
