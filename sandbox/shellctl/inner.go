package main

// The inner stage: started by the supervisor in fresh namespaces (mount, PID, IPC, UTS, network and,
// where the host requires it, user), it builds the command's root, drops everything and execs.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// System directories shown read-only (symlinks, as on merged-/usr systems, are recreated as such).
var systemDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt"}

// Files of /etc the sandbox never sees: password hashes, host keys, sudo rules, private keys.
var etcDenied = map[string]bool{
	"shadow": true, "shadow-": true, "gshadow": true, "gshadow-": true, "ssh": true,
	"sudoers": true, "sudoers.d": true, "ssl": true, "security": true, "credstore": true, "credstore.encrypted": true,
}

var devNodes = []string{"null", "zero", "full", "random", "urandom", "tty"}

const (
	sandboxHostname = "sandbox"
	tmpSize         = "64m" // the command's /tmp and /dev/shm (memory, charged to its cgroup)
)

func inner(args []string) {
	runtime.LockOSThread() // never unlocked: the restricted thread is the one that execs
	errPipe := os.NewFile(3, "setup-errors")
	syscall.CloseOnExec(3)
	die := func(format string, a ...any) {
		fmt.Fprintf(errPipe, format, a...)
		os.Exit(exitSandbox)
	}
	if len(args) != 1 {
		die("internal: bad inner invocation")
	}
	var sp spec
	if err := json.Unmarshal([]byte(args[0]), &sp); err != nil {
		die("internal: bad spec: %v", err)
	}
	// Join the command's cgroups first, so everything below is counted (fd 4.. from the supervisor).
	for i := 0; i < sp.CgroupFDs; i++ {
		f := os.NewFile(uintptr(4+i), "cgroup.procs")
		if _, err := f.Write([]byte("0")); err != nil {
			die("sandbox setup failed, the command was not run: joining the cgroup: %v", err)
		}
		f.Close()
	}
	if sp.Isolation {
		if err := buildRoot(sp); err != nil {
			die("sandbox setup failed, the command was not run: %v", err)
		}
		if err := unix.Sethostname([]byte(sandboxHostname)); err != nil {
			die("sandbox setup failed, the command was not run: sethostname: %v", err)
		}
	}
	for _, rl := range sp.Rlimits {
		v := rl.Value
		var cur unix.Rlimit
		if unix.Getrlimit(rl.Resource, &cur) == nil && cur.Max < v {
			v = cur.Max // raising the hard limit needs CAP_SYS_RESOURCE; lower is what counts
		}
		hard := v
		if rl.Hard > v && rl.Hard <= cur.Max {
			hard = rl.Hard
		}
		if err := unix.Setrlimit(rl.Resource, &unix.Rlimit{Cur: v, Max: hard}); err != nil {
			die("sandbox setup failed, the command was not run: setrlimit(%d): %v", rl.Resource, err)
		}
	}
	if sp.Isolation {
		if err := dropPrivileges(sp); err != nil {
			die("sandbox setup failed, the command was not run: %v", err)
		}
		if err := applyLandlock(sp); err != nil {
			die("Landlock setup failed, the command was not run: %v", err)
		}
		if sp.Seccomp {
			if err := loadSeccomp(); err != nil {
				die("sandbox setup failed, the command was not run: %v", err)
			}
		}
		if err := verifyNoCapabilities(); err != nil {
			die("sandbox setup failed, the command was not run: %v", err)
		}
	}
	if err := os.Chdir(sp.Workspace); err != nil {
		die("cannot enter the workspace: %v", err)
	}
	path := sp.Command[0]
	if !strings.Contains(path, "/") {
		found := ""
		for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
			candidate := filepath.Join(dir, path)
			if st, err := os.Stat(candidate); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
				found = candidate
				break
			}
		}
		if found == "" {
			die("command not found: %s", path)
		}
		path = found
	}
	err := syscall.Exec(path, sp.Command, os.Environ())
	die("cannot run %s: %v", path, err)
}

// ---- the command's root ----------------------------------------------------------------------

// mountOp is one entry of the new root, applied parents first.
type mountOp struct {
	dst string
	do  func(dst string) error
}

// buildRoot makes the command's file system view, the way bubblewrap does: a tmpfs becomes the root
// with the old one at /oldroot, the new root is assembled on a second tmpfs from /oldroot sources
// (so sources under /tmp stay reachable), then made the root, and the old root is detached.
func buildRoot(sp spec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	// Sources resolved while the host root is still "/": an absolute symlink in a path (/var/run ->
	// /run) would resolve against the wrong root under /oldroot. The sandbox sees the given path.
	source := map[string]string{}
	resolve := func(kind, p string) error {
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			return fmt.Errorf("%s %s: %w", kind, p, err)
		}
		source[p] = r
		return nil
	}
	if err := resolve("workspace", sp.Workspace); err != nil {
		return err
	}
	for _, p := range sp.ReadOnly {
		if err := resolve("read-only path", p); err != nil {
			return err
		}
	}
	for _, s := range sp.Sockets {
		if err := resolve("socket", s.Host); err != nil {
			return err
		}
	}
	base := ""
	for _, d := range []string{"/tmp", "/mnt", "/var/tmp", "/run"} {
		if st, err := os.Lstat(d); err == nil && st.IsDir() {
			base = d
			break
		}
	}
	if base == "" {
		return errors.New("no directory to build the sandbox root on (/tmp, /mnt, /var/tmp, /run)")
	}
	if err := unix.Mount("tmpfs", base, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return fmt.Errorf("mount the base tmpfs: %w", err)
	}
	for _, d := range []string{"oldroot", "newroot"} {
		if err := os.Mkdir(filepath.Join(base, d), 0o755); err != nil {
			return err
		}
	}
	if err := unix.Mount("tmpfs", filepath.Join(base, "newroot"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=16m"); err != nil {
		return fmt.Errorf("mount the root tmpfs: %w", err)
	}
	if err := unix.PivotRoot(base, filepath.Join(base, "oldroot")); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	const old, nr = "/oldroot", "/newroot"

	var ops []mountOp
	add := func(dst string, do func(string) error) { ops = append(ops, mountOp{dst, do}) }
	for _, d := range systemDirs {
		st, err := os.Lstat(old + d)
		if err != nil {
			continue
		}
		src := old + d
		if st.Mode()&os.ModeSymlink != 0 {
			add(d, func(dst string) error { return copySymlink(src, dst) })
		} else if st.IsDir() {
			add(d, func(dst string) error { return bindMount(src, dst, true, true) })
		}
	}
	add("/etc", func(dst string) error { return os.Mkdir(dst, 0o755) })
	entries, err := os.ReadDir(old + "/etc")
	if err != nil {
		return fmt.Errorf("read /etc: %w", err)
	}
	for _, e := range entries {
		if etcDenied[e.Name()] {
			continue
		}
		if (e.Name() == "passwd" || e.Name() == "group") && e.Type().IsRegular() {
			name := e.Name()
			add("/etc/"+name, func(dst string) error { return writeIDFile(old+"/etc/"+name, dst, name, sp) })
			continue
		}
		addEntry(&ops, old, "/etc/"+e.Name())
	}
	// /etc/ssl minus private/: CA certificates and the OpenSSL config (node reads it at start).
	if st, err := os.Stat(old + "/etc/ssl"); err == nil && st.IsDir() {
		add("/etc/ssl", func(dst string) error { return os.Mkdir(dst, 0o755) })
		addEntry(&ops, old, "/etc/ssl/certs")
		addEntry(&ops, old, "/etc/ssl/openssl.cnf")
	}
	add("/proc", func(dst string) error {
		if err := os.Mkdir(dst, 0o555); err != nil {
			return err
		}
		return unix.Mount("proc", dst, "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	})
	add("/dev", func(dst string) error { return mountTmpfs(dst, "mode=0755,size=64k", unix.MS_NOEXEC) })
	for _, n := range devNodes {
		src := old + "/dev/" + n
		add("/dev/"+n, func(dst string) error {
			if _, err := os.Stat(src); err != nil {
				return nil // e.g. no /dev/tty on the host
			}
			return bindMount(src, dst, false, false)
		})
	}
	for name, target := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		add("/dev/"+name, func(dst string) error { return os.Symlink(target, dst) })
	}
	add("/dev/shm", func(dst string) error { return mountTmpfs(dst, "mode=1777,size="+tmpSize, unix.MS_NOEXEC) })
	add("/tmp", func(dst string) error { return mountTmpfs(dst, "mode=1777,size="+tmpSize, 0) })
	for _, p := range sp.ReadOnly {
		src := old + source[p]
		add(p, func(dst string) error { return bindMount(src, dst, true, true) })
	}
	wsSrc := old + source[sp.Workspace]
	add(sp.Workspace, func(dst string) error { return bindMount(wsSrc, dst, false, true) })
	for _, s := range sp.Sockets {
		src := old + source[s.Host]
		// Read-only: connect(2) is not a write to the file system, so it still works through it.
		add(s.Sandbox, func(dst string) error { return bindMount(src, dst, true, true) })
	}

	// Parents first: /tmp's tmpfs before a workspace under /tmp, /dev before /dev/null.
	sort.SliceStable(ops, func(i, j int) bool { return depth(ops[i].dst) < depth(ops[j].dst) })
	for _, op := range ops {
		dst := nr + op.dst
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return fmt.Errorf("%s: %w", op.dst, err)
		}
		if err := op.do(dst); err != nil {
			return fmt.Errorf("%s: %w", op.dst, err)
		}
	}
	// The root itself is read-only: a command creates nothing outside the workspace and /tmp.
	if err := unix.Mount("", nr, "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("remount the root read-only: %w", err)
	}
	if err := unix.Unmount(old, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the host root: %w", err)
	}
	// pivot_root(".", "."): the base tmpfs ends up stacked on the new root and is detached next.
	if err := os.Chdir(nr); err != nil {
		return err
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root into the sandbox: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach the base tmpfs: %w", err)
	}
	return os.Chdir("/")
}

// writeIDFile copies /etc/passwd or /etc/group (no hashes there) and names the command's uid/gid
// when the host does not, so whoami, git and python's getpass know who they are.
func writeIDFile(src, dst, name string, sp spec) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	id := sp.UID
	line := fmt.Sprintf("sandbox:x:%d:%d:sandbox:%s:/bin/sh\n", sp.UID, sp.GID, sp.Workspace)
	if name == "group" {
		id, line = sp.GID, fmt.Sprintf("sandbox:x:%d:\n", sp.GID)
	}
	known := false
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Split(l, ":"); len(f) > 2 && f[2] == fmt.Sprint(id) {
			known = true
		}
	}
	if !known {
		if len(b) > 0 && b[len(b)-1] != '\n' {
			b = append(b, '\n')
		}
		b = append(b, line...)
	}
	return os.WriteFile(dst, b, 0o644)
}

func depth(p string) int { return strings.Count(filepath.Clean(p), "/") }

// addEntry shows one host path read-only at the same place (a symlink is recreated, not followed).
func addEntry(ops *[]mountOp, old, p string) {
	src := old + p
	st, err := os.Lstat(src)
	if err != nil {
		return
	}
	switch {
	case st.Mode()&os.ModeSymlink != 0:
		*ops = append(*ops, mountOp{p, func(dst string) error { return copySymlink(src, dst) }})
	case st.IsDir() || st.Mode().IsRegular():
		*ops = append(*ops, mountOp{p, func(dst string) error { return bindMount(src, dst, true, true) }})
	}
}

func copySymlink(src, dst string) error {
	target, err := os.Readlink(src)
	if err != nil {
		return err
	}
	return os.Symlink(target, dst)
}

func mountTmpfs(dst, opts string, extra uintptr) error {
	if err := os.Mkdir(dst, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return unix.Mount("tmpfs", dst, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|extra, opts)
}

// bindMount binds src onto dst (creating a directory or an empty file as the mount point). Not
// recursive: a mount below a bound directory stays hidden rather than showing up writable.
func bindMount(src, dst string, readOnly, noDev bool) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	if st.IsDir() {
		if err := os.Mkdir(dst, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
	} else if _, err := os.Lstat(dst); errors.Is(err, os.ErrNotExist) {
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		f.Close()
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		// In a user namespace a mount with locked submounts can only be bound with them.
		if !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("bind %s: %w", strings.TrimPrefix(src, "/oldroot"), err)
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s: %w", strings.TrimPrefix(src, "/oldroot"), err)
		}
	}
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_NOSUID)
	if readOnly {
		flags |= unix.MS_RDONLY
	}
	if noDev {
		flags |= unix.MS_NODEV
	}
	// Flags the source mount already has must be kept: a user namespace may not clear locked ones.
	var sfs unix.Statfs_t
	if unix.Statfs(dst, &sfs) == nil {
		for st, ms := range map[int64]uintptr{unix.ST_NOSUID: unix.MS_NOSUID, unix.ST_NODEV: unix.MS_NODEV, unix.ST_NOEXEC: unix.MS_NOEXEC,
			unix.ST_NOATIME: unix.MS_NOATIME, unix.ST_NODIRATIME: unix.MS_NODIRATIME, unix.ST_RELATIME: unix.MS_RELATIME, unix.ST_RDONLY: unix.MS_RDONLY} {
			if sfs.Flags&st != 0 {
				flags |= ms
			}
		}
	}
	if err := unix.Mount("", dst, "", flags, ""); err != nil {
		return fmt.Errorf("remount %s: %w", strings.TrimPrefix(src, "/oldroot"), err)
	}
	return nil
}

// ---- identity and capabilities -----------------------------------------------------------------

// dropPrivileges: empty bounding set (while CAP_SETPCAP is still there, i.e. before setuid), then the
// unprivileged identity, then empty ambient/inheritable/permitted/effective sets and no_new_privs.
// setresuid and friends are raw per-thread calls on purpose: this locked thread is the one that
// execs, and it must not depend on Go's all-threads broadcast.
func dropPrivileges(sp spec) error {
	for c := 0; c <= 63; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			if errors.Is(err, unix.EINVAL) {
				break // past the kernel's last capability
			}
			return fmt.Errorf("prctl(PR_CAPBSET_DROP, %d): %w", c, err)
		}
	}
	if sp.SwitchUID {
		if sp.Setgroups {
			if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
				return fmt.Errorf("setgroups([]): %w", e)
			}
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(sp.GID), uintptr(sp.GID), uintptr(sp.GID)); e != 0 {
			return fmt.Errorf("setresgid(%d): %w", sp.GID, e)
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(sp.UID), uintptr(sp.UID), uintptr(sp.UID)); e != 0 {
			return fmt.Errorf("setresuid(%d): %w", sp.UID, e)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("prctl(PR_CAP_AMBIENT_CLEAR_ALL): %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset(0): %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	return nil
}

// verifyNoCapabilities is the last check before exec: any capability left in any set is fatal.
func verifyNoCapabilities() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	for _, d := range data {
		if d.Effective != 0 || d.Permitted != 0 || d.Inheritable != 0 {
			return fmt.Errorf("capabilities left after dropping them (eff %x prm %x inh %x); refusing to run", d.Effective, d.Permitted, d.Inheritable)
		}
	}
	for c := 0; c <= 63; c++ {
		in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0)
		if err != nil {
			break
		}
		amb, _ := unix.PrctlRetInt(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_IS_SET, uintptr(c), 0, 0)
		if in != 0 || amb != 0 {
			return fmt.Errorf("capability %d left in the bounding or ambient set; refusing to run", c)
		}
	}
	if nnp, _ := unix.PrctlRetInt(unix.PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); nnp != 1 {
		return errors.New("no_new_privs is not set; refusing to run")
	}
	return nil
}

// ---- Landlock --------------------------------------------------------------------------------

var landlockConfigs = []landlock.Config{landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5,
	landlock.V6, landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11}

// applyLandlock restricts the thread to the sandbox's own paths (the same set the mounts show), so a
// mistake in the mount namespace alone opens nothing. From ABI 4 on, every TCP bind/connect is denied
// as well (the network namespace has nothing to reach; this is defence in depth).
func applyLandlock(sp spec) error {
	abi := sp.LandlockABI
	if abi < 1 {
		return errors.New("no Landlock ABI")
	}
	if abi > len(landlockConfigs) {
		abi = len(landlockConfigs)
	}
	cfg := landlockConfigs[abi-1]
	ws := landlock.RWDirs(sp.Workspace, "/tmp", "/dev/shm")
	if abi >= 2 {
		ws = ws.WithRefer()
	}
	rules := []landlock.Rule{
		landlock.RODirs(systemDirs...).IgnoreIfMissing(),
		landlock.RODirs("/proc"),
		landlock.RODirs("/etc/ssl/certs").IgnoreIfMissing(),
		landlock.ROFiles("/etc/ssl/openssl.cnf").IgnoreIfMissing(),
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty").IgnoreIfMissing(),
		ws,
	}
	entries, err := os.ReadDir("/etc")
	if err != nil {
		return fmt.Errorf("read /etc: %w", err)
	}
	for _, e := range entries {
		if etcDenied[e.Name()] {
			continue
		}
		p := filepath.Join("/etc", e.Name())
		st, err := os.Stat(p) // follows symlinks, as the rule will
		if err != nil {
			continue
		}
		if st.IsDir() {
			rules = append(rules, landlock.RODirs(p).IgnoreIfMissing())
		} else {
			rules = append(rules, landlock.ROFiles(p).IgnoreIfMissing())
		}
	}
	for _, p := range sp.ReadOnly {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("read-only path %s: %w", p, err)
		}
		if st.IsDir() {
			rules = append(rules, landlock.RODirs(p))
		} else {
			rules = append(rules, landlock.ROFiles(p))
		}
	}
	for _, s := range sp.Sockets {
		rules = append(rules, landlock.RWFiles(s.Sandbox))
	}
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return err
	}
	if fd < 0 {
		return fmt.Errorf("the ruleset restricts nothing")
	}
	defer unix.Close(fd)
	if err := llsyscall.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}
