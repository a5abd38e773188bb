/* A raw x86_64 Linux system call of up to four arguments, for the freestanding pieces of
 * the sandbox (pid1.c, sigexit.c): no libc, so nothing of it runs in a call's pid 1 or in a
 * signal handler. Returns the result or -errno. Included by both; pid1.py's build digest
 * covers this file too. */
#ifndef RUNTIME_RAWSYS_H
#define RUNTIME_RAWSYS_H

static long sys4(long n, long a, long b, long c, long d) {
    long r;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10)
                     : "rcx", "r11", "memory");
    return r;
}

#endif
