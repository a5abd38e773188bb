"""Seccomp allowlists, compiled once in the broker and loaded as raw BPF in each child.

Default deny: a syscall not on the list fails with ENOSYS ("not available here"), which is
distinct from the kernel's own EPERM so tests can tell the filter acted. The allowlists leave
out, among others: ptrace, process_vm_readv/writev, mount, umount2, pivot_root, chroot,
unshare, setns, keyctl, add_key, request_key, bpf, perf_event_open, userfaultfd, io_uring_*,
kexec_*, init_module, finit_module, delete_module, personality, acct, swapon, reboot.
``clone`` is allowed only without namespace flags; ``clone3`` hides its flags in memory that
BPF cannot read, so it fails with ENOSYS and libc falls back to ``clone``. ``socket`` and
``socketpair`` are allowed for AF_UNIX only. No mode may carry a set-user-ID or
set-group-ID bit: chmod, open with O_CREAT and the rest refuse one with EPERM
(``_MODE_ARG``), and exec'd programs have no openat2, whose mode BPF cannot see. Exec'd
programs may mknod a FIFO and no other node (``_FIFO_ARG``). A syscall
from another ABI (i386 ``int 0x80``, x32) kills the process: libseccomp's architecture
check runs before the table.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import socket
import stat

import pyseccomp

from runtime.backends.sandbox import _linux

__all__ = ["EXEC_ALLOW", "EXEC_EXTRA", "EXEC_WITHOUT", "PYTHON_ALLOW", "build_program", "programs"]

#: What a forked Python tool needs: file I/O, memory, signals, threads, time, unix sockets.
PYTHON_ALLOW = (
    "read", "write", "readv", "writev", "pread64", "pwrite64", "preadv", "pwritev",
    "preadv2", "pwritev2", "openat2", "close", "close_range",
    "stat", "fstat", "lstat", "newfstatat", "statx", "statfs", "fstatfs", "lseek",
    "access", "faccessat", "faccessat2", "readlink", "readlinkat", "getdents64",
    "getcwd", "chdir", "fchdir", "rmdir", "unlink", "unlinkat",
    "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat",
    "chown", "fchown", "lchown", "fchownat", "umask",
    "truncate", "ftruncate", "fsync", "fdatasync", "sync_file_range",
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

#: What exec'd programs (shells, coreutils) need on top: execve and friends, and the id
#: calls. glibc's posix_spawn with POSIX_SPAWN_RESETIDS (GNU make runs every recipe line so)
#: calls setresuid(-1, getuid(), -1) in the child: refused, make failed every recipe with
#: "Function not implemented". Without capabilities (dropped, no_new_privs) the kernel lets
#: these only shuffle the process's own ids, all the sandbox uid: the kernel is the wall.
#: Priorities: nice, renice, taskset, ionice and chrt failed "Function not implemented" (nice
#: exited 125 without running its command). The kernel lets a process without capabilities
#: set these only on processes of its own uid that its pid namespace shows (the call's own),
#: and only downwards: a lower niceness needs CAP_SYS_NICE or RLIMIT_NICE, a real-time policy
#: CAP_SYS_NICE or RLIMIT_RTPRIO (both rlimits are 0, ``walls.rlimits``), the real-time I/O
#: class CAP_SYS_NICE/CAP_SYS_ADMIN; an affinity stays within the call's cpuset. (Best-effort
#: I/O level 0 needs nothing, as for any user; the io cgroup, where there is one, bounds it.)
#: mknod/mknodat are allowed for a FIFO only (``_FIFO_ARG``): mkfifo, valgrind's vgdb.
EXEC_EXTRA = (
    "execve", "execveat", "vfork",
    "setuid", "setgid", "setreuid", "setregid", "setresuid", "setresgid", "setgroups",
    "setpriority", "sched_setaffinity", "sched_setscheduler", "sched_setparam",
    "ioprio_set", "ioprio_get", "mknod", "mknodat",
)  # fmt: skip
#: What exec'd programs may not have of ``PYTHON_ALLOW``: openat2, whose mode BPF cannot read
#: (see ``_mode_rules``). libc's open never uses it; a program that tries it gets ENOSYS.
EXEC_WITHOUT = frozenset({"openat2"})
#: The exec'd programs' allowlist.
EXEC_ALLOW = tuple(name for name in PYTHON_ALLOW if name not in EXEC_WITHOUT) + EXEC_EXTRA

# No set-user-ID or set-group-ID bit, ever (systemd's RestrictSUIDSGID=). The workspace is the
# host's file system, mapped to its owner's uid: a set-uid file the tool made there would
# run as that owner for any local user who runs it (as host root when root owns the
# workspace), outside every wall; the sandbox's own nosuid mount is not the host's view.
_SUID_SGID = (stat.S_ISUID, stat.S_ISGID)
#: The syscalls that set a mode, with the index of their mode argument. Allowed when the mode
#: carries neither bit, refused with EPERM when it carries one.
_MODE_ARG = {
    "chmod": 1,
    "fchmod": 1,
    "fchmodat": 2,
    "fchmodat2": 2,
    "creat": 1,
    "mkdir": 1,
    "mkdirat": 2,
}
#: mknod and mknodat, with the index of their mode argument: allowed (where the allowlist
#: names them) for a FIFO without a set-id bit, EPERM for a FIFO with one, like the calls of
#: ``_MODE_ARG``. Any other file type (a device, which needs CAP_MKNOD anyway and finds nodev
#: mounts; a regular file or socket, which open and bind make) stays on the default, ENOSYS.
_FIFO_ARG = {"mknod": 1, "mknodat": 2}
_S_IFMT = 0o170000  # a mode's file-type bits (the mask of stat.S_IFMT)
#: open and openat: (flags, mode) argument indexes. The mode counts only when the flags
#: create a file (O_CREAT, or O_TMPFILE's own bit, which is linked in later).
_OPEN_ARGS = {"open": (1, 2), "openat": (2, 3)}
_CREATING = (os.O_CREAT, os.O_TMPFILE & ~os.O_DIRECTORY)
# openat2 passes its flags and mode in a struct that BPF cannot read, so it may create a file
# with a set-id bit. Exec'd programs (a shell, anything the model names) do not get it
# (``EXEC_WITHOUT``). The Python tool process keeps it, as the file toolkit resolves every
# path with RESOLVE_BENEATH; its code is the project's or the policy author's, and it
# creates files with its own modes, never a caller's. It was once left to programs on the
# reasoning that a write clears the bit: the kernel clears S_ISGID on write only when
# S_IXGRP is set or the writer is outside the file's group, so 02745 plus content kept it.


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
        if name in _FIFO_ARG:
            continue  # allowed for a FIFO only: ``_fifo_rules``
        try:
            filt.add_rule(pyseccomp.ALLOW, name)
        except (OSError, ValueError, RuntimeError):
            continue  # a name this libseccomp does not know: it stays denied
    _mode_rules(filt)
    _fifo_rules(filt, [name for name in allow if name in _FIFO_ARG])
    # fallocate reserves blocks without writing them, faster than the zygote's disk_mb
    # watch can look (twenty 60 MiB reservations in a few ms): "not supported", which
    # posix_fallocate and the programs that try it take as the cue to write instead.
    filt.add_rule(pyseccomp.ERRNO(errno.EOPNOTSUPP), "fallocate")
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


def _mode_rules(filt: pyseccomp.SyscallFilter) -> None:
    """The mode-setting syscalls, allowed without a set-id bit (``_SUID_SGID``). The rules
    of one syscall do not overlap: ALLOW when a bit is clear, EPERM when it is set."""
    clean = sum(_SUID_SGID)
    eperm = pyseccomp.ERRNO(errno.EPERM)
    for name, arg in _MODE_ARG.items():
        try:
            filt.add_rule(pyseccomp.ALLOW, name, pyseccomp.Arg(arg, pyseccomp.MASKED_EQ, clean, 0))
            for bit in _SUID_SGID:
                filt.add_rule(eperm, name, pyseccomp.Arg(arg, pyseccomp.MASKED_EQ, bit, bit))
        except (OSError, ValueError, RuntimeError):
            continue  # a name this libseccomp does not know (fchmodat2): it stays denied
    creating = sum(_CREATING)
    for name, (flags, mode) in _OPEN_ARGS.items():
        filt.add_rule(pyseccomp.ALLOW, name, pyseccomp.Arg(flags, pyseccomp.MASKED_EQ, creating, 0))
        filt.add_rule(pyseccomp.ALLOW, name, pyseccomp.Arg(mode, pyseccomp.MASKED_EQ, clean, 0))
        for create in _CREATING:
            for bit in _SUID_SGID:
                filt.add_rule(
                    eperm,
                    name,
                    pyseccomp.Arg(flags, pyseccomp.MASKED_EQ, create, create),
                    pyseccomp.Arg(mode, pyseccomp.MASKED_EQ, bit, bit),
                )


def _fifo_rules(filt: pyseccomp.SyscallFilter, names: list[str]) -> None:
    """mknod/mknodat (``names``) for a FIFO: one masked comparison of the mode argument on
    the file type and both set-id bits, (mode & (S_IFMT | S_ISUID | S_ISGID)) == S_IFIFO.
    A FIFO with a set-id bit is EPERM; the rules do not overlap (ALLOW wants both bits
    clear, EPERM one set; two EPERM rules may both match, with the same action)."""
    eperm = pyseccomp.ERRNO(errno.EPERM)
    for name in names:
        arg = _FIFO_ARG[name]
        mask = _S_IFMT | sum(_SUID_SGID)
        filt.add_rule(
            pyseccomp.ALLOW, name, pyseccomp.Arg(arg, pyseccomp.MASKED_EQ, mask, stat.S_IFIFO)
        )
        for bit in _SUID_SGID:
            filt.add_rule(
                eperm,
                name,
                pyseccomp.Arg(arg, pyseccomp.MASKED_EQ, _S_IFMT | bit, stat.S_IFIFO | bit),
            )


@functools.cache
def programs() -> tuple[bytes, bytes]:
    """The call sandbox's two programs, (Python tools, tools that exec), built once per
    process. The broker builds them and sends the bytes to the fork-server, which then never
    imports libseccomp: its heap is copied twice per call. OSError if libseccomp fails."""
    return build_program(PYTHON_ALLOW), build_program(EXEC_ALLOW)
