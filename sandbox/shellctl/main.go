// shellctl runs one shell command of an agent inside its workspace, isolated with Landlock.
// (One file: a Go main whose two stages, supervisor and child, share the flag set and the ruleset.)
//
//	shellctl exec --workspace DIR [--ro PATH]... [--allow-connect PORT]... [--timeout-ms N]
//	              --token-file FILE [--status-fd N] [--no-isolation] -- COMMAND [ARG]...
//	shellctl probe        prints {"abi": N} (the kernel's Landlock ABI, 0 when unavailable)
//
// Two stages. The supervisor (this process, started by the agent backend in a new session) checks
// the deployment token (env SHELLCTL_TOKEN must equal the content of --token-file, both nonblank),
// becomes a child subreaper with PR_SET_PDEATHSIG=SIGTERM, and starts the inner stage in a new
// process group. The inner stage applies the Landlock ruleset to itself and execs the command, so
// the ruleset is in place before one instruction of the user's command runs; a ruleset that cannot
// be applied aborts before exec and is reported on a private pipe. The supervisor then waits: on
// exit, time limit, SIGTERM/SIGINT/SIGHUP or the death of the backend (PDEATHSIG) it kills the
// command's process group and every remaining descendant (orphans are reparented to it as subreaper,
// so `setsid cmd &` does not escape), reaps them, and writes one JSON status line to --status-fd.
//
// Exit codes of the supervisor: the command's exit code (128+signal when signalled); 240 usage;
// 241 authentication; 242 sandbox setup failed (nothing of the command ran); 243 time limit;
// 244 killed on request.
package main

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

const (
	exitUsage   = 240
	exitAuth    = 241
	exitSandbox = 242
	exitTimeout = 243
	exitKilled  = 244
	// MinABI: network rules (TCP bind/connect) need Landlock ABI 4.
	minABI = 4
)

// spec is what the supervisor hands the inner stage (argv[2], JSON).
type spec struct {
	Workspace    string   `json:"workspace"`
	ReadOnly     []string `json:"ro"`
	AllowConnect []uint16 `json:"allow_connect"`
	Isolation    bool     `json:"isolation"`
	Command      []string `json:"command"`
}

type status struct {
	Status   string `json:"status"` // exited | timeout | killed | sandbox_error | auth_failed | usage
	ExitCode *int   `json:"exit_code,omitempty"`
	Signal   string `json:"signal,omitempty"`
	Message  string `json:"message,omitempty"`
	ABI      int    `json:"abi"`
	Isolated bool   `json:"isolated"`
}

var statusFile *os.File

func main() {
	if len(os.Args) < 2 {
		usage("missing command")
	}
	switch os.Args[1] {
	case "probe":
		out, _ := json.Marshal(map[string]int{"abi": landlockABI()})
		fmt.Println(string(out))
	case "exec":
		os.Exit(supervise(os.Args[2:]))
	case "__inner":
		inner(os.Args[2:])
	default:
		usage("unknown command " + os.Args[1])
	}
}

func usage(msg string) {
	fmt.Fprintf(os.Stderr, "shellctl: %s\nusage: shellctl exec --workspace DIR --token-file FILE [--ro PATH]... [--allow-connect PORT]... [--timeout-ms N] [--status-fd N] [--no-isolation] -- COMMAND [ARG]...\n       shellctl probe\n", msg)
	os.Exit(exitUsage)
}

func landlockABI() int {
	if os.Getenv("SHELLCTL_FORCE_NO_LANDLOCK") == "1" {
		return 0
	}
	v, err := llsyscall.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

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

// ---- supervisor ------------------------------------------------------------------------------

func supervise(args []string) int {
	sp := spec{Isolation: true}
	var tokenFile string
	timeoutMs := 0
	statusFd := -1
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
		switch a {
		case "--workspace":
			sp.Workspace = next()
		case "--ro":
			sp.ReadOnly = append(sp.ReadOnly, next())
		case "--allow-connect":
			p, err := strconv.ParseUint(next(), 10, 16)
			if err != nil || p == 0 {
				usage("--allow-connect needs a TCP port")
			}
			sp.AllowConnect = append(sp.AllowConnect, uint16(p))
		case "--timeout-ms":
			n, err := strconv.Atoi(next())
			if err != nil || n < 0 {
				usage("--timeout-ms needs a non-negative integer")
			}
			timeoutMs = n
		case "--token-file":
			tokenFile = next()
		case "--status-fd":
			n, err := strconv.Atoi(next())
			if err != nil || n < 3 {
				usage("--status-fd needs a descriptor >= 3")
			}
			statusFd = n
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

	// Authentication: the deployment token, nonblank, equal to the file only the backend can read.
	given := strings.TrimSpace(os.Getenv("SHELLCTL_TOKEN"))
	raw, err := os.ReadFile(tokenFile)
	expected := strings.TrimSpace(string(raw))
	if err != nil || expected == "" || given == "" || subtle.ConstantTimeCompare([]byte(given), []byte(expected)) != 1 {
		s := base
		s.Status, s.Message = "auth_failed", "the deployment token does not match (SHELLCTL_TOKEN vs --token-file)"
		return fail(exitAuth, s)
	}
	if sp.Isolation && abi < minABI {
		s := base
		s.Status = "sandbox_error"
		if abi == 0 {
			s.Message = "Landlock is not available on this kernel; refusing to run a shell command without path isolation"
		} else {
			s.Message = fmt.Sprintf("Landlock ABI %d is too old (need >= %d for network rules); refusing to run", abi, minABI)
		}
		return fail(exitSandbox, s)
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

	specJSON, _ := json.Marshal(sp)
	self, err := os.Executable()
	if err != nil {
		s := base
		s.Status, s.Message = "sandbox_error", "cannot locate shellctl: "+err.Error()
		return fail(exitSandbox, s)
	}
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
	proc, err := os.StartProcess(self, []string{"shellctl", "__inner", string(specJSON)}, &os.ProcAttr{
		Dir:   sp.Workspace,
		Env:   env,
		Files: []*os.File{os.Stdin, os.Stdout, os.Stderr, errW},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL},
	})
	errW.Close()
	if err != nil {
		s := base
		s.Status, s.Message = "sandbox_error", "cannot start the sandbox: "+err.Error()
		return fail(exitSandbox, s)
	}
	pgid := proc.Pid

	// Reap everything (the command and reparented orphans); report the command's own exit.
	type exited struct{ ws syscall.WaitStatus }
	done := make(chan exited, 1)
	go func() {
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, 0, nil)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				return
			}
			if pid == proc.Pid {
				done <- exited{ws}
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
	select {
	case e := <-done:
		// Nothing outlives the command: background jobs it left are killed too.
		killTree(pgid)
		s := base
		s.Status = "exited"
		code := e.ws.ExitStatus()
		if e.ws.Signaled() {
			code = 128 + int(e.ws.Signal())
			s.Signal = unix.SignalName(e.ws.Signal())
		}
		s.ExitCode = &code
		report(s)
		return code
	case <-timer:
		killTree(pgid)
		s := base
		s.Status, s.Message = "timeout", fmt.Sprintf("the command exceeded its time limit of %d ms and was killed", timeoutMs)
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

// ---- inner stage -----------------------------------------------------------------------------

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
	if sp.Isolation {
		if err := applyLandlock(sp); err != nil {
			die("Landlock setup failed, the command was not run: %v", err)
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

// Files of /etc the sandbox never reads: password hashes, host keys, sudo rules, private keys.
var etcDenied = map[string]bool{
	"shadow": true, "shadow-": true, "gshadow": true, "gshadow-": true, "ssh": true,
	"sudoers": true, "sudoers.d": true, "ssl": true, "security": true, "credstore": true, "credstore.encrypted": true,
}

func applyLandlock(sp spec) error {
	abi := landlockABI()
	configs := []landlock.Config{landlock.V4, landlock.V5, landlock.V6, landlock.V7, landlock.V8, landlock.V9, landlock.V10, landlock.V11}
	if abi < minABI {
		return fmt.Errorf("Landlock ABI %d < %d", abi, minABI)
	}
	idx := abi - minABI
	if idx >= len(configs) {
		idx = len(configs) - 1
	}
	cfg := configs[idx]

	rules := []landlock.Rule{
		landlock.RODirs("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt").IgnoreIfMissing(),
		// /etc/ssl minus private/: CA certificates and the OpenSSL config (node reads it at start).
		landlock.RODirs("/etc/ssl/certs").IgnoreIfMissing(),
		landlock.ROFiles("/etc/ssl/openssl.cnf").IgnoreIfMissing(),
		landlock.RWFiles("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom").IgnoreIfMissing(),
		landlock.RWDirs(sp.Workspace).WithRefer(),
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
	for _, port := range sp.AllowConnect {
		rules = append(rules, landlock.ConnectTCP(port))
	}

	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return err
	}
	if fd < 0 {
		return fmt.Errorf("the ruleset restricts nothing")
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
	}
	if err := llsyscall.LandlockRestrictSelf(fd, flags); err != nil {
		return fmt.Errorf("landlock_restrict_self: %w", err)
	}
	return nil
}
