// shellctl runs one shell command of an agent inside its workspace, as a boundary between tenants.
//
//	shellctl exec --workspace DIR --token-file FILE [--status-fd N] [--timeout-ms N] [--ro PATH]...
//	              [--bind-socket HOSTPATH:SANDBOXPATH]... [--uid N --gid N] [--limit-procs N]
//	              [--limit-memory-bytes N] [--limit-cpu-seconds N] [--limit-file-bytes N]
//	              [--limit-open-files N] [--workspace-quota-bytes N] [--allow-connect PORT]...
//	              [--no-isolation] -- COMMAND [ARG]...
//	shellctl probe   prints {"abi","namespaces","user_namespace","seccomp","limits","uid_switch","proc"}
//
// Two stages. The supervisor (this process, started by the agent backend in a new session) checks the
// deployment token (env SHELLCTL_TOKEN must equal the content of --token-file, both nonblank), gives
// the workspace to the command's uid, measures the workspace quota, creates the command's cgroup, and
// starts the inner stage in new mount, PID, IPC, UTS and network namespaces (plus a user namespace
// when shellctl is not root or the host refuses namespaces to root). The inner stage, before one
// instruction of the command runs: joins the cgroup, pivots into a fresh read-only root (system dirs,
// filtered /etc, --ro paths, the workspace read-write, --bind-socket sockets, own /proc, minimal /dev,
// small /tmp), sets the hostname "sandbox", sets rlimits, drops the bounding set, switches to the
// unprivileged uid/gid, clears every capability set, sets no_new_privs, applies Landlock (by ABI, 1..)
// and the seccomp deny list, verifies that no capability is left, and execs the command as pid 1 of
// its PID namespace. Any failure before exec is reported on a private pipe (exit 242). The network
// namespace has only lo: nothing outside is reachable except through the bound unix sockets.
//
// The supervisor then waits: on exit, time limit, the workspace over its quota (quotaWatch, while the
// command runs), SIGTERM/SIGINT/SIGHUP or the death of the backend (PDEATHSIG) it kills the
// command's process group and every remaining descendant (the PID namespace dies with its pid 1;
// subreaper + killTree is the backstop), removes the cgroup, and writes one JSON status line to
// --status-fd, with the isolation it got and the limit that was evidently hit.
//
// Forcing hooks (shellctl's own env; SHELLCTL_* never reaches the command): SHELLCTL_FORCE_ABI=N caps
// the Landlock ABI (0 = none), SHELLCTL_FORCE_NO_LANDLOCK=1, SHELLCTL_FORCE_NO_NAMESPACES=1,
// SHELLCTL_FORCE_RLIMITS=1 (no cgroups).
//
// Exit codes of the supervisor: the command's exit code (128+signal when signalled); 240 usage;
// 241 authentication; 242 sandbox setup failed or refused (nothing of the command ran); 243 time
// limit; 244 killed on request.
package main

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

const (
	exitUsage   = 240
	exitAuth    = 241
	exitSandbox = 242
	exitTimeout = 243
	exitKilled  = 244
	// The uid/gid of commands when shellctl is root and the caller names none: nobody.
	defaultID = 65534
)

type sockBind struct {
	Host    string `json:"host"`
	Sandbox string `json:"sandbox"`
}

// spec is what the supervisor hands the inner stage (argv[2], JSON).
type spec struct {
	Workspace   string     `json:"workspace"`
	ReadOnly    []string   `json:"ro"`
	Sockets     []sockBind `json:"sockets"`
	Isolation   bool       `json:"isolation"`
	Command     []string   `json:"command"`
	LandlockABI int        `json:"landlock_abi"`
	Seccomp     bool       `json:"seccomp"`
	SwitchUID   bool       `json:"switch_uid"`
	Setgroups   bool       `json:"setgroups"`
	UID         int        `json:"uid"`
	GID         int        `json:"gid"`
	Rlimits     []rlimit   `json:"rlimits"`
	CgroupFDs   int        `json:"cgroup_fds"`
}

type isolationInfo struct {
	LandlockABI   int    `json:"landlock_abi"`
	Namespaces    bool   `json:"namespaces"`
	UserNamespace bool   `json:"user_namespace"`
	Seccomp       bool   `json:"seccomp"`
	Limits        string `json:"limits"` // cgroup-v2 | cgroup-v1 | rlimits | none
	UID           int    `json:"uid"`
}

type status struct {
	Status    string         `json:"status"` // exited | timeout | killed | sandbox_error | auth_failed | usage
	ExitCode  *int           `json:"exit_code,omitempty"`
	Signal    string         `json:"signal,omitempty"`
	Message   string         `json:"message,omitempty"`
	ABI       int            `json:"abi"`
	Isolated  bool           `json:"isolated"`
	Isolation *isolationInfo `json:"isolation,omitempty"`
	// memory | procs | cpu | file_size | wall_clock | workspace_quota, when evidently hit
	Limit string `json:"limit,omitempty"`
}

var statusFile *os.File

func main() {
	if len(os.Args) < 2 {
		usage("missing command")
	}
	switch os.Args[1] {
	case "probe":
		out, _ := json.Marshal(probe())
		fmt.Println(string(out))
	case "exec":
		os.Exit(supervise(os.Args[2:]))
	case "__inner":
		inner(os.Args[2:])
	case "__probe":
		probeChild()
	default:
		usage("unknown command " + os.Args[1])
	}
}

func usage(msg string) {
	fmt.Fprintf(os.Stderr, "shellctl: %s\nusage: shellctl exec --workspace DIR --token-file FILE [--status-fd N] [--timeout-ms N] [--ro PATH]... [--bind-socket HOSTPATH:SANDBOXPATH]... [--uid N --gid N] [--limit-procs N] [--limit-memory-bytes N] [--limit-cpu-seconds N] [--limit-file-bytes N] [--limit-open-files N] [--workspace-quota-bytes N] [--no-isolation] -- COMMAND [ARG]...\n       shellctl probe\n", msg)
	os.Exit(exitUsage)
}

// landlockABI is the kernel's Landlock ABI, capped by SHELLCTL_FORCE_ABI (tests of older kernels).
func landlockABI() int {
	if os.Getenv("SHELLCTL_FORCE_NO_LANDLOCK") == "1" {
		return 0
	}
	v, err := llsyscall.LandlockGetABIVersion()
	if err != nil || v < 0 {
		v = 0
	}
	if f, err := strconv.Atoi(os.Getenv("SHELLCTL_FORCE_ABI")); err == nil && f >= 0 && f < v {
		v = f
	}
	return v
}

func namespacesForcedOff() bool { return os.Getenv("SHELLCTL_FORCE_NO_NAMESPACES") == "1" }

func report(s status) {
	if statusFile == nil {
		return
	}
	b, _ := json.Marshal(s)
	_, _ = statusFile.Write(append(b, '\n'))
}

func fail(code int, s status) int {
	fmt.Fprintf(os.Stderr, "shellctl: %s\n", s.Message)
	report(s)
	return code
}

// ---- namespaces ------------------------------------------------------------------------------

const nsFlags = syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS | syscall.CLONE_NEWNET

// identity is who the command runs as and how the inner stage gets there.
type identity struct {
	uid, gid  int
	userns    bool
	switchUID bool // the inner stage starts privileged and setresuid()s to uid
	setgroups bool
}

// sysProcAttr puts the inner stage into its namespaces. Without root, a user namespace maps the
// caller's own uid/gid (the only mapping an unprivileged process may write) and hands the inner stage
// CAP_SYS_ADMIN/CAP_SETPCAP as ambient capabilities, which survive its exec and are dropped before the
// command's. Root whose host refuses plain namespaces gets a user namespace mapping 0 and the uid.
func (id *identity) sysProcAttr(isolation bool) *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if !isolation {
		return attr
	}
	attr.Cloneflags = nsFlags
	if !id.userns {
		return attr
	}
	attr.Cloneflags |= syscall.CLONE_NEWUSER
	euid, egid := os.Geteuid(), os.Getegid()
	if euid != 0 {
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: euid, HostID: euid, Size: 1}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: egid, HostID: egid, Size: 1}}
		attr.GidMappingsEnableSetgroups = false
		attr.AmbientCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_SETPCAP}
		return attr
	}
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}}
	if id.uid != 0 {
		attr.UidMappings = append(attr.UidMappings, syscall.SysProcIDMap{ContainerID: id.uid, HostID: id.uid, Size: 1})
	}
	if id.gid != 0 {
		attr.GidMappings = append(attr.GidMappings, syscall.SysProcIDMap{ContainerID: id.gid, HostID: id.gid, Size: 1})
	}
	attr.GidMappingsEnableSetgroups = true
	return attr
}

// namespaceRefused: errors of clone(2) that mean "not allowed/not built here", so a user namespace
// (or nothing) is next.
func namespaceRefused(err error) bool {
	return errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOSPC) ||
		errors.Is(err, syscall.EUSERS) || errors.Is(err, syscall.EACCES)
}

// startStage starts shellctl itself (argv) with the namespaces of id, retrying with a user namespace
// when root is refused plain ones. id.userns is updated to what was used.
func startStage(argv []string, dir string, env []string, files []*os.File, isolation bool, id *identity) (*os.Process, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot locate shellctl: %w", err)
	}
	start := func() (*os.Process, error) {
		return os.StartProcess(self, argv, &os.ProcAttr{Dir: dir, Env: env, Files: files, Sys: id.sysProcAttr(isolation)})
	}
	proc, err := start()
	if err != nil && isolation && !id.userns && namespaceRefused(err) {
		first := err
		id.userns = true
		id.switchUID, id.setgroups = true, true
		if proc, err = start(); err != nil {
			return nil, fmt.Errorf("namespaces are not available (clone: %v; with a user namespace: %v)", first, err)
		}
	} else if err != nil && isolation && namespaceRefused(err) {
		return nil, fmt.Errorf("namespaces are not available (clone with a user namespace: %v)", err)
	}
	return proc, err
}

// ---- supervisor ------------------------------------------------------------------------------

func supervise(args []string) int {
	sp := spec{Isolation: true}
	var tokenFile string
	var lim limitFlags
	timeoutMs := 0
	statusFd := -1
	uidFlag, gidFlag := -1, -1
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		next := func() string {
			if i+1 >= len(args) {
				usage(a + " needs a value")
			}
			i++
			return args[i]
		}
		num := func(min int64) int64 {
			n, err := strconv.ParseInt(next(), 10, 64)
			if err != nil || n < min {
				usage(fmt.Sprintf("%s needs an integer >= %d", a, min))
			}
			return n
		}
		switch a {
		case "--workspace":
			sp.Workspace = next()
		case "--ro":
			sp.ReadOnly = append(sp.ReadOnly, next())
		case "--bind-socket":
			host, sandbox, ok := strings.Cut(next(), ":")
			if !ok || !filepath.IsAbs(host) || !filepath.IsAbs(sandbox) || filepath.Clean(sandbox) == "/" {
				usage("--bind-socket needs HOSTPATH:SANDBOXPATH, both absolute")
			}
			sp.Sockets = append(sp.Sockets, sockBind{Host: filepath.Clean(host), Sandbox: filepath.Clean(sandbox)})
		case "--allow-connect":
			// Accepted for old callers; the network namespace has nothing to connect to.
			if p, err := strconv.ParseUint(next(), 10, 16); err != nil || p == 0 {
				usage("--allow-connect needs a TCP port")
			}
		case "--timeout-ms":
			timeoutMs = int(num(0))
		case "--token-file":
			tokenFile = next()
		case "--status-fd":
			statusFd = int(num(3))
		case "--uid":
			uidFlag = int(num(1))
		case "--gid":
			gidFlag = int(num(1))
		case "--limit-procs":
			lim.procs = num(0)
		case "--limit-memory-bytes":
			lim.memory = num(0)
		case "--limit-cpu-seconds":
			lim.cpuSeconds = num(0)
		case "--limit-file-bytes":
			lim.fileBytes = num(0)
		case "--limit-open-files":
			lim.openFiles = num(0)
		case "--workspace-quota-bytes":
			lim.quota = num(0)
		case "--no-isolation":
			sp.Isolation = false
		case "--":
			sp.Command = args[i+1:]
			i = len(args)
		default:
			usage("unexpected argument " + a)
		}
	}
	if statusFd >= 0 {
		// Never inherited by the command.
		syscall.CloseOnExec(statusFd)
		statusFile = os.NewFile(uintptr(statusFd), "status")
	}
	abi := landlockABI()
	base := status{ABI: abi, Isolated: sp.Isolation}
	if sp.Workspace == "" || len(sp.Command) == 0 || tokenFile == "" {
		s := base
		s.Status, s.Message = "usage", "--workspace, --token-file and a command after -- are required"
		return fail(exitUsage, s)
	}
	if !filepath.IsAbs(sp.Workspace) {
		s := base
		s.Status, s.Message = "usage", "--workspace must be an absolute path"
		return fail(exitUsage, s)
	}
	sp.Workspace = filepath.Clean(sp.Workspace)
	for _, p := range sp.ReadOnly {
		if !filepath.IsAbs(p) {
			s := base
			s.Status, s.Message = "usage", "--ro needs an absolute path: "+p
			return fail(exitUsage, s)
		}
	}

	// Authentication: the deployment token, nonblank, equal to the file only the backend can read.
	given := strings.TrimSpace(os.Getenv("SHELLCTL_TOKEN"))
	raw, err := os.ReadFile(tokenFile)
	expected := strings.TrimSpace(string(raw))
	if err != nil || expected == "" || given == "" || subtle.ConstantTimeCompare([]byte(given), []byte(expected)) != 1 {
		s := base
		s.Status, s.Message = "auth_failed", "the deployment token does not match (SHELLCTL_TOKEN vs --token-file)"
		return fail(exitAuth, s)
	}

	// What isolation this host gives; refuse when a layer the boundary rests on is missing.
	euid := os.Geteuid()
	id := identity{uid: euid, gid: os.Getegid()}
	var notes []string
	if sp.Isolation {
		if euid == 0 {
			id.uid, id.gid, id.switchUID, id.setgroups = defaultID, defaultID, true, true
			if uidFlag > 0 {
				id.uid = uidFlag
				id.gid = uidFlag
			}
			if gidFlag > 0 {
				id.gid = gidFlag
			}
		} else {
			id.userns = true
			if uidFlag > 0 || gidFlag > 0 {
				notes = append(notes, fmt.Sprintf("--uid/--gid ignored: shellctl is not root, the command runs as uid %d in a user namespace", euid))
			}
		}
	}
	info := &isolationInfo{UID: id.uid, Limits: "none"}
	base.Isolation = info
	if sp.Isolation {
		info.LandlockABI = abi
		sp.LandlockABI = abi
		sp.Seccomp = seccompSupported()
		info.Seccomp = sp.Seccomp
		refuse := func(msg string) int {
			s := base
			s.Status, s.Message = "sandbox_error", msg+"; refusing to run a shell command without it (--no-isolation, i.e. SHELL_ISOLATION=off, runs it unconfined)"
			return fail(exitSandbox, s)
		}
		if abi == 0 {
			why := "Landlock is not available on this kernel (needs Linux 5.13+ with landlock in the LSM list)"
			if os.Getenv("SHELLCTL_FORCE_NO_LANDLOCK") == "1" || os.Getenv("SHELLCTL_FORCE_ABI") == "0" {
				why += " [forced by SHELLCTL_FORCE_*]"
			}
			return refuse(why)
		}
		if namespacesForcedOff() {
			return refuse("namespaces are not available (mount, PID, IPC, UTS and network namespaces; forced by SHELLCTL_FORCE_NO_NAMESPACES)")
		}
		if id.switchUID {
			if err := prepareWorkspace(sp.Workspace, id.uid, id.gid); err != nil {
				s := base
				s.Status, s.Message = "sandbox_error", "cannot give the workspace to uid "+strconv.Itoa(id.uid)+": "+err.Error()
				return fail(exitSandbox, s)
			}
		}
	}

	// Limits: the quota turns into the file-size limit; procs and memory go to a cgroup if there is one.
	// While the command runs, quotaWatch stops it once the workspace grows past watchLimit: the quota,
	// or (over it already) what it held at the start plus a little, for metadata such as a mkdir loop.
	fsize, fsizeSet, quotaBound, overQuota := lim.fileBytes, lim.fileBytes > 0, false, false
	var watchLimit int64
	var firstWalk wsUsage
	if lim.quota > 0 {
		u := measureWorkspace(sp.Workspace, nil, 0)
		used := u.bytes
		watchLimit, firstWalk = lim.quota, u
		if used >= lim.quota || u.tooDeep {
			fsize, fsizeSet, overQuota = 0, true, true
			watchLimit = used + 1<<20
			if u.tooDeep {
				notes = append(notes, fmt.Sprintf("the workspace nests directories deeper than %d levels, so its disk use cannot be measured against its quota: the command ran with a file size limit of 0, it can read and delete but not write files (flatten the deep directories)", maxWalkDepth))
			} else {
				notes = append(notes, fmt.Sprintf("the workspace is over its quota (%d of %d bytes used): the command ran with a file size limit of 0, it can read and delete but not write files", used, lim.quota))
			}
		} else if rem := lim.quota - used; !fsizeSet || rem < fsize {
			fsize, fsizeSet, quotaBound = rem, true, true
		}
	}
	var cg *cgroupSet
	if lim.procs > 0 || lim.memory > 0 {
		if os.Getenv("SHELLCTL_FORCE_RLIMITS") != "1" {
			c, err := setupCgroups(fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano()), lim)
			if err != nil {
				notes = append(notes, "no cgroup for the limits ("+err.Error()+"): rlimits only")
			} else {
				cg = c
			}
		}
	}
	defer cg.remove()
	add := func(res int, v int64) { sp.Rlimits = append(sp.Rlimits, rlimit{Resource: res, Value: uint64(v)}) }
	if lim.cpuSeconds > 0 {
		// Hard one second above soft: SIGXCPU first (visible in the status), SIGKILL if ignored.
		sp.Rlimits = append(sp.Rlimits, rlimit{Resource: unix.RLIMIT_CPU, Value: uint64(lim.cpuSeconds), Hard: uint64(lim.cpuSeconds + 1)})
	}
	if fsizeSet {
		add(unix.RLIMIT_FSIZE, fsize)
	}
	if lim.openFiles > 0 {
		add(unix.RLIMIT_NOFILE, lim.openFiles)
	}
	if lim.procs > 0 {
		// Per uid, i.e. per workspace with a per-workspace uid: the floor without a cgroup. With one,
		// the per-command pids.max must trip first (the rlimit is checked first and is invisible
		// afterwards), so the workspace-wide floor is then a few commands' worth.
		n := lim.procs
		if cg != nil && cg.pids != "" {
			n *= 4
		}
		add(unix.RLIMIT_NPROC, n)
	}
	if lim.memory > 0 && (cg == nil || cg.mem == "") {
		// Not RLIMIT_AS: node reserves far more address space than it uses.
		add(unix.RLIMIT_DATA, lim.memory)
	}
	switch {
	case cg != nil:
		info.Limits = cg.mode
	case len(sp.Rlimits) > 0:
		info.Limits = "rlimits"
	default:
		info.Limits = "none"
	}

	// A dying backend takes the command with it: SIGTERM to us (we clean up), SIGKILL to the command.
	ppid := os.Getppid()
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0, 0, 0)
	if os.Getppid() != ppid {
		return exitKilled
	}
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	errR, errW, err := os.Pipe()
	if err != nil {
		s := base
		s.Status, s.Message = "sandbox_error", "pipe: "+err.Error()
		return fail(exitSandbox, s)
	}
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SHELLCTL_") {
			env = append(env, kv)
		}
	}
	files := []*os.File{os.Stdin, os.Stdout, os.Stderr, errW}
	if cg != nil {
		files = append(files, cg.procs...)
		sp.CgroupFDs = len(cg.procs)
	}
	// For root, a retry with a user namespace (startStage) keeps the uid switch this spec asks for.
	sp.SwitchUID, sp.Setgroups, sp.UID, sp.GID = id.switchUID, id.setgroups, id.uid, id.gid
	specJSON, _ := json.Marshal(sp)
	proc, err := startStage([]string{"shellctl", "__inner", string(specJSON)}, sp.Workspace, env, files, sp.Isolation, &id)
	errW.Close()
	cg.closeProcs()
	info.Namespaces = sp.Isolation && err == nil
	info.UserNamespace = sp.Isolation && id.userns && err == nil
	if err != nil {
		s := base
		s.Status = "sandbox_error"
		if namespaceRefused(err) || strings.HasPrefix(err.Error(), "namespaces are not available") {
			s.Message = err.Error() + "; refusing to run a shell command without them (--no-isolation, i.e. SHELL_ISOLATION=off, runs it unconfined)"
		} else {
			s.Message = "cannot start the sandbox: " + err.Error()
		}
		return fail(exitSandbox, s)
	}
	pgid := proc.Pid

	// Reap everything (the command and reparented orphans); report the command's own exit.
	type exited struct {
		ws syscall.WaitStatus
		ru syscall.Rusage
	}
	done := make(chan exited, 1)
	go func() {
		for {
			var ws syscall.WaitStatus
			var ru syscall.Rusage
			pid, err := syscall.Wait4(-1, &ws, 0, &ru)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				return
			}
			if pid == proc.Pid {
				done <- exited{ws, ru}
			}
		}
	}()

	// The inner stage writes to errR only when the sandbox could not be set up; exec closes it.
	setupErr, _ := io.ReadAll(errR)
	errR.Close()
	if len(setupErr) > 0 {
		<-done
		killTree(pgid)
		s := base
		s.Status, s.Message = "sandbox_error", strings.TrimSpace(string(setupErr))
		return fail(exitSandbox, s)
	}

	var timer <-chan time.Time
	if timeoutMs > 0 {
		timer = time.After(time.Duration(timeoutMs) * time.Millisecond)
	}
	var overQuotaNow chan wsUsage
	if lim.quota > 0 {
		stopWatch := make(chan struct{})
		defer close(stopWatch)
		overQuotaNow = make(chan wsUsage, 1)
		go quotaWatch(sp.Workspace, watchLimit, firstWalk, stopWatch, overQuotaNow)
	}
	select {
	case e := <-done:
		// Nothing outlives the command: background jobs it left are killed too.
		killTree(pgid)
		s := base
		s.Status = "exited"
		code := e.ws.ExitStatus()
		var sig syscall.Signal
		if e.ws.Signaled() {
			sig = e.ws.Signal()
			code = 128 + int(sig)
			s.Signal = unix.SignalName(sig)
		} else if code > 128 && code < 128+65 {
			sig = syscall.Signal(code - 128) // the shell reports a child killed by a signal this way
		}
		s.ExitCode = &code
		s.Limit = cg.hit(lim.memory)
		cpu := time.Duration(e.ru.Utime.Nano() + e.ru.Stime.Nano())
		switch {
		case s.Limit != "":
		case lim.cpuSeconds > 0 && (sig == syscall.SIGXCPU || (sig == syscall.SIGKILL && cpu >= time.Duration(lim.cpuSeconds)*time.Second)):
			s.Limit = "cpu"
		case fsizeSet && sig == syscall.SIGXFSZ:
			s.Limit = "file_size"
			if overQuota || quotaBound {
				s.Limit = "workspace_quota"
			}
		}
		s.Message = strings.Join(notes, "; ")
		report(s)
		return code
	case u := <-overQuotaNow:
		// Many files, each under the file-size limit: stopped like a time limit, reported like the
		// memory limit's kill (the command's own status, SIGKILL, the limit).
		killTree(pgid)
		if u.bytes > watchLimit {
			u = measureWorkspace(sp.Workspace, nil, 0) // the watch stopped counting once over
		}
		s := base
		s.Status, s.Limit, s.Signal = "exited", "workspace_quota", "SIGKILL"
		code := 128 + int(syscall.SIGKILL)
		select {
		case e := <-done:
			if e.ws.Signaled() {
				code, s.Signal = 128+int(e.ws.Signal()), unix.SignalName(e.ws.Signal())
			} else {
				code, s.Signal = e.ws.ExitStatus(), ""
			}
		case <-time.After(5 * time.Second):
		}
		s.ExitCode = &code
		switch {
		case u.tooDeep && !firstWalk.tooDeep:
			s.Message = fmt.Sprintf("the workspace nests directories deeper than %d levels, so its disk use cannot be measured against its quota of %d bytes; the command was stopped — flatten or delete the deep directories to continue", maxWalkDepth, lim.quota)
		case overQuota:
			s.Message = fmt.Sprintf("the workspace is over its disk quota of %d bytes (%d used) and the command kept growing it; the command was stopped — delete files to continue", lim.quota, u.bytes)
		default:
			s.Message = fmt.Sprintf("the workspace is over its disk quota of %d bytes (%d used); the command was stopped — delete files to continue", lim.quota, u.bytes)
		}
		if len(notes) > 0 {
			s.Message += "; " + strings.Join(notes, "; ")
		}
		report(s)
		return code
	case <-timer:
		killTree(pgid)
		s := base
		s.Status, s.Limit = "timeout", "wall_clock"
		s.Message = fmt.Sprintf("the command exceeded its time limit of %d ms and was killed", timeoutMs)
		report(s)
		return exitTimeout
	case sig := <-signals:
		killTree(pgid)
		s := base
		s.Status, s.Message = "killed", "the command was killed ("+sig.String()+")"
		report(s)
		return exitKilled
	}
}

// killTree kills the command's process group, then every descendant still alive (as subreaper we
// are the parent of orphans that left the group), until none is left.
func killTree(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	self := os.Getpid()
	for round := 0; round < 200; round++ {
		pids := descendants(self)
		if len(pids) == 0 {
			return
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func descendants(root int) []int {
	var out []int
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", p))
		for _, t := range tasks {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", p, t.Name()))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(b)) {
				if c, err := strconv.Atoi(f); err == nil {
					// Zombies are waiting for the reaper goroutine; they are no longer running.
					if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c)); err == nil && isZombie(st) {
						continue
					}
					out = append(out, c)
					queue = append(queue, c)
				}
			}
		}
	}
	return out
}

func isZombie(stat []byte) bool {
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}
