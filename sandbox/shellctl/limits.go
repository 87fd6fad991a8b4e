package main

// Limits (cgroup v2, cgroup v1 or rlimits, whichever the host gives), the workspace quota and the
// workspace's owner. All of it runs in the supervisor, before the inner stage starts.

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

type limitFlags struct {
	procs, memory, cpuSeconds, fileBytes, openFiles, quota int64
}

// rlimit is one setrlimit(2) call of the inner stage (soft = Value, hard = Hard or Value).
type rlimit struct {
	Resource int    `json:"resource"`
	Value    uint64 `json:"value"`
	Hard     uint64 `json:"hard,omitempty"`
}

// cgroupSet is the per-command cgroup (one leaf per v1 controller, one leaf in v2).
type cgroupSet struct {
	mode   string   // cgroup-v2 | cgroup-v1
	leaves []string // created directories, removed after the command
	procs  []*os.File
	mem    string // leaf with the memory controller ("" when no memory limit)
	pids   string // leaf with the pids controller
}

const cgroupRoot = "/sys/fs/cgroup"

// ownCgroups maps controller ("" for v2) to shellctl's own cgroup path, from /proc/self/cgroup.
func ownCgroups() map[string]string {
	out := map[string]string{}
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return out
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			out[""] = parts[2]
		}
		for _, c := range strings.Split(parts[1], ",") {
			out[c] = parts[2]
		}
	}
	return out
}

func writeFile(path, value string) error {
	return os.WriteFile(path, []byte(value), 0o644)
}

func isV2Root() bool {
	_, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers"))
	return err == nil
}

// setupCgroups creates the command's cgroup(s) with the limits, and opens their cgroup.procs for the
// inner stage (it joins by writing "0", before anything of the command runs).
func setupCgroups(id string, lim limitFlags) (*cgroupSet, error) {
	cg := &cgroupSet{}
	ok := false
	defer func() {
		if !ok {
			cg.remove()
		}
	}()
	own := ownCgroups()
	if isV2Root() {
		cg.mode = "cgroup-v2"
		// The root-level parent needs root; a delegated subtree (own cgroup) works when its
		// subtree_control already offers the controllers (the no-internal-processes rule).
		var errs []string
		for _, parent := range []string{filepath.Join(cgroupRoot, "dify-shell"), filepath.Join(cgroupRoot, own[""], "dify-shell")} {
			leaf, err := v2Leaf(parent, id, lim)
			if err == nil {
				cg.leaves = append(cg.leaves, leaf)
				cg.mem, cg.pids = leaf, leaf
				break
			}
			errs = append(errs, err.Error())
		}
		if len(cg.leaves) == 0 {
			return nil, errors.New(strings.Join(errs, "; "))
		}
	} else {
		cg.mode = "cgroup-v1"
		// Under shellctl's own cgroup of each hierarchy, so a container's own limits still apply above.
		mk := func(ctrl string) (string, error) {
			mount := filepath.Join(cgroupRoot, ctrl)
			if _, err := os.Stat(filepath.Join(mount, "cgroup.procs")); err != nil {
				return "", fmt.Errorf("no cgroup v1 %s hierarchy at %s", ctrl, mount)
			}
			parent := filepath.Join(mount, own[ctrl], "dify-shell")
			leaf := filepath.Join(parent, id)
			var err error
			// A concurrent command may remove the (empty) parent between the two mkdirs: retry.
			for try := 0; try < 5; try++ {
				if err = os.MkdirAll(parent, 0o755); err != nil {
					return "", err
				}
				sweep(parent)
				if err = os.Mkdir(leaf, 0o755); !errors.Is(err, os.ErrNotExist) {
					break
				}
			}
			if err != nil {
				return "", err
			}
			cg.leaves = append(cg.leaves, leaf)
			return leaf, nil
		}
		if lim.procs > 0 {
			leaf, err := mk("pids")
			if err != nil {
				return nil, err
			}
			if err := writeFile(filepath.Join(leaf, "pids.max"), strconv.FormatInt(lim.procs, 10)); err != nil {
				return nil, err
			}
			cg.pids = leaf
		}
		if lim.memory > 0 {
			leaf, err := mk("memory")
			if err != nil {
				return nil, err
			}
			if err := writeFile(filepath.Join(leaf, "memory.limit_in_bytes"), strconv.FormatInt(lim.memory, 10)); err != nil {
				return nil, err
			}
			// Swap is not an escape (absent without swap accounting, hence best effort).
			_ = writeFile(filepath.Join(leaf, "memory.memsw.limit_in_bytes"), strconv.FormatInt(lim.memory, 10))
			cg.mem = leaf
		}
	}
	for _, leaf := range cg.leaves {
		f, err := os.OpenFile(filepath.Join(leaf, "cgroup.procs"), os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		cg.procs = append(cg.procs, f)
	}
	ok = true
	return cg, nil
}

func v2Leaf(parent, id string, lim limitFlags) (string, error) {
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	sweep(parent)
	var ctrls []string
	if lim.procs > 0 {
		ctrls = append(ctrls, "+pids")
	}
	if lim.memory > 0 {
		ctrls = append(ctrls, "+memory")
	}
	if err := writeFile(filepath.Join(parent, "cgroup.subtree_control"), strings.Join(ctrls, " ")); err != nil {
		return "", fmt.Errorf("%s: enable %s: %w", parent, strings.Join(ctrls, " "), err)
	}
	leaf := filepath.Join(parent, id)
	if err := os.Mkdir(leaf, 0o755); err != nil {
		return "", err
	}
	fail := func(err error) (string, error) { _ = os.Remove(leaf); return "", err }
	if lim.procs > 0 {
		if err := writeFile(filepath.Join(leaf, "pids.max"), strconv.FormatInt(lim.procs, 10)); err != nil {
			return fail(err)
		}
	}
	if lim.memory > 0 {
		if err := writeFile(filepath.Join(leaf, "memory.max"), strconv.FormatInt(lim.memory, 10)); err != nil {
			return fail(err)
		}
		_ = writeFile(filepath.Join(leaf, "memory.swap.max"), "0")
	}
	return leaf, nil
}

// sweep removes leaves a killed shellctl left behind: named <pid>-<n> after a supervisor that is gone
// (rmdir fails harmlessly on a cgroup still in use).
func sweep(parent string) {
	entries, _ := os.ReadDir(parent)
	for _, e := range entries {
		pidText, _, ok := strings.Cut(e.Name(), "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || !e.IsDir() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			_ = os.Remove(filepath.Join(parent, e.Name()))
		}
	}
}

// closeProcs closes the supervisor's copies of the cgroup.procs descriptors once the child has them.
func (cg *cgroupSet) closeProcs() {
	if cg == nil {
		return
	}
	for _, f := range cg.procs {
		f.Close()
	}
	cg.procs = nil
}

// remove kills whatever is still in the command's cgroups (a backstop: the tree is dead by now) and
// removes them.
func (cg *cgroupSet) remove() {
	if cg == nil {
		return
	}
	cg.closeProcs()
	for i := len(cg.leaves) - 1; i >= 0; i-- {
		leaf := cg.leaves[i]
		for try := 0; try < 100; try++ {
			if err := os.Remove(leaf); err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			if b, err := os.ReadFile(filepath.Join(leaf, "cgroup.procs")); err == nil {
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		// The parent goes too when it is empty (v1): a leftover child keeps the cgroup that
		// shellctl itself runs in from being removed by whoever made it.
		if cg.mode == "cgroup-v1" {
			_ = os.Remove(filepath.Dir(leaf))
		}
	}
}

// counter reads "key N" from a flat-keyed cgroup file (memory.events, pids.events, memory.oom_control).
func counter(file, key string) int64 {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == key {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}

func readInt(file string) int64 {
	b, _ := os.ReadFile(file)
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n
}

// hit says which cgroup limit the command evidently ran into ("" for none).
func (cg *cgroupSet) hit(memLimit int64) string {
	if cg == nil {
		return ""
	}
	if cg.mem != "" {
		if cg.mode == "cgroup-v2" {
			if counter(filepath.Join(cg.mem, "memory.events"), "oom_kill") > 0 {
				return "memory"
			}
		} else if counter(filepath.Join(cg.mem, "memory.oom_control"), "oom_kill") > 0 ||
			(readInt(filepath.Join(cg.mem, "memory.failcnt")) > 0 && readInt(filepath.Join(cg.mem, "memory.max_usage_in_bytes")) >= memLimit*9/10) {
			return "memory"
		}
	}
	if cg.pids != "" && counter(filepath.Join(cg.pids, "pids.events"), "max") > 0 {
		return "procs"
	}
	return ""
}

// probeCgroups answers which kind of limits this host gives shellctl, by creating and removing one.
func probeCgroups() string {
	if os.Getenv("SHELLCTL_FORCE_RLIMITS") == "1" {
		return "rlimits"
	}
	cg, err := setupCgroups(fmt.Sprintf("probe-%d", os.Getpid()), limitFlags{procs: 1 << 20, memory: 1 << 40})
	if err != nil {
		return "rlimits"
	}
	cg.remove()
	return cg.mode
}

// ---- workspace -------------------------------------------------------------------------------

// maxWalkDepth bounds the descriptors one walk holds (one per level). A workspace nested deeper cannot
// be measured: it reads as over its quota (fail closed) with a message that says why.
const maxWalkDepth = 1000

// wsUsage is one measurement of the workspace: allocated bytes (st_blocks*512, so a sparse file counts
// what it really uses; directories' own blocks too; hard links once) and how long the walk took.
type wsUsage struct {
	bytes   int64
	took    time.Duration
	fsUsed  int64 // fsUsed(root) just before the walk
	tooDeep bool  // directories nested beyond maxWalkDepth (not measured)
}

// measureWorkspace walks the workspace descriptor-relative (openat/fstatat, O_NOFOLLOW, never a
// path): the command can swap a directory for a symlink at any time, and the walk runs as the
// supervisor on the host, so nothing of it may follow a link out of the workspace. A close of stop
// ends the walk early (the command is gone); so does a total above stopAbove (> 0): the quota watch
// needs to know "over", not by how much, and a walk of many files must not give a writer more time.
func measureWorkspace(root string, stop <-chan struct{}, stopAbove int64) wsUsage {
	began := time.Now()
	if r, err := filepath.EvalSymlinks(root); err == nil {
		root = r // the path itself is the backend's; links below it are never followed
	}
	fs := fsUsed(root)
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return wsUsage{took: time.Since(began), fsUsed: fs}
	}
	w := &walker{seen: map[[2]uint64]bool{}, stop: stop, stopAbove: stopAbove}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil {
		w.total += st.Blocks * 512
	}
	w.dir(fd, 1) // closes fd
	return wsUsage{bytes: w.total, took: time.Since(began), fsUsed: fs, tooDeep: w.tooDeep}
}

// workspaceBytes is the disk space the workspace uses now.
func workspaceBytes(root string) int64 { return measureWorkspace(root, nil, 0).bytes }

type walker struct {
	total     int64
	seen      map[[2]uint64]bool
	stop      <-chan struct{}
	stopAbove int64
	tooDeep   bool
}

// dir adds what the directory fd holds (fd is consumed), its files before its subdirectories; false
// when the walk ends early.
func (w *walker) dir(fd, depth int) bool {
	f := os.NewFile(uintptr(fd), "dir")
	defer f.Close()
	for {
		select {
		case <-w.stop:
			return false
		default:
		}
		names, err := f.Readdirnames(512) // in batches: a directory of a million names is not read at once
		var subdirs []string
		for _, name := range names {
			var st unix.Stat_t
			if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue // gone meanwhile
			}
			isDir := st.Mode&unix.S_IFMT == unix.S_IFDIR
			if st.Nlink > 1 && !isDir {
				key := [2]uint64{st.Dev, st.Ino}
				if w.seen[key] {
					continue
				}
				w.seen[key] = true
			}
			w.total += st.Blocks * 512
			if isDir {
				subdirs = append(subdirs, name)
			}
		}
		if w.stopAbove > 0 && w.total > w.stopAbove {
			return false
		}
		for _, name := range subdirs {
			if depth >= maxWalkDepth {
				w.tooDeep = true
				continue
			}
			sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				continue // replaced by a non-directory (or a link) since the fstatat: not followed
			}
			if !w.dir(sub, depth+1) {
				return false
			}
		}
		if err != nil || len(names) == 0 {
			return true
		}
	}
}

// quotaWatch measures the workspace while the command runs and sends one wsUsage on over when it is
// above limit (or cannot be measured: nested too deeply), then returns; it returns too when stop is
// closed. RLIMIT_FSIZE (what was left of the quota at the start) bounds one file at once; this bounds
// many files. Bounded work: after a walk of T the next starts max(100ms, 4T) later, so a huge
// workspace costs at most a fifth of a core. Early, at most max(100ms, T) after a walk: when the
// filesystem as a whole (statfs, every 100ms, nearly free) has grown by more than the workspace had
// left, so a workspace of many small files (a long T) cannot buy itself seconds of unwatched writing;
// others' writes on the same filesystem can only bring a walk forward, never stop a command.
//
// The overshoot is what the command writes between a walk and the kill, i.e. its write rate times
// (100 ms + the walk). Measured on this project's loaded 2-core ext4 host (load ~20; 64 MiB quota,
// 32 MiB file limit; TestManyFilesAreStoppedAtTheWorkspaceQuota logs it): 1 writer of 4 MB files
// ≤ 28 MiB over, 16..64 parallel dd writers at full page-cache speed ≤ 105 MiB over (~1 GB/s for
// ~100 ms). Worst found: the same 16 writers inside a directory of 100,000 empty files (a walk of
// seconds under that load) ≈ 490 MiB over; the walk stops counting at the quota and counts a
// directory's files before its subdirectories, without which that case let 2.4 GB through.
// first is the measurement taken before the command started (its time sets the first wait).
func quotaWatch(root string, limit int64, first wsUsage, stop <-chan struct{}, over chan<- wsUsage) {
	const tick = 100 * time.Millisecond
	last := first
	for {
		ended := time.Now()
		due := ended.Add(max(tick, 4*last.took))
		earliest := ended.Add(max(tick, last.took))
		t := time.NewTicker(tick)
	wait:
		for {
			select {
			case <-stop:
				t.Stop()
				return
			case now := <-t.C:
				if !now.Before(due) {
					break wait
				}
				if !now.Before(earliest) && last.fsUsed >= 0 {
					if used := fsUsed(root); used >= 0 && used-last.fsUsed > limit-last.bytes {
						break wait
					}
				}
			}
		}
		t.Stop()
		u := measureWorkspace(root, stop, limit)
		select {
		case <-stop:
			return
		default:
		}
		// Nested too deeply already at the start, the command runs with RLIMIT_FSIZE 0 to flatten it.
		if u.bytes > limit || (u.tooDeep && !first.tooDeep) {
			over <- u
			return
		}
		last = u
	}
}

// fsUsed is what the filesystem holding root uses in all (-1 when statfs fails).
func fsUsed(root string) int64 {
	var st unix.Statfs_t
	if unix.Statfs(root, &st) != nil {
		return -1
	}
	return int64(st.Blocks-st.Bfree) * int64(st.Bsize)
}

// prepareWorkspace makes the workspace the command's: its root, .tmp and outputs; the whole tree once
// when the root belongs to someone else (first use, or a new uid). Descriptor-relative and never
// following a symlink, so a link a command left behind cannot redirect root's chown.
func prepareWorkspace(ws string, uid, gid int) error {
	ws, err := filepath.EvalSymlinks(ws) // the path itself is the backend's; links below it are not followed
	if err != nil {
		return err
	}
	var st unix.Stat_t
	if err := unix.Lstat(ws, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s is not a directory", ws)
	}
	fd, err := unix.Open(ws, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if int(st.Uid) != uid {
		return chownTree(fd, uid, gid, 0)
	}
	for _, name := range []string{".tmp", "outputs"} {
		var cst unix.Stat_t
		if unix.Fstatat(fd, name, &cst, unix.AT_SYMLINK_NOFOLLOW) == nil && (int(cst.Uid) != uid || int(cst.Gid) != gid) {
			if err := unix.Fchownat(fd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return err
			}
		}
	}
	if int(st.Gid) != gid {
		return unix.Fchown(fd, uid, gid)
	}
	return nil
}

func chownTree(dirfd, uid, gid, depth int) error {
	if depth > 256 {
		return fmt.Errorf("workspace nested too deeply")
	}
	if err := unix.Fchown(dirfd, uid, gid); err != nil {
		return err
	}
	dup, err := unix.Dup(dirfd)
	if err != nil {
		return err
	}
	dir := os.NewFile(uintptr(dup), "dir")
	names, err := dir.Readdirnames(-1)
	dir.Close()
	if err != nil {
		return err
	}
	for _, name := range names {
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			continue
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			sub, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				continue
			}
			err = chownTree(sub, uid, gid, depth+1)
			unix.Close(sub)
			if err != nil {
				return err
			}
			continue
		}
		if err := unix.Fchownat(dirfd, name, uid, gid, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	return nil
}
