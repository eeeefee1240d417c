// Running a piece of a test in a forked child whose openat(2) refuses one kind of file creation
// (a seccomp filter), to reach the code paths of filesystems that lack it: no unnamed files
// (O_TMPFILE: vfat, NFS, older kernels), or no named temporaries where plumb should need none.
#pragma once

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <functional>

namespace plumb::test {

/// What the child's openat(2) refuses.
enum class Refuse {
  kUnnamedFiles,  ///< O_TMPFILE, with EOPNOTSUPP (as a filesystem without unnamed files answers)
  kExclusiveCreate,  ///< O_CREAT|O_EXCL (a named temporary or lock file), with EPERM
};

/// Runs `fn` in a forked child with that refusal installed; true when `fn` returned true there.
/// False when it returned false, died, or the filter could not be installed (x86-64 only).
/// Check the outcome in the parent (files, contents): doctest assertions in the child are lost.
inline bool in_child_refusing(Refuse what, const std::function<bool()>& fn) {
  pid_t pid = ::fork();
  if (pid < 0) return false;
  if (pid == 0) {
    // args[2] (flags), its low 32 bits: the first word of the 64-bit argument on little-endian.
    const uint32_t bits = what == Refuse::kUnnamedFiles ? (O_TMPFILE & ~O_DIRECTORY) : (O_CREAT | O_EXCL);
    const uint32_t ret = SECCOMP_RET_ERRNO | (what == Refuse::kUnnamedFiles ? EOPNOTSUPP : EPERM);
    sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_openat, 0, 4),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[2])),
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, bits),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, bits, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, ret),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(2);
    if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) ::_exit(2);
    ::_exit(fn() ? 0 : 1);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace plumb::test
