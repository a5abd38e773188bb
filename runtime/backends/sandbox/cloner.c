/* The cloner's loop: receive a clone request, clone, answer with the pid, in C.
 *
 * The cloner (zygote.py) is a copy of the zygote whose only job is to clone each call's
 * pid 1. Every clone leaves the new child sharing all of the cloner's pages, and every page
 * the cloner then *writes* is a copy-on-write fault. Python writes to every object it
 * touches (reference counts), so a Python loop between two clones copied ~250 pages a call
 * (~1 ms of CPU, plus ~0.7 ms of interpreter). This loop touches only its own stack and
 * the request buffer: between clones the cloner's Python heap is never written, so it stays
 * shared with every call and costs no fault.
 *
 * Python still runs in the cloner when the zygote marks a request so (``python`` in the
 * header): a tool to load or a new profile's mask globs to compile, which every later call
 * then inherits. The loop returns to Python for it, and Python hands the request back.
 *
 * Request (one SOCK_SEQPACKET datagram): struct request, then the msgpack frame the child
 * decodes; its descriptors by SCM_RIGHTS (the call's socket first, then the trees the root
 * zygote cloned). Answer: struct answer (seq, pid or -errno).
 *
 * Hazards: it runs inside a ctypes call that holds the GIL (PyDLL), in a single-threaded
 * process; the child returns from this function through ctypes into Python, exactly as a
 * raw clone through ctypes does (child.py's notes on ``_linux.clone`` apply). Changing the
 * effective uid clears the parent-death signal: re-armed after every clone.
 *
 * Freestanding x86_64 Linux shared object: no libc, raw system calls (rawsys.h).
 */

typedef unsigned long u64;

#define SYS_write 1
#define SYS_close 3
#define SYS_recvmsg 47
#define SYS_clone 56
#define SYS_setresuid 117
#define SYS_setresgid 119
#define SYS_prctl 157

#define EINTR 4
#define EMSGSIZE 90
#define SIGCHLD 17
#define SIGKILL 9
#define PR_SET_PDEATHSIG 1
#define SOL_SOCKET 1
#define SCM_RIGHTS 1
#define MSG_CTRUNC 0x8
#define MSG_TRUNC 0x20
#define MSG_CMSG_CLOEXEC 0x40000000

#include "rawsys.h"

#define MAX_FDS 16

struct request {
    unsigned seq;
    unsigned python; /* nonzero: Python prepares first (tools to load, masks to compile) */
    long flags;      /* clone flags (namespaces, CLONE_PARENT); SIGCHLD is added */
    int uid;         /* effective ids for the clone (the user namespace's owner), -1: keep */
    int gid;
};

struct answer {
    unsigned seq;
    int pid; /* or -errno */
};

struct iovec {
    void *base;
    u64 len;
};

struct msghdr {
    void *name;
    int namelen;
    struct iovec *iov;
    u64 iovlen;
    void *control;
    u64 controllen;
    int flags;
};

struct cmsghdr {
    u64 len;
    int level;
    int type;
};

static long answer(long sock, unsigned seq, long pid) {
    struct answer a = {seq, (int)pid};
    long r;
    do {
        r = sys4(SYS_write, sock, (long)&a, sizeof a, 0);
    } while (r == -EINTR);
    return r < 0 ? r : 0;
}

/* The clone, with the effective ids the request names (real and saved stay: the parent is
 * root again right after). Returns the pid, 0 in the child, or -errno. */
static long clone_one(const struct request *req) {
    long r;
    int switched = req->uid >= 0;
    if (switched) {
        r = sys4(SYS_setresgid, -1, req->gid, -1, 0);
        if (r < 0) return r;
        r = sys4(SYS_setresuid, -1, req->uid, -1, 0);
        if (r < 0) {
            sys4(SYS_setresgid, -1, 0, -1, 0);
            return r;
        }
    }
    long pid = sys4(SYS_clone, req->flags | SIGCHLD, 0, 0, 0);
    if (pid == 0) return 0;
    if (switched) {
        sys4(SYS_setresuid, -1, 0, -1, 0);
        sys4(SYS_setresgid, -1, 0, -1, 0);
        sys4(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0);
    }
    return pid;
}

/* Serve requests on ``sock``. ``got`` = {bytes, descriptors} of a request already in
 * ``buf``/``fds`` (handed back by Python after preparing it: cloned at once), or {0, 0}.
 * Returns 0 on EOF, 1 when a request needs Python first, 2 in a new child (its request in
 * ``buf``/``fds``/``got``), or the -errno of a failed receive or answer. */
__attribute__((visibility("default"))) long runtime_cloner_serve(long sock, unsigned char *buf,
                                                                 long size, int *fds,
                                                                 long *got) {
    for (;;) {
        long n = got[0];
        if (n <= 0) {
            union {
                struct cmsghdr h;
                unsigned char space[sizeof(struct cmsghdr) + MAX_FDS * sizeof(int)];
            } control;
            struct iovec iov = {buf, (u64)size};
            struct msghdr msg = {0, 0, &iov, 1, &control, sizeof control, 0};
            n = sys4(SYS_recvmsg, sock, (long)&msg, MSG_CMSG_CLOEXEC, 0);
            if (n == -EINTR) continue;
            if (n <= 0) return n;
            long nfds = 0;
            if (msg.controllen >= sizeof(struct cmsghdr) && control.h.level == SOL_SOCKET &&
                control.h.type == SCM_RIGHTS) {
                nfds = (long)((control.h.len - sizeof(struct cmsghdr)) / sizeof(int));
                int *in = (int *)(control.space + sizeof(struct cmsghdr));
                for (long i = 0; i < nfds && i < MAX_FDS; i++) fds[i] = in[i];
            }
            got[0] = n;
            got[1] = nfds;
            if ((msg.flags & (MSG_TRUNC | MSG_CTRUNC)) || n < (long)sizeof(struct request) ||
                nfds < 1) {
                for (long i = 0; i < nfds; i++) sys4(SYS_close, fds[i], 0, 0, 0);
                got[0] = got[1] = 0;
                if (n >= 4) {
                    long r = answer(sock, ((struct request *)buf)->seq, -EMSGSIZE);
                    if (r < 0) return r;
                }
                continue;
            }
            if (((struct request *)buf)->python) return 1;
        }
        const struct request *req = (const struct request *)buf;
        long pid = clone_one(req);
        if (pid == 0) return 2;
        for (long i = 0; i < got[1]; i++) sys4(SYS_close, fds[i], 0, 0, 0);
        got[0] = got[1] = 0;
        long r = answer(sock, req->seq, pid);
        if (r < 0) return r;
    }
}
