/* The kernel floor of the sandbox's isolation model: what one isolated 4 KiB read costs
 * when nothing but C runs (benchmarks/bench_floor.py builds and drives it).
 *
 *     floor N ROOT WORKSPACE   → N sandboxes one after another; prints each one's wall
 *                                time in µs, one per line; exit 0 only if every one read
 *                                the 4 KiB of WORKSPACE/f.txt and could not see the host
 *
 * Per sandbox, the same kernel work as an isolated call of runtime's read_file (DESIGN §3):
 * clone with new user and pid namespaces; uid/gid maps to the caller's own ids; unshare the
 * mount, network, IPC and UTS namespaces; a tmpfs root with the workspace bound read-only,
 * a private /tmp, a /dev of five device nodes, the system directories read-only, the pid
 * namespace's /proc; pivot_root and detach the old root; hostname; no_new_privs; rlimits;
 * Landlock (read the workspace only); a seccomp filter (native ABI only, ptrace denied);
 * then the read, sent to the parent over a pipe. No interpreter, no fork-server, no broker:
 * the gap between this and runtime's own figures is what runtime's design adds.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *root_dir, *workspace;
static unsigned outer_uid, outer_gid;
static int pipe_w;

static void die(const char *what) {
    dprintf(2, "floor: %s: %s\n", what, strerror(errno));
    _exit(2);
}

static void put(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, text, strlen(text)) < 0) die(path);
    close(fd);
}

static void under(char *buf, size_t size, const char *rel) {
    snprintf(buf, size, "%s/%s", root_dir, rel);
}

static void bind_ro(const char *src, const char *rel, unsigned long flags) {
    char dst[4096];
    under(dst, sizeof dst, rel);
    if (mount(src, dst, NULL, MS_BIND | MS_REC, NULL)) die(src);
    if (mount(NULL, dst, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | flags, NULL)) die(dst);
}

static void landlock(void) {
    struct landlock_ruleset_attr attr = {
        .handled_access_fs = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                             LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR |
                             LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
                             LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR |
                             LANDLOCK_ACCESS_FS_MAKE_REG | LANDLOCK_ACCESS_FS_MAKE_SOCK |
                             LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
                             LANDLOCK_ACCESS_FS_MAKE_SYM,
    };
    int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
    if (ruleset < 0) die("landlock_create_ruleset");
    struct landlock_path_beneath_attr rule = {
        .allowed_access = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR,
        .parent_fd = open("/workspace", O_PATH | O_CLOEXEC),
    };
    if (rule.parent_fd < 0) die("/workspace");
    if (syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0))
        die("landlock_add_rule");
    if (syscall(SYS_landlock_restrict_self, ruleset, 0)) die("landlock_restrict_self");
    close(rule.parent_fd);
    close(ruleset);
}

static void seccomp(void) {
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000, 0, 1), /* x32 */
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ptrace, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof code / sizeof code[0], .filter = code};
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) die("seccomp");
}

static char stack[1 << 16] __attribute__((aligned(16)));

static int sandbox(void *unused) {
    (void)unused;
    char buf[4096];
    /* user namespace: our own ids, nothing else */
    put("/proc/self/setgroups", "deny");
    snprintf(buf, sizeof buf, "0 %u 1", outer_uid);
    put("/proc/self/uid_map", buf);
    snprintf(buf, sizeof buf, "0 %u 1", outer_gid);
    put("/proc/self/gid_map", buf);
    /* the other namespaces */
    if (unshare(CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS)) die("unshare");
    /* a fresh root */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) die("private /");
    if (mount("tmpfs", root_dir, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m,mode=0755"))
        die("root tmpfs");
    static const char *dirs[] = {"workspace", "tmp", "dev", "proc", "old",
                                 "usr",       "bin", "lib", "lib64"};
    for (size_t i = 0; i < sizeof dirs / sizeof dirs[0]; i++) {
        under(buf, sizeof buf, dirs[i]);
        if (mkdir(buf, 0755)) die(buf);
    }
    bind_ro(workspace, "workspace", MS_NOSUID | MS_NODEV);
    under(buf, sizeof buf, "tmp");
    if (mount("tmpfs", buf, "tmpfs", MS_NOSUID | MS_NODEV, "size=1m")) die("/tmp");
    under(buf, sizeof buf, "dev");
    if (mount("tmpfs", buf, "tmpfs", MS_NOSUID, "size=64k,mode=0755")) die("/dev");
    static const char *devs[] = {"null", "zero", "full", "random", "urandom"};
    for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++) {
        char src[64], dst[4096];
        snprintf(src, sizeof src, "/dev/%s", devs[i]);
        snprintf(dst, sizeof dst, "%s/dev/%s", root_dir, devs[i]);
        int fd = open(dst, O_CREAT | O_WRONLY | O_CLOEXEC, 0666);
        if (fd < 0) die(dst);
        close(fd);
        if (mount(src, dst, NULL, MS_BIND, NULL)) die(src);
    }
    static const char *sys[] = {"usr", "bin", "lib", "lib64"};
    for (size_t i = 0; i < sizeof sys / sizeof sys[0]; i++) {
        char src[64];
        snprintf(src, sizeof src, "/%s", sys[i]);
        struct stat st;
        if (lstat(src, &st) == 0 && S_ISDIR(st.st_mode)) bind_ro(src, sys[i], MS_NODEV);
    }
    under(buf, sizeof buf, "proc");
    if (mount("proc", buf, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL)) die("/proc");
    /* pivot_root, old root detached */
    char old[4096];
    under(old, sizeof old, "old");
    if (syscall(SYS_pivot_root, root_dir, old)) die("pivot_root");
    if (chdir("/")) die("chdir");
    if (umount2("/old", MNT_DETACH)) die("umount old root");
    if (rmdir("/old")) die("rmdir old root");
    if (sethostname("sandbox", 7)) die("sethostname");
    /* the walls */
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) die("no_new_privs");
    static const int limits[][2] = {{RLIMIT_CORE, 0}, {RLIMIT_NOFILE, 64}, {RLIMIT_NPROC, 64}};
    for (size_t i = 0; i < sizeof limits / sizeof limits[0]; i++) {
        struct rlimit rl = {(rlim_t)limits[i][1], (rlim_t)limits[i][1]};
        if (setrlimit(limits[i][0], &rl)) die("setrlimit");
    }
    landlock();
    seccomp();
    /* the tool: read 4 KiB of the workspace; the host must be out of sight */
    if (open("/etc/passwd", O_RDONLY) >= 0 || open("/old", O_RDONLY) >= 0) {
        dprintf(2, "floor: the host is visible\n");
        _exit(3);
    }
    int fd = open("/workspace/f.txt", O_RDONLY | O_CLOEXEC);
    if (fd < 0) die("/workspace/f.txt");
    ssize_t n = read(fd, buf, sizeof buf);
    if (n != (ssize_t)sizeof buf) die("read");
    if (write(pipe_w, buf, (size_t)n) != n) die("write");
    _exit(0);
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        dprintf(2, "usage: floor N ROOT WORKSPACE\n");
        return 2;
    }
    long n = atol(argv[1]);
    root_dir = argv[2];
    workspace = argv[3];
    outer_uid = (unsigned)getuid();
    outer_gid = (unsigned)getgid();
    if (outer_uid == 0) {
        dprintf(2, "floor: refusing to run as root (a sandbox never maps host root)\n");
        return 2;
    }
    double *took = calloc((size_t)(n > 0 ? n : 1), sizeof *took);
    if (!took) die("calloc");
    for (long i = 0; i < n; i++) {
        double t0 = now_us();
        int p[2];
        if (pipe2(p, O_CLOEXEC)) die("pipe");
        pipe_w = p[1];
        pid_t pid = clone(sandbox, stack + sizeof stack, CLONE_NEWUSER | CLONE_NEWPID | SIGCHLD,
                          NULL);
        if (pid < 0) die("clone");
        close(p[1]);
        char buf[4096];
        size_t got = 0;
        ssize_t r;
        while ((r = read(p[0], buf + got, sizeof buf - got)) > 0) got += (size_t)r;
        close(p[0]);
        int status;
        if (waitpid(pid, &status, 0) < 0) die("waitpid");
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || got != sizeof buf) {
            dprintf(2, "floor: sandbox %ld failed (status %#x, %zu bytes)\n", i, status, got);
            return 1;
        }
        took[i] = now_us() - t0;
    }
    for (long i = 0; i < n; i++) printf("%.1f\n", took[i]);
    return 0;
}
