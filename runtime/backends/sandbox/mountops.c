/* The call's new root as one list of mount operations, run in C (bubblewrap's
 * setup_newroot model: records of (op, source, destination, flags)); and, with the same
 * runner, the tool's walls before seccomp (no_new_privs, capabilities, rlimits, Landlock:
 * codes 13-18) and the call's identity (ids, maps, namespaces, session: codes 13, 19-24),
 * both compiled by walls.py.
 *
 * newroot.py compiles the list once per profile (the cloner does, every call inherits it)
 * and the call's pid 1 runs it here. Why C: in a fresh copy of the fork-server, each Python
 * function run for the first time costs the page faults of its code, function and globals
 * (reference counts are writes), and a phase cost what distinct Python it ran rather than
 * its system calls (~1.9 ms of set-up for ~0.6 ms of kernel work). This loop touches the
 * list (read only) and its own stack.
 *
 * It stops at the first failing operation and returns its -errno, with the operation's
 * index in *failed: newroot.py turns that into the set-up error naming the phase.
 *
 * Record: struct op (16 bytes), then four NUL-terminated strings a, b, c, d (empty = none
 * where a system call takes NULL), padded to 8 bytes. Descriptors (the workspace tree, the
 * interpreter's trees) are not in the list: ``slot`` indexes the array passed at run time.
 *
 * Freestanding x86_64 Linux shared object: no libc, raw system calls.
 */

typedef unsigned long u64;

#include "rawsys.h"

#define SYS_write 1
#define SYS_close 3
#define SYS_setsid 112
#define SYS_setresuid 117
#define SYS_setresgid 119
#define SYS_setgroups 116
#define SYS_unshare 272
#define SYS_fstat 5
#define SYS_chdir 80
#define SYS_capset 126
#define SYS_prctl 157
#define SYS_prlimit64 302
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#define SYS_pivot_root 155
#define SYS_mount 165
#define SYS_umount2 166
#define SYS_openat 257
#define SYS_mkdirat 258
#define SYS_symlinkat 266
#define SYS_open_tree 428
#define SYS_move_mount 429
#define SYS_close_range 436
#define SYS_mount_setattr 442
#define SYS_openat2 437

#define AT_FDCWD -100
#define AT_EMPTY_PATH 0x1000
#define O_WRONLY 01
#define O_CREAT 0100
#define O_TRUNC 01000
#define O_DIRECTORY 0200000
#define O_NOFOLLOW 0400000
#define O_CLOEXEC 02000000
#define O_PATH 010000000
#define OPEN_TREE_CLONE 1
#define OPEN_TREE_CLOEXEC O_CLOEXEC
#define MOVE_MOUNT_F_EMPTY_PATH 4
#define MOVE_MOUNT_T_EMPTY_PATH 0x40
#define MOUNT_ATTR_RDONLY 1
#define S_IFMT 0170000
#define S_IFDIR 0040000
#define S_IFREG 0100000
#define RESOLVE_NO_XDEV 0x01
#define RESOLVE_NO_MAGICLINKS 0x02
#define RESOLVE_NO_SYMLINKS 0x04
#define RESOLVE_BENEATH 0x08
#define ENOENT 2
#define EEXIST 17
#define ENOTDIR 20
#define ELOOP 40
#define EINVAL 22
#define CAP_VERSION_3 0x20080522
#define LANDLOCK_RULE_PATH_BENEATH 1
/* The rights Landlock accepts on a file (not a directory): execute, write, read, truncate,
 * ioctl on a device. Directory-only rights on a file are EINVAL. */
#define LANDLOCK_FILE_RIGHTS ((1UL << 0) | (1UL << 1) | (1UL << 2) | (1UL << 14) | (1UL << 15))
#define RULE_DIR_ONLY 1 /* OP_LL_RULE: skip a path that is not a directory (or absent) */
#define RULE_NOFOLLOW 2 /* OP_LL_RULE: do not follow a final symlink (with 1: skip it) */
/* OP_LL_RULE: a path with no symlink anywhere in it (openat2 RESOLVE_NO_SYMLINKS), a directory
 * or a regular file; else skipped (nothing granted). What the workspace's owner controls. */
#define RULE_STRICT 4

/* Keep in step with newroot.py's _OP_* codes. */
enum {
    OP_MOUNT = 1,      /* mount(a or NULL, b, c or NULL, flags, d or NULL) */
    OP_MKDIR = 2,      /* mkdir(a, arg); EEXIST is fine when flags & 1 */
    OP_TOUCH = 3,      /* an empty file at a, mode arg */
    OP_SYMLINK = 4,    /* symlink(a, b) */
    OP_BIND = 5,       /* a bound at b with mount attributes flags; none at a is fine if arg */
    OP_MOVE_TREE = 6,  /* the detached tree in slot arg at b (its mount point made: a
                          directory, or an empty file in one), attributes flags first */
    OP_MOUNT_DIR = 7,  /* OP_MOUNT if b is a directory (not a symlink); else nothing */
    OP_WRITE = 8,      /* a file a holding d */
    OP_CHDIR = 9,      /* chdir(a) */
    OP_PIVOT = 10,     /* pivot_root(a, b) */
    OP_UMOUNT = 11,    /* umount2(a, flags) */
    OP_SETATTR = 12,   /* mount attributes flags on the mount at a */
    /* The walls (walls.py). What an attacker controls here: nothing in the list (the
     * policy's profile, compiled by the cloner); only what is at the rule paths inside the
     * call's new root, where the workspace's owner may have put symlinks: a path rule
     * follows them only as walls.py says, and the kernel checks every right anyway. */
    OP_PRCTL = 13,       /* prctl(arg, flags, 0, 0, 0) */
    OP_CAPSET_ZERO = 14, /* every capability set emptied (capset, version 3) */
    OP_RLIMIT = 15,      /* resource arg & 0xffff: soft flags, hard flags + (arg >> 16) */
    OP_LL_RULESET = 16,  /* a Landlock ruleset handling fs rights flags, net rights
                            (arg >> 8) & 0xff and scopes (arg >> 16) & 0xff; the attr's
                            size arg & 0xff (8, 16 or 24: what the ABI knows) */
    OP_LL_RULE = 17,     /* rights flags beneath path a in that ruleset (RULE_* in arg) */
    OP_LL_RESTRICT = 18, /* landlock_restrict_self with that ruleset, which is closed */
    /* The identity (walls.identity_ops), first thing in the call's pid 1. Raw system calls
     * act on the calling thread only (glibc's set*id would signal every thread): the call
     * has one thread, the fork-server never starts any. */
    OP_WRITE_FILE = 19,  /* an existing file a (never made) written d: /proc, cgroup.procs */
    OP_SETRESGID = 20,   /* real, effective and saved gid all arg */
    OP_SETRESUID = 21,   /* real, effective and saved uid all arg */
    OP_SETGROUPS_NONE = 22, /* no supplementary groups */
    OP_UNSHARE = 23,     /* unshare(flags) */
    OP_SETSID = 24,      /* a new session and process group */
    OP_SET_NAME = 25,    /* the process's name (comm) a */
    OP_CLOSE_REST = 26,  /* every descriptor from 3 up closed but the slots' */
    /* The new root again (a narrowed writable call's write prefixes, newroot.py). What an
     * attacker controls: what lies at b inside the workspace (its owner, or an earlier call
     * that could write there), so b is resolved never above a, through no symlink and across
     * no mount; a directory or a regular file found so is bound onto itself with attributes
     * flags, read-only cleared. Anything else there (absent, a link on the way, a device)
     * is left as it is: nothing granted, as RULE_STRICT. */
    OP_BIND_BENEATH = 27,
};

struct op {
    unsigned short code;
    unsigned short phase;
    unsigned arg;
    u64 flags;
};

struct mount_attr {
    u64 attr_set, attr_clr, propagation, userns_fd;
};

static long sys5(long n, long a, long b, long c, long d, long e) {
    long r;
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
                     : "rcx", "r11", "memory");
    return r;
}

static long slen(const char *s) {
    long n = 0;
    while (s[n]) n++;
    return n;
}

static const char *opt(const char *s) { return *s ? s : 0; }

static long setattr_fd(long fd, u64 attrs) {
    struct mount_attr attr = {attrs, 0, 0, 0};
    return sys5(SYS_mount_setattr, fd, (long)"", AT_EMPTY_PATH, (long)&attr, sizeof attr);
}

static long bind_beneath(const char *dir, const char *rel, u64 attrs) {
    long dfd = sys4(SYS_openat, AT_FDCWD, (long)dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
                    0);
    if (dfd < 0) return dfd;
    /* struct open_how: flags, mode, resolve. */
    u64 how[3] = {O_PATH | O_CLOEXEC | O_NOFOLLOW, 0,
                  RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
    long fd = sys4(SYS_openat2, dfd, (long)rel, (long)how, sizeof how);
    sys4(SYS_close, dfd, 0, 0, 0);
    if (fd < 0) return 0; /* absent, or a link or a mount on the way: nothing granted */
    u64 st[18];
    long r = sys4(SYS_fstat, fd, (long)st, 0, 0);
    unsigned mode = r == 0 ? (unsigned)(st[3] & 0xffffffffUL) & S_IFMT : 0;
    if (mode == S_IFDIR || mode == S_IFREG) {
        long flags = OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH;
        long tree = sys4(SYS_open_tree, fd, (long)"", flags, 0);
        r = tree;
        if (tree >= 0) {
            /* Writable again: the workspace under it was mounted read-only. */
            struct mount_attr attr = {attrs, MOUNT_ATTR_RDONLY, 0, 0};
            r = sys5(SYS_mount_setattr, tree, (long)"", AT_EMPTY_PATH, (long)&attr, sizeof attr);
            if (r == 0)
                r = sys5(SYS_move_mount, tree, (long)"", fd, (long)"",
                         MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
            sys4(SYS_close, tree, 0, 0, 0);
        }
    }
    sys4(SYS_close, fd, 0, 0, 0);
    return r;
}

static long move_fd(long fd, const char *dst) {
    return sys5(SYS_move_mount, fd, (long)"", AT_FDCWD, (long)dst, MOVE_MOUNT_F_EMPTY_PATH);
}

static long touch(const char *path, long mode) {
    long fd = sys4(SYS_openat, AT_FDCWD, (long)path, O_CREAT | O_WRONLY | O_CLOEXEC, mode);
    if (fd < 0) return fd;
    sys4(SYS_close, fd, 0, 0, 0);
    return 0;
}

/* mkdir -p of path up to (not including) byte ``end`` (0: the whole path), mode 0755. */
static long mkdir_p(const char *path, long end) {
    char buf[4096];
    long n = end ? end : slen(path);
    if (n <= 0 || n >= (long)sizeof buf) return -EINVAL;
    for (long i = 0; i < n; i++) buf[i] = path[i];
    buf[n] = 0;
    for (long i = 1; i <= n; i++) {
        if (i < n && buf[i] != '/') continue;
        char saved = buf[i];
        buf[i] = 0;
        long r = sys4(SYS_mkdirat, AT_FDCWD, (long)buf, 0755, 0);
        buf[i] = saved;
        if (r < 0 && r != -EEXIST) return r;
    }
    return 0;
}

static long bind(const char *src, const char *dst, u64 attrs, unsigned missing_ok) {
    long fd = sys4(SYS_open_tree, AT_FDCWD, (long)src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC, 0);
    if (fd < 0) return (missing_ok && fd == -ENOENT) ? 0 : fd;
    long r = attrs ? setattr_fd(fd, attrs) : 0;
    if (r == 0) r = move_fd(fd, dst);
    sys4(SYS_close, fd, 0, 0, 0);
    return r;
}

static long move_tree(long fd, const char *dst, u64 attrs) {
    /* struct stat on x86_64: st_mode is the 32 bits at byte 24. */
    u64 st[18];
    long r = sys4(SYS_fstat, fd, (long)st, 0, 0);
    if (r < 0) return r;
    unsigned mode = (unsigned)(st[3] & 0xffffffffUL);
    if ((mode & S_IFMT) == S_IFDIR) {
        r = mkdir_p(dst, 0);
    } else {
        long slash = slen(dst);
        while (slash > 0 && dst[slash] != '/') slash--;
        r = mkdir_p(dst, slash);
        if (r == 0) r = touch(dst, 0644);
    }
    if (r == 0 && attrs) r = setattr_fd(fd, attrs);
    if (r == 0) r = move_fd(fd, dst);
    return r;
}

struct rlimit64 {
    u64 cur, max;
};

/* One path rule: the inode opened once (O_PATH) and its type read from that descriptor, so
 * no second look-up can name something else; a file gets only the file rights. */
static long ll_rule(long ruleset, const char *path, u64 rights, unsigned how) {
    long fd;
    if (how & RULE_STRICT) {
        /* struct open_how: flags, mode, resolve. */
        u64 open_how[3] = {O_PATH | O_CLOEXEC | O_NOFOLLOW, 0,
                           RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
        fd = sys4(SYS_openat2, AT_FDCWD, (long)path, (long)open_how, sizeof open_how);
        if (fd < 0) return 0; /* absent, or a symlink on the way: nothing granted */
    } else {
        long flags = O_PATH | O_CLOEXEC | ((how & RULE_NOFOLLOW) ? O_NOFOLLOW : 0);
        fd = sys4(SYS_openat, AT_FDCWD, (long)path, flags, 0);
        if (fd < 0) return (how & RULE_DIR_ONLY) ? 0 : fd; /* as os.path.isdir: any error */
    }
    u64 st[18];
    long r = sys4(SYS_fstat, fd, (long)st, 0, 0);
    if (r == 0) {
        unsigned mode = (unsigned)(st[3] & 0xffffffffUL);
        if ((mode & S_IFMT) != S_IFDIR) {
            if ((how & RULE_DIR_ONLY) || ((how & RULE_STRICT) && (mode & S_IFMT) != S_IFREG)) {
                sys4(SYS_close, fd, 0, 0, 0);
                return 0;
            }
            rights &= LANDLOCK_FILE_RIGHTS;
        }
        /* struct landlock_path_beneath_attr is packed: u64 rights, s32 parent_fd. */
        unsigned char attr[12];
        for (int i = 0; i < 8; i++) attr[i] = (unsigned char)(rights >> (8 * i));
        for (int i = 0; i < 4; i++) attr[8 + i] = (unsigned char)((unsigned long)fd >> (8 * i));
        r = sys4(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, (long)attr, 0);
    }
    sys4(SYS_close, fd, 0, 0, 0);
    return r;
}

/* close_range around the kept descriptors (any order; negative ones are no descriptor). */
static long close_rest(const int *keep, long nkeep) {
    unsigned long low = 3;
    for (;;) {
        unsigned long next = ~0UL;
        for (long i = 0; i < nkeep; i++)
            if (keep[i] >= 0 && (unsigned long)keep[i] >= low && (unsigned long)keep[i] < next)
                next = (unsigned long)keep[i];
        if (next == ~0UL) return sys4(SYS_close_range, low, ~0U, 0, 0);
        if (next > low) {
            long r = sys4(SYS_close_range, low, next - 1, 0, 0);
            if (r < 0) return r;
        }
        low = next + 1;
    }
}

static long one(const struct op *op, const char *a, const char *b, const char *c,
                const char *d, const int *slots, long nslots, long *ruleset) {
    long r, fd;
    switch (op->code) {
    case OP_MOUNT:
        return sys5(SYS_mount, (long)opt(a), (long)b, (long)opt(c), (long)op->flags, (long)opt(d));
    case OP_MKDIR:
        r = sys4(SYS_mkdirat, AT_FDCWD, (long)a, op->arg, 0);
        return (r == -EEXIST && (op->flags & 1)) ? 0 : r;
    case OP_TOUCH:
        return touch(a, op->arg);
    case OP_SYMLINK:
        return sys4(SYS_symlinkat, (long)a, AT_FDCWD, (long)b, 0);
    case OP_BIND:
        return bind(a, b, op->flags, op->arg);
    case OP_MOVE_TREE:
        if ((long)op->arg >= nslots || slots[op->arg] < 0) return -EINVAL;
        return move_tree(slots[op->arg], b, op->flags);
    case OP_MOUNT_DIR:
        /* Not through a symlink: the workspace's owner controls what is at b. */
        fd = sys4(SYS_openat, AT_FDCWD, (long)b, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
        if (fd == -ENOENT || fd == -ENOTDIR || fd == -ELOOP) return 0;
        if (fd < 0) return fd;
        sys4(SYS_close, fd, 0, 0, 0);
        return sys5(SYS_mount, (long)opt(a), (long)b, (long)opt(c), (long)op->flags, (long)opt(d));
    case OP_WRITE:
    case OP_WRITE_FILE: {
        long how = op->code == OP_WRITE ? O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC
                                        : O_WRONLY | O_CLOEXEC;
        fd = sys4(SYS_openat, AT_FDCWD, (long)a, how, 0644);
        if (fd < 0) return fd;
        long left = slen(d);
        r = 0;
        while (left > 0) {
            r = sys4(SYS_write, fd, (long)d, left, 0);
            if (r < 0) break;
            d += r;
            left -= r;
            r = 0;
        }
        sys4(SYS_close, fd, 0, 0, 0);
        return r;
    }
    case OP_CHDIR:
        return sys4(SYS_chdir, (long)a, 0, 0, 0);
    case OP_PIVOT:
        return sys4(SYS_pivot_root, (long)a, (long)b, 0, 0);
    case OP_UMOUNT:
        return sys4(SYS_umount2, (long)a, (long)op->flags, 0, 0);
    case OP_SETATTR:
        fd = sys4(SYS_openat, AT_FDCWD, (long)a, O_PATH | O_CLOEXEC, 0);
        if (fd < 0) return fd;
        r = setattr_fd(fd, op->flags);
        sys4(SYS_close, fd, 0, 0, 0);
        return r;
    case OP_PRCTL:
        return sys5(SYS_prctl, op->arg, (long)op->flags, 0, 0, 0);
    case OP_CAPSET_ZERO: {
        unsigned header[2] = {CAP_VERSION_3, 0}; /* pid 0: this thread */
        unsigned data[6] = {0, 0, 0, 0, 0, 0};  /* two of (effective, permitted, inheritable) */
        return sys4(SYS_capset, (long)header, (long)data, 0, 0);
    }
    case OP_RLIMIT: {
        struct rlimit64 lim = {op->flags, op->flags + (op->arg >> 16)};
        return sys4(SYS_prlimit64, 0, op->arg & 0xffff, (long)&lim, 0);
    }
    case OP_LL_RULESET: {
        u64 attr[3] = {op->flags, (op->arg >> 8) & 0xff, (op->arg >> 16) & 0xff};
        long size = op->arg & 0xff;
        if (*ruleset >= 0 || (size != 8 && size != 16 && size != 24)) return -EINVAL;
        r = sys4(SYS_landlock_create_ruleset, (long)attr, size, 0, 0);
        if (r < 0) return r;
        *ruleset = r;
        return 0;
    }
    case OP_LL_RULE:
        if (*ruleset < 0) return -EINVAL;
        return ll_rule(*ruleset, a, op->flags, op->arg);
    case OP_LL_RESTRICT:
        if (*ruleset < 0) return -EINVAL;
        r = sys4(SYS_landlock_restrict_self, *ruleset, 0, 0, 0);
        sys4(SYS_close, *ruleset, 0, 0, 0);
        *ruleset = -1;
        return r;
    case OP_SETRESGID:
        return sys4(SYS_setresgid, op->arg, op->arg, op->arg, 0);
    case OP_SETRESUID:
        return sys4(SYS_setresuid, op->arg, op->arg, op->arg, 0);
    case OP_SETGROUPS_NONE:
        return sys4(SYS_setgroups, 0, 0, 0, 0);
    case OP_UNSHARE:
        return sys4(SYS_unshare, (long)op->flags, 0, 0, 0);
    case OP_SETSID:
        return sys4(SYS_setsid, 0, 0, 0, 0);
    case OP_SET_NAME:
        return sys5(SYS_prctl, 15, (long)a, 0, 0, 0); /* PR_SET_NAME: 15 bytes kept */
    case OP_CLOSE_REST:
        return close_rest(slots, nslots);
    case OP_BIND_BENEATH:
        return bind_beneath(a, b, op->flags);
    default:
        return -EINVAL;
    }
}

/* Run the list; 0, or the -errno of the first failing operation (its index in *failed). */
__attribute__((visibility("default"))) long runtime_mount_ops(const unsigned char *ops, long len,
                                                              const int *slots, long nslots,
                                                              long *failed) {
    long pos = 0, index = 0, ruleset = -1, r = 0;
    while (pos < len && r == 0) {
        *failed = index;
        r = -EINVAL;
        if (len - pos < (long)sizeof(struct op)) break;
        const struct op *op = (const struct op *)(ops + pos);
        const char *s[4];
        long at = pos + (long)sizeof(struct op);
        int whole = 1;
        for (int i = 0; i < 4 && whole; i++) {
            s[i] = (const char *)ops + at;
            while (at < len && ops[at]) at++;
            whole = at < len; /* every string ends inside the list */
            at++;
        }
        if (!whole) break;
        r = one(op, s[0], s[1], s[2], s[3], slots, nslots, &ruleset);
        if (r >= 0) r = 0;
        pos = (at + 7) & ~7L;
        index++;
    }
    /* A list that failed (or ended) between its ruleset and the restriction. */
    if (ruleset >= 0) sys4(SYS_close, ruleset, 0, 0, 0);
    return r;
}
