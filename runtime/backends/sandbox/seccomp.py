"""Seccomp allowlists, compiled once in the broker and loaded as raw BPF in each child.

Default deny: a syscall not on the list fails with ENOSYS ("not available here"), which is
distinct from the kernel's own EPERM so tests can tell the filter acted. The allowlists leave
out, among others: ptrace, process_vm_readv/writev, mount, umount2, pivot_root, chroot,
unshare, setns, keyctl, add_key, request_key, bpf, perf_event_open, userfaultfd, io_uring_*,
kexec_*, init_module, finit_module, delete_module, personality, acct, swapon, reboot.
``clone`` is allowed only without namespace flags; ``clone3`` hides its flags in memory that
BPF cannot read, so it fails with ENOSYS and libc falls back to ``clone``. ``socket`` and
``socketpair`` are allowed for AF_UNIX only. A syscall from another ABI (i386 ``int 0x80``,
x32) kills the process: libseccomp's architecture check runs before the table.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import socket

import pyseccomp

from runtime.backends.sandbox import _linux

__all__ = ["EXEC_EXTRA", "PYTHON_ALLOW", "build_program", "programs"]

#: What a forked Python tool needs: file I/O, memory, signals, threads, time, unix sockets.
PYTHON_ALLOW = (
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
    "preadv2", "pwritev2", "open", "openat", "openat2", "close", "close_range", "creat",
    "stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "lseek",
    "access", "faccessat", "faccessat2", "readlink", "readlinkat", "getdents64",
    "getcwd", "chdir", "fchdir", "mkdir", "mkdirat", "rmdir", "unlink", "unlinkat",
    "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat",
    "chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat", "umask",
    "truncate", "ftruncate", "fallocate", "fsync", "fdatasync", "sync_file_range",
    "utime", "utimes", "utimensat", "futimesat", "flock", "fcntl", "ioctl", "dup", "dup2",
    "dup3", "pipe", "pipe2", "splice", "tee", "sendfile", "copy_file_range", "fadvise64",
    "getxattr", "lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr",
    "mmap", "munmap", "mprotect", "mremap", "madvise", "brk", "mincore", "msync",
    "memfd_create", "membarrier", "rt_sigaction", "rt_sigprocmask", "rt_sigreturn",
    "rt_sigpending", "rt_sigtimedwait", "rt_sigsuspend", "rt_sigqueueinfo", "sigaltstack",
    "kill", "tgkill", "tkill", "alarm", "pause", "getitimer", "setitimer", "timer_create",
    "timer_settime", "timer_gettime", "timer_getoverrun", "timer_delete", "nanosleep",
    "clock_gettime", "clock_getres", "clock_nanosleep", "gettimeofday", "time", "times",
    "timerfd_create", "timerfd_settime", "timerfd_gettime", "signalfd", "signalfd4",
    "eventfd", "eventfd2", "select", "pselect6", "poll", "ppoll", "epoll_create",
    "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2",
    "futex", "futex_waitv", "set_robust_list", "get_robust_list", "set_tid_address",
    "rseq", "sched_yield", "sched_getaffinity", "sched_getparam", "sched_getscheduler",
    "sched_get_priority_max", "sched_get_priority_min", "getpriority", "arch_prctl",
    "prctl", "exit", "exit_group", "wait4", "waitid", "restart_syscall", "fork",
    "getpid", "getppid", "gettid", "getuid", "geteuid", "getgid", "getegid", "getresuid",
    "getresgid", "getgroups", "getpgrp", "getpgid", "getsid", "setpgid", "setsid",
    "capget", "getrlimit", "setrlimit", "prlimit64", "getrusage", "sysinfo", "uname",
    "getrandom", "recvfrom", "sendto", "recvmsg", "sendmsg", "recvmmsg", "sendmmsg",
    "shutdown", "getsockname", "getpeername", "getsockopt", "setsockopt", "bind",
    "listen", "accept", "accept4", "connect",
)  # fmt: skip

#: What exec'd programs (shells, coreutils) need on top: execve and friends.
EXEC_EXTRA = ("execve", "execveat", "vfork")


def build_program(allow: tuple[str, ...], *, inet: bool = False) -> bytes:
    """Compile an allowlist to BPF bytes (done once; loading bytes in a child is cheap).

    ``inet`` also allows AF_INET/AF_INET6 sockets: only for a process the policy grants the
    network (the call sandbox never does; its egress goes through the broker)."""
    filt = pyseccomp.SyscallFilter(pyseccomp.ERRNO(errno.ENOSYS))
    # SCMP_FLTATR_ACT_BADARCH: a syscall from a non-native ABI kills the whole process.
    filt.set_attr(pyseccomp.Attr.ACT_BADARCH, pyseccomp.KILL_PROCESS)
    # A binary tree of syscall numbers instead of libseccomp's linear chain (libseccomp
    # >= 2.5; older ones keep the chain): the same rules, but loading it costs each call's
    # tool ~30 % less, as the kernel emulates the filter for every syscall number to
    # build its allow cache, and the syscalls not in that cache walk ~8 tests, not ~200.
    with contextlib.suppress(OSError, ValueError, RuntimeError):
        filt.set_attr(pyseccomp.Attr.CTL_OPTIMIZE, 2)
    for name in allow:
        try:
            filt.add_rule(pyseccomp.ALLOW, name)
        except (OSError, ValueError, RuntimeError):
            continue  # a name this libseccomp does not know: it stays denied
    filt.add_rule(
        pyseccomp.ALLOW, "clone", pyseccomp.Arg(0, pyseccomp.MASKED_EQ, _linux.NS_FLAGS, 0)
    )
    # clone3 stays on the default (ENOSYS): glibc then falls back to clone, which we can filter.
    for name in ("socket", "socketpair"):
        filt.add_rule(pyseccomp.ALLOW, name, pyseccomp.Arg(0, pyseccomp.EQ, socket.AF_UNIX))
        if inet:
            # Other families (netlink, packet, ...) stay on the default: ENOSYS.
            for family in (socket.AF_INET, socket.AF_INET6):
                filt.add_rule(pyseccomp.ALLOW, name, pyseccomp.Arg(0, pyseccomp.EQ, family))
        else:
            filt.add_rule(
                pyseccomp.ERRNO(errno.EAFNOSUPPORT),
                name,
                pyseccomp.Arg(0, pyseccomp.NE, socket.AF_UNIX),
            )
    fd = os.memfd_create("seccomp-bpf", os.MFD_CLOEXEC)
    try:
        with os.fdopen(os.dup(fd), "wb") as out:
            filt.export_bpf(out)
        size = os.fstat(fd).st_size
        program = os.pread(fd, size, 0)
    finally:
        os.close(fd)
    if not program or len(program) % 8:
        raise OSError(errno.EINVAL, "libseccomp produced an empty or malformed program")
    return program


@functools.cache
def programs() -> tuple[bytes, bytes]:
    """The call sandbox's two programs, (Python tools, tools that exec), built once per
    process. The broker builds them and sends the bytes to the fork-server, which then never
    imports libseccomp: its heap is copied twice per call. OSError if libseccomp fails."""
    return build_program(PYTHON_ALLOW), build_program(PYTHON_ALLOW + EXEC_EXTRA)
