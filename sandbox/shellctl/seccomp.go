package main

// The seccomp layer: a deny list on top of dropped capabilities, so a kernel bug reachable through
// one of these calls is not reachable from a command. Assembled by go-seccomp-bpf (names, argument
// conditions); the few instructions it cannot express are written here with golang.org/x/net/bpf.

import (
	"fmt"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Refused outright (EPERM): kernel-wide state, other address spaces, namespaces, mounts, and the
// interfaces that historically carried most privilege-escalation bugs. ptrace is refused entirely
// (also within the sandbox): debuggers and strace do not work inside.
var deniedSyscalls = []string{
	"bpf", "perf_event_open", "userfaultfd",
	"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
	"mount", "umount2", "pivot_root", "chroot", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
	"open_tree", "open_tree_attr", "mount_setattr", "setns",
	"ptrace", "process_vm_readv", "process_vm_writev",
	"keyctl", "add_key", "request_key",
	// io_uring runs socket/open operations in kernel workers, beside this filter.
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "syslog", "uselib", "vhangup",
	"name_to_handle_at", "open_by_handle_at", "lookup_dcookie", "iopl", "ioperm", "fanotify_init",
}

const (
	sIFCHRBit = 0o020000 // set in S_IFCHR and S_IFBLK (and the invalid S_IFLNK), clear for FIFOs and files
	// Every CLONE_NEW* flag: a command makes no namespaces (a user namespace would hand it capabilities).
	cloneNewFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC |
		unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET
)

func seccompPolicy() (*seccomp.Policy, *arch.Info, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return nil, nil, err
	}
	var names []string
	for _, n := range deniedSyscalls {
		if _, ok := info.SyscallNames[n]; ok { // not every architecture has every call
			names = append(names, n)
		}
	}
	notIn := func(arg uint32, values ...uint64) seccomp.ArgumentConditions {
		var c seccomp.ArgumentConditions
		for _, v := range values {
			c = append(c, seccomp.Condition{Argument: arg, Operation: seccomp.NotEqual, Value: v})
		}
		return c
	}
	bits := func(arg uint32, v uint64) seccomp.ArgumentConditions {
		return seccomp.ArgumentConditions{{Argument: arg, Operation: seccomp.BitsSet, Value: v}}
	}
	withArgs := []seccomp.NameWithConditions{
		// Only AF_UNIX, AF_INET, AF_INET6: no packet, raw-netlink, vsock, bluetooth, … sockets.
		{Name: "socket", Conditions: notIn(0, unix.AF_UNIX, unix.AF_INET, unix.AF_INET6)},
		{Name: "socketpair", Conditions: notIn(0, unix.AF_UNIX)},
		{Name: "mknod", Conditions: bits(1, sIFCHRBit)},
		{Name: "mknodat", Conditions: bits(2, sIFCHRBit)},
		{Name: "unshare", Conditions: bits(0, cloneNewFlags|unix.CLONE_NEWTIME)},
		// clone's flags are argument 0 on x86_64 and arm64 (the architectures this is built for).
		{Name: "clone", Conditions: bits(0, cloneNewFlags)},
		// FALLOC_FL_KEEP_SIZE allocates blocks past the end without growing the file, i.e. without
		// RLIMIT_FSIZE: one call could fill the disk before the quota watch sees it (plain
		// fallocate/posix_fallocate grow the size and stay bounded). Hole punching needs the bit too.
		{Name: "fallocate", Conditions: bits(1, unix.FALLOC_FL_KEEP_SIZE)},
	}
	p := &seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{Action: seccomp.ActionErrno, Names: names},
			{Action: seccomp.ActionErrno, NamesWithCondtions: presentOnly(info, withArgs)},
		},
	}
	return p, info, nil
}

func presentOnly(info *arch.Info, in []seccomp.NameWithConditions) []seccomp.NameWithConditions {
	var out []seccomp.NameWithConditions
	for _, w := range in {
		if _, ok := info.SyscallNames[w.Name]; ok {
			out = append(out, w)
		}
	}
	return out
}

// seccompProgram is the library's program behind a hand-written prefix, for two things the library
// cannot say: (1) any other architecture (i386 via int 0x80 on x86_64) is refused — the library lets
// a foreign arch fall through to the default action, which here is allow; (2) clone3 returns ENOSYS,
// not EPERM: its flags sit in memory where BPF cannot look, and ENOSYS makes glibc fall back to
// clone(2), whose flags the policy checks.
func seccompProgram() ([]unix.SockFilter, error) {
	p, info, err := seccompPolicy()
	if err != nil {
		return nil, err
	}
	body, err := p.Assemble()
	if err != nil {
		return nil, err
	}
	const archOffset, nrOffset = 4, 0 // struct seccomp_data: nr, arch, ...
	errno := func(e unix.Errno) bpf.RetConstant {
		return bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(e)}
	}
	prefix := []bpf.Instruction{
		bpf.LoadAbsolute{Off: archOffset, Size: 4},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		errno(unix.ENOSYS),
	}
	if nr, ok := info.SyscallNames["clone3"]; ok {
		prefix = append(prefix,
			bpf.LoadAbsolute{Off: nrOffset, Size: 4},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: uint32(nr), SkipTrue: 1},
			errno(unix.ENOSYS),
		)
	}
	raw, err := bpf.Assemble(append(prefix, body...))
	if err != nil {
		return nil, err
	}
	out := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		out[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	return out, nil
}

// loadSeccomp installs the filter on the calling thread (the one that execs; no_new_privs is set).
func loadSeccomp() error {
	prog, err := seccompProgram()
	if err != nil {
		return fmt.Errorf("assemble: %w", err)
	}
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if _, _, e := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog))); e != 0 {
		return fmt.Errorf("seccomp(SECCOMP_SET_MODE_FILTER): %w", e)
	}
	return nil
}

func seccompSupported() bool {
	if !seccomp.Supported() {
		return false
	}
	_, err := seccompProgram()
	return err == nil
}
