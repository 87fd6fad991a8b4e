package main

// The helper as the agent backend uses it: a real binary, real namespaces, Landlock, seccomp and
// cgroups, real processes. One test per escape the boundary stops, each asserting the refusal. They
// need root (as in CI); the probe binary (testdata/probe) makes the escape attempts.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

var bin, probeDir, probeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shellctl-test-")
	if err != nil {
		panic(err)
	}
	os.Chmod(dir, 0o755) // the unprivileged-caller test runs the binary as nobody
	bin = filepath.Join(dir, "shellctl")
	probeDir = filepath.Join(dir, "probe-bin")
	probeBin = filepath.Join(probeDir, "probe")
	for _, b := range [][]string{{"-o", bin, "."}, {"-o", probeBin, "./testdata/probe"}} {
		build := exec.Command("go", append([]string{"build"}, b...)...)
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		build.Stderr = os.Stderr
		if err := build.Run(); err != nil {
			panic(err)
		}
	}
	os.Chmod(probeDir, 0o755)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
	status         status
	elapsed        time.Duration
}

type opts struct {
	token   string
	env     []string
	flags   []string
	command string
	asUser  *syscall.Credential // run shellctl itself as this user
	wrap    []string            // run shellctl under this command (e.g. setpriv)
}

func run(t *testing.T, ws string, o opts) result {
	t.Helper()
	tokenDir, _ := os.MkdirTemp("", "shellctl-token-")
	t.Cleanup(func() { os.RemoveAll(tokenDir) })
	os.Chmod(tokenDir, 0o755) // readable by the unprivileged-caller test
	tokenFile := filepath.Join(tokenDir, "token")
	os.WriteFile(tokenFile, []byte("deploy-token\n"), 0o644)
	token := o.token
	if token == "" {
		token = "deploy-token"
	}
	args := append([]string{"exec", "--workspace", ws, "--token-file", tokenFile, "--status-fd", "3", "--ro", probeDir}, o.flags...)
	args = append(args, "--", "/bin/bash", "-c", o.command)
	cmd := exec.Command(bin, args...)
	if len(o.wrap) > 0 {
		cmd = exec.Command(o.wrap[0], append(append(o.wrap[1:], bin), args...)...)
	}
	cmd.Env = append([]string{"PATH=" + probeDir + ":/usr/bin:/bin", "SHELLCTL_TOKEN=" + token}, o.env...)
	if o.asUser != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: o.asUser}
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	sr, sw, _ := os.Pipe()
	cmd.ExtraFiles = []*os.File{sw}
	began := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sw.Close()
	var st status
	raw, _ := readAll(sr)
	_ = json.Unmarshal(bytes.TrimSpace(raw), &st)
	_ = cmd.Wait()
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String(), status: st, elapsed: time.Since(began)}
}

func readAll(f *os.File) ([]byte, error) {
	defer f.Close()
	var b bytes.Buffer
	_, err := b.ReadFrom(f)
	return b.Bytes(), err
}

func workspaces(t *testing.T) (string, string) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	os.Mkdir(a, 0o755)
	os.Mkdir(b, 0o755)
	os.WriteFile(filepath.Join(b, "secret.txt"), []byte("other workspace"), 0o644)
	return a, b
}

func mustExit0(t *testing.T, r result) {
	t.Helper()
	if r.code != 0 || r.status.Status != "exited" {
		t.Fatalf("exit %d %+v\nstdout: %s\nstderr: %s", r.code, r.status, r.stdout, r.stderr)
	}
}

func contains(t *testing.T, out string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
}

func TestWorkspaceIsReadWriteAndEverythingPrivateIsInvisible(t *testing.T) {
	a, b := workspaces(t)
	repo, _ := filepath.Abs("../..")
	outsideSock := filepath.Join(os.TempDir(), "shellctl-outside-marker")
	os.WriteFile(outsideSock, nil, 0o644)
	defer os.Remove(outsideSock)
	r := run(t, a, opts{command: fmt.Sprintf(`echo hello > note.txt && cat note.txt
cat /etc/shadow; echo "shadow=$?"
cat %s/secret.txt; echo "other=$?"
cat %s/package.json; echo "repo=$?"
ls /root; echo "root=$?"
ls /run/postgresql; echo "pg=$?"
ls /tmp | grep -c shellctl-outside-marker; echo "tmp-listing"
echo x > /tmp/scratch && echo "tmp-writable"
cat /etc/passwd > /dev/null; echo "passwd=$?"
echo x > /usr/evil; echo "usr=$?"
echo x > /evil; echo "rootfs=$?"`, b, repo)})
	mustExit0(t, r)
	if !r.status.Isolated || r.status.Isolation == nil || !r.status.Isolation.Namespaces || !r.status.Isolation.Seccomp {
		t.Fatalf("isolation not reported: %+v", r.status)
	}
	contains(t, r.stdout, "hello", "shadow=1", "other=1", "repo=1", "root=2", "pg=2", "0\ntmp-listing", "tmp-writable", "passwd=0", "usr=1", "rootfs=1")
	contains(t, r.stderr, "No such file or directory", "Read-only file system")
	if _, err := os.Stat(filepath.Join(os.TempDir(), "scratch")); err == nil {
		t.Error("the sandbox's /tmp is the host's")
	}
}

func TestCommandRunsUnprivilegedWithoutCapabilities(t *testing.T) {
	a, _ := workspaces(t)
	os.Mkdir(filepath.Join(a, ".tmp"), 0o755)
	os.Mkdir(filepath.Join(a, "outputs"), 0o755)
	os.WriteFile(filepath.Join(a, "old.txt"), []byte("x"), 0o644)
	r := run(t, a, opts{flags: []string{"--uid", "200001", "--gid", "200002"}, command: `grep -E '^(Uid|Gid|Groups|Cap[A-Za-z]+|NoNewPrivs|Seccomp):' /proc/self/status; id -u; echo hi > .tmp/t && echo hi > outputs/o && echo >> old.txt && echo writable`})
	mustExit0(t, r)
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "Uid:":
			if strings.Join(f[1:], " ") != "200001 200001 200001 200001" {
				t.Errorf("uid: %s", line)
			}
		case "Gid:":
			if strings.Join(f[1:], " ") != "200002 200002 200002 200002" {
				t.Errorf("gid: %s", line)
			}
		case "Groups:":
			if len(f) != 1 {
				t.Errorf("supplementary groups left: %s", line)
			}
		case "CapInh:", "CapPrm:", "CapEff:", "CapBnd:", "CapAmb:":
			if f[1] != "0000000000000000" {
				t.Errorf("capabilities left: %s", line)
			}
		case "NoNewPrivs:", "Seccomp:":
			if f[1] == "0" {
				t.Errorf("%s", line)
			}
		}
	}
	contains(t, r.stdout, "CapBnd:\t0000000000000000", "CapAmb:\t0000000000000000", "200001\n", "writable")
	r = run(t, a, opts{flags: []string{"--uid", "200001", "--gid", "200002"}, command: "whoami; id -gn; grep -c '^root:' /etc/passwd"})
	mustExit0(t, r)
	contains(t, r.stdout, "sandbox\nsandbox\n1\n")
	if r.status.Isolation == nil || r.status.Isolation.UID != 200001 {
		t.Errorf("status uid: %+v", r.status.Isolation)
	}
	// A file the api places later as root stays readable.
	os.WriteFile(filepath.Join(a, "from-api.txt"), []byte("api"), 0o644)
	r = run(t, a, opts{flags: []string{"--uid", "200001", "--gid", "200002"}, command: "cat from-api.txt"})
	mustExit0(t, r)
	contains(t, r.stdout, "api")
	// Without --uid, root's default is nobody.
	r = run(t, a, opts{command: "id -u"})
	contains(t, r.stdout, "65534")
}

func TestChownDoesNotFollowSymlinksLeftInTheWorkspace(t *testing.T) {
	a, _ := workspaces(t)
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("root's"), 0o600)
	os.Symlink(victim, filepath.Join(a, ".tmp"))
	os.Symlink(victim, filepath.Join(a, "link"))
	run(t, a, opts{flags: []string{"--uid", "200003"}, command: "true"})
	run(t, a, opts{flags: []string{"--uid", "200004"}, command: "true"})
	var st syscall.Stat_t
	syscall.Stat(victim, &st)
	if st.Uid != 0 {
		t.Fatalf("chown followed a symlink: %s now belongs to %d", victim, st.Uid)
	}
	syscall.Stat(a, &st)
	if st.Uid != 200004 {
		t.Fatalf("workspace owner %d", st.Uid)
	}
}

func TestPacketNetlinkAndOtherSocketFamiliesAreRefused(t *testing.T) {
	a, _ := workspaces(t)
	r := run(t, a, opts{command: "probe socket packet; probe socket netlink; probe socket vsock; probe socket unix; probe socket inet; probe socket inet6"})
	mustExit0(t, r)
	contains(t, r.stdout, "socket packet: EPERM", "socket netlink: EPERM", "socket vsock: EPERM", "socket unix: ok", "socket inet: ok", "socket inet6: ok")
}

func TestNoNetworkConfigurationDeviceNodesHostnameOrNewNamespaces(t *testing.T) {
	a, _ := workspaces(t)
	r := run(t, a, opts{command: `ip addr add 10.77.0.1/24 dev lo; echo "ip=$?"; probe sethostname evil; hostname
probe mknod /tmp/dev; mknod /tmp/null2 c 1 3; echo "mknod=$?"; probe syscalls`})
	mustExit0(t, r)
	contains(t, r.stdout, "ip=1", "sethostname: EPERM", "sandbox\n", "mknod char: EPERM", "mknod block: EPERM", "mknod fifo: ok", "mknod=1",
		"unshare(NEWUSER): EPERM", "unshare(NEWNET): EPERM", "clone(NEWUSER): EPERM", "clone3: ENOSYS", "setns: EPERM", "bpf: EPERM",
		"perf_event_open: EPERM", "ptrace: EPERM", "keyctl: EPERM", "mount: EPERM", "userfaultfd: EPERM", "io_uring_setup: EPERM", "init_module: EPERM")
}

func TestNetworkNamespaceReachesNothingOnTheHost(t *testing.T) {
	a, _ := workspaces(t)
	tcp, _ := net.Listen("tcp", "127.0.0.1:0")
	defer tcp.Close()
	udp, _ := net.ListenPacket("udp", "127.0.0.1:0")
	defer udp.Close()
	port := tcp.Addr().(*net.TCPAddr).Port
	// --allow-connect is still accepted (old callers) and changes nothing.
	r := run(t, a, opts{flags: []string{"--allow-connect", strconv.Itoa(port)}, command: fmt.Sprintf(
		"probe tcp %s; probe udp %s leaked; tail -n +3 /proc/net/dev | cut -d: -f1", tcp.Addr(), udp.LocalAddr())})
	mustExit0(t, r)
	contains(t, r.stdout, "tcp: failed")
	if strings.Contains(r.stdout, "tcp: connected") {
		t.Fatalf("reached the host's loopback: %s", r.stdout)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if links := strings.Fields(lines[len(lines)-1]); len(links) != 1 || links[0] != "lo" {
		t.Errorf("links other than lo: %q", r.stdout)
	}
	udp.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, _, err := udp.ReadFrom(make([]byte, 64)); err == nil {
		t.Fatalf("a UDP datagram (%d bytes) arrived from the sandbox", n)
	}
}

func echoServer(t *testing.T, path string) {
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o666)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			buf := make([]byte, 100)
			n, _ := c.Read(buf)
			c.Write(append([]byte("echo:"), buf[:n]...))
			c.Close()
		}
	}()
}

func TestHostUnixSocketsAreInvisibleButABoundSocketIsReachable(t *testing.T) {
	a, _ := workspaces(t)
	dir := t.TempDir()
	outside, stub := filepath.Join(dir, "outside.sock"), filepath.Join(dir, "stub.sock")
	echoServer(t, outside)
	echoServer(t, stub)
	r := run(t, a, opts{flags: []string{"--bind-socket", stub + ":/run/dify-agent/stub.sock"}, command: fmt.Sprintf(
		"probe unix %s x; probe unix /run/dify-agent/stub.sock ping; ls /run/postgresql 2>&1; echo > /run/dify-agent/stub.sock; echo w=$?", outside)})
	mustExit0(t, r)
	contains(t, r.stdout, "unix: failed: dial unix "+outside+": connect: no such file or directory", `unix: reply "echo:ping"`, "w=")
	if strings.Contains(r.stdout, "w=0") {
		t.Error("the bound socket's mount is writable")
	}
}

func TestForkBombIsBoundedByLimitProcs(t *testing.T) {
	for _, env := range [][]string{nil, {"SHELLCTL_FORCE_RLIMITS=1"}} {
		a, _ := workspaces(t)
		r := run(t, a, opts{env: env, flags: []string{"--limit-procs", "40", "--uid", "200010", "--timeout-ms", "20000"}, command: "probe forks 500"})
		if r.status.Status != "exited" || r.elapsed > 10*time.Second {
			t.Fatalf("%v: %+v after %s", env, r.status, r.elapsed)
		}
		var started int
		fmt.Sscanf(r.stdout, "forks: started %d", &started)
		if started == 0 || started >= 40 || !strings.Contains(r.stdout, "EAGAIN") {
			t.Errorf("%v: %q", env, r.stdout)
		}
		want := map[bool]string{true: "rlimits", false: "cgroup-v1"}[env != nil]
		if isV2Root() {
			want = map[bool]string{true: "rlimits", false: "cgroup-v2"}[env != nil]
		}
		if r.status.Isolation.Limits != want {
			t.Errorf("limits %q, want %q", r.status.Isolation.Limits, want)
		}
		if env == nil && r.status.Limit != "procs" {
			t.Errorf("limit hit not reported: %+v", r.status)
		}
	}
}

func TestMemoryBombIsBoundedByLimitMemory(t *testing.T) {
	a, _ := workspaces(t)
	r := run(t, a, opts{flags: []string{"--limit-memory-bytes", strconv.Itoa(64 << 20)}, command: "probe alloc 400"})
	if strings.Contains(r.stdout, "alloc: done") || r.code == 0 {
		t.Fatalf("allocated past the limit: %d %+v %s", r.code, r.status, r.stdout)
	}
	if r.status.Limit != "memory" || r.status.Signal != "SIGKILL" {
		t.Errorf("status %+v", r.status)
	}
	r = run(t, a, opts{env: []string{"SHELLCTL_FORCE_RLIMITS=1"}, flags: []string{"--limit-memory-bytes", strconv.Itoa(64 << 20)}, command: "probe alloc 400"})
	if strings.Contains(r.stdout, "alloc: done") || r.code == 0 || r.status.Isolation.Limits != "rlimits" {
		t.Fatalf("allocated past the rlimit: %d %+v %s", r.code, r.status, r.stdout)
	}
}

func TestLargeWritesAreBoundedByFileSizeAndQuota(t *testing.T) {
	a, _ := workspaces(t)
	r := run(t, a, opts{flags: []string{"--limit-file-bytes", strconv.Itoa(10 << 20)}, command: "head -c 300000000 /dev/zero > big"})
	st, err := os.Stat(filepath.Join(a, "big"))
	if err != nil || st.Size() > 10<<20 || r.status.Limit != "file_size" {
		t.Fatalf("%v %v %+v", st.Size(), err, r.status)
	}
	os.Remove(filepath.Join(a, "big"))
	r = run(t, a, opts{flags: []string{"--limit-file-bytes", strconv.Itoa(100 << 20), "--workspace-quota-bytes", strconv.Itoa(5 << 20)}, command: "head -c 300000000 /dev/zero > big"})
	st, err = os.Stat(filepath.Join(a, "big"))
	if err != nil || st.Size() > 5<<20 || r.status.Limit != "workspace_quota" {
		t.Fatalf("%v %v %+v", st.Size(), err, r.status)
	}
}

func TestManyFilesAreStoppedAtTheWorkspaceQuota(t *testing.T) {
	const quota = 64 << 20
	flags := []string{"--uid", "200011", "--limit-file-bytes", strconv.Itoa(32 << 20), "--workspace-quota-bytes", strconv.Itoa(quota), "--timeout-ms", "60000"}
	for _, c := range []struct {
		name, command string
		slack         int64
	}{
		// 100 files of 4 MB, each far under what is left: RLIMIT_FSIZE alone lets all 400 MB through.
		{"one writer", "for i in $(seq 1 100); do head -c 4000000 /dev/zero > fill$i.bin || break; sleep 0.05; done; echo wrote $i", 32 << 20},
		// 16 writers as fast as the page cache takes them (2.5 GB unbounded): stopped within about 100 ms.
		{"16 parallel writers", "for j in $(seq 1 16); do (for i in $(seq 1 40); do dd if=/dev/zero of=w$j-$i bs=1M count=4 status=none || exit; done) & done; wait", 256 << 20},
	} {
		a, _ := workspaces(t)
		r := run(t, a, opts{flags: flags, command: c.command})
		used := workspaceBytes(a)
		t.Logf("%s: %d bytes used, %d MiB over the quota, %s", c.name, used, (used-quota)>>20, r.elapsed)
		if r.status.Status != "exited" || r.status.Limit != "workspace_quota" || r.code != 137 || r.status.Signal != "SIGKILL" {
			t.Fatalf("%s: not stopped at the quota: %d %+v\n%s", c.name, r.code, r.status, r.stdout)
		}
		contains(t, r.status.Message, "over its disk quota of 67108864 bytes", "the command was stopped", "delete files to continue")
		if used <= quota || used > quota+c.slack {
			t.Errorf("%s: %d bytes used, want just over %d (within %d)", c.name, used, quota, c.slack)
		}
		if pids := hostPids("fill"); len(pids) > 0 {
			t.Errorf("%s: pids %v outlived the quota kill", c.name, pids)
		}
		// The model deletes and carries on: the next command in the same workspace runs.
		mustExit0(t, run(t, a, opts{flags: flags, command: "rm -f fill*.bin w*-*; echo cleaned"}))
	}
}

func TestSparseFilesCountWhatTheyUseAndKeepSizeFallocateIsRefused(t *testing.T) {
	a, _ := workspaces(t)
	flags := []string{"--uid", "200012", "--workspace-quota-bytes", strconv.Itoa(16 << 20), "--timeout-ms", "30000"}
	// A 1 GB apparent size holding one block is not over a 16 MiB quota; allocating past the end
	// without growing the size (fallocate -n) would slip past RLIMIT_FSIZE, so it is refused.
	r := run(t, a, opts{flags: flags, command: "truncate -s 1000000000 sparse && echo x >> sparse; sleep 0.5; touch pre && fallocate -n -l 200000000 pre; echo fallocate=$?; sleep 0.5; echo done"})
	mustExit0(t, r)
	contains(t, r.stdout, "fallocate=1", "done")
	contains(t, r.stderr, "Operation not permitted")
	if used := workspaceBytes(a); used > 1<<20 {
		t.Errorf("%d bytes allocated", used)
	}
}

func TestNestingTooDeeplyToMeasureIsStoppedThenOnlyDeletable(t *testing.T) {
	a, _ := workspaces(t)
	flags := []string{"--uid", "200013", "--workspace-quota-bytes", strconv.Itoa(64 << 20), "--timeout-ms", "30000"}
	deep := "p=.; for i in $(seq 1 1005); do p=$p/d; done; mkdir -p $p"
	r := run(t, a, opts{flags: flags, command: deep + "; sleep 10; echo survived"})
	if r.status.Limit != "workspace_quota" || strings.Contains(r.stdout, "survived") {
		t.Fatalf("%d %+v %s", r.code, r.status, r.stdout)
	}
	contains(t, r.status.Message, "deeper than 1000 levels", "the command was stopped")
	r = run(t, a, opts{flags: flags, command: "(echo more > new.txt); echo write=$?; rm -rf d && echo flattened"})
	mustExit0(t, r)
	contains(t, r.stdout, "write=153", "flattened")
	contains(t, r.status.Message, "deeper than 1000 levels")
	mustExit0(t, run(t, a, opts{flags: flags, command: "echo fine > new.txt"}))
}

func TestOverQuotaWorkspaceCanOnlyReadAndDelete(t *testing.T) {
	a, _ := workspaces(t)
	os.WriteFile(filepath.Join(a, "fat"), bytes.Repeat([]byte("x"), 2<<20), 0o644)
	r := run(t, a, opts{flags: []string{"--workspace-quota-bytes", strconv.Itoa(1 << 20)}, command: "wc -c < fat; (echo more > new.txt); echo write=$?; rm fat && echo deleted"})
	mustExit0(t, r)
	contains(t, r.stdout, "2097152", "write=153", "deleted")
	contains(t, r.status.Message, "over its quota", "file size limit of 0")
	if b, _ := os.ReadFile(filepath.Join(a, "new.txt")); len(b) > 0 {
		t.Error("wrote past the quota")
	}
}

func TestOlderLandlockABIsStillIsolate(t *testing.T) {
	tcp, _ := net.Listen("tcp", "127.0.0.1:0")
	defer tcp.Close()
	for _, abi := range []int{1, 2, 3} {
		a, b := workspaces(t)
		r := run(t, a, opts{env: []string{"SHELLCTL_FORCE_ABI=" + strconv.Itoa(abi)}, command: fmt.Sprintf(
			"echo ok > mine; cat mine; echo x > /usr/x; echo usr=$?; cat %s/secret.txt; echo other=$?; cat /etc/shadow; echo shadow=$?; probe tcp %s", b, tcp.Addr())})
		mustExit0(t, r)
		contains(t, r.stdout, "ok\n", "usr=1", "other=1", "shadow=1", "tcp: failed")
		if r.status.ABI != abi || r.status.Isolation.LandlockABI != abi || !r.status.Isolation.Namespaces {
			t.Errorf("abi %d: %+v", abi, r.status)
		}
	}
}

func TestMissingLandlockOrNamespacesIsRefusedByName(t *testing.T) {
	a, _ := workspaces(t)
	for _, c := range []struct{ env, want string }{
		{"SHELLCTL_FORCE_ABI=0", "Landlock is not available on this kernel (needs Linux 5.13+"},
		{"SHELLCTL_FORCE_NO_LANDLOCK=1", "Landlock is not available on this kernel"},
		{"SHELLCTL_FORCE_NO_NAMESPACES=1", "namespaces are not available"},
	} {
		r := run(t, a, opts{env: []string{c.env}, command: "touch ran"})
		if r.code != exitSandbox || r.status.Status != "sandbox_error" || !strings.Contains(r.status.Message, c.want) {
			t.Fatalf("%s: %d %+v", c.env, r.code, r.status)
		}
		if _, err := os.Stat(filepath.Join(a, "ran")); err == nil {
			t.Fatalf("%s: the command ran unconfined", c.env)
		}
		off := run(t, a, opts{env: []string{c.env}, flags: []string{"--no-isolation"}, command: "touch ran; cat /etc/hostname >/dev/null && echo unconfined"})
		if off.code != 0 || off.status.Isolated || !strings.Contains(off.stdout, "unconfined") {
			t.Fatalf("%s: %d %+v %s", c.env, off.code, off.status, off.stderr)
		}
		os.Remove(filepath.Join(a, "ran"))
	}
}

func TestNodeAndPythonRunWithDefaultLimits(t *testing.T) {
	defaults := []string{"--limit-procs", "256", "--limit-memory-bytes", strconv.Itoa(1 << 30), "--limit-cpu-seconds", "60",
		"--limit-file-bytes", strconv.Itoa(100 << 20), "--limit-open-files", "1024", "--workspace-quota-bytes", strconv.Itoa(1 << 30), "--uid", "200020"}
	for _, env := range [][]string{nil, {"SHELLCTL_FORCE_RLIMITS=1"}} {
		a, _ := workspaces(t)
		r := run(t, a, opts{env: env, flags: defaults, command: `node -e 'console.log("node", 1+1)' && /usr/bin/python3 -c 'print("python", 3)'`})
		mustExit0(t, r)
		contains(t, r.stdout, "node 2", "python 3")
	}
}

func TestRlimitsAreSetAndCpuTimeIsBounded(t *testing.T) {
	a, _ := workspaces(t)
	r := run(t, a, opts{flags: []string{"--limit-open-files", "64", "--limit-file-bytes", "1048576", "--limit-procs", "99", "--limit-cpu-seconds", "1", "--uid", "200040"},
		command: "ulimit -n; ulimit -f; ulimit -t; ulimit -u; while :; do :; done"})
	// RLIMIT_NPROC: the limit itself, or four commands' worth behind a per-command pids cgroup.
	if !strings.HasPrefix(r.stdout, "64\n1024\n1\n99\n") && !strings.HasPrefix(r.stdout, "64\n1024\n1\n396\n") {
		t.Errorf("rlimits: %q", r.stdout)
	}
	// The shell is pid 1 of its namespace, which ignores SIGXCPU: the hard limit's SIGKILL ends it.
	if r.status.Limit != "cpu" || (r.status.Signal != "SIGXCPU" && r.status.Signal != "SIGKILL") {
		t.Fatalf("%+v", r.status)
	}
}

func TestSymlinkedWorkspacePathIsShownAsGiven(t *testing.T) {
	a, _ := workspaces(t)
	link := filepath.Join(t.TempDir(), "ws-link")
	os.Symlink(a, link)
	r := run(t, a, opts{command: "true"})
	r = run(t, link, opts{command: "pwd; echo via-link > f"})
	mustExit0(t, r)
	contains(t, r.stdout, link+"\n")
	if b, _ := os.ReadFile(filepath.Join(a, "f")); string(b) != "via-link\n" {
		t.Fatalf("%q", b)
	}
}

func TestBadRulesetAbortsBeforeTheCommand(t *testing.T) {
	a, _ := workspaces(t)
	r := run(t, a, opts{flags: []string{"--ro", "/does/not/exist"}, command: "touch ran"})
	if r.code != exitSandbox || !strings.Contains(r.status.Message, "the command was not run") || !strings.Contains(r.status.Message, "/does/not/exist") {
		t.Fatalf("%d %+v", r.code, r.status)
	}
	if _, err := os.Stat(filepath.Join(a, "ran")); err == nil {
		t.Fatal("the command ran although the sandbox failed")
	}
}

func TestWrongOrBlankTokenRunsNothing(t *testing.T) {
	a, _ := workspaces(t)
	for _, tok := range []string{"wrong", " "} {
		r := run(t, a, opts{token: tok, command: "touch ran"})
		if r.code != exitAuth || r.status.Status != "auth_failed" {
			t.Fatalf("token %q: %d %+v", tok, r.code, r.status)
		}
		if _, err := os.Stat(filepath.Join(a, "ran")); err == nil {
			t.Fatal("the command ran without a valid token")
		}
	}
}

func TestUnprivilegedCallerGetsAUserNamespace(t *testing.T) {
	root, _ := os.MkdirTemp("", "shellctl-nobody-")
	defer os.RemoveAll(root)
	os.Chmod(root, 0o755)
	a := filepath.Join(root, "ws")
	os.Mkdir(a, 0o755)
	os.Chown(a, 65534, 65534)
	r := run(t, a, opts{asUser: &syscall.Credential{Uid: 65534, Gid: 65534}, flags: []string{"--uid", "200030"}, command: "grep -E '^(Uid|CapEff|CapBnd):' /proc/self/status; hostname; probe socket packet; echo hi > f && echo wrote; echo x > /dev/null && echo devnull"})
	if r.status.Status == "sandbox_error" && strings.Contains(r.status.Message, "namespaces are not available") {
		t.Skip("this host refuses user namespaces to unprivileged users: " + r.status.Message)
	}
	mustExit0(t, r)
	contains(t, r.stdout, "Uid:\t65534", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "sandbox", "socket packet: EPERM", "wrote", "devnull")
	if r.status.Isolation == nil || !r.status.Isolation.UserNamespace || r.status.Isolation.UID != 65534 || !strings.Contains(r.status.Message, "--uid/--gid ignored") {
		t.Errorf("%+v", r.status)
	}
}

func TestRootWithoutSysAdminFallsBackToAUserNamespace(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		t.Skip("no setpriv")
	}
	a, _ := workspaces(t)
	// Like a container without CAP_SYS_ADMIN: plain namespaces are refused to root.
	r := run(t, a, opts{wrap: []string{setpriv, "--bounding-set", "-sys_admin", "--inh-caps=-all"}, flags: []string{"--uid", "200050"},
		command: "id -u; grep -E '^Cap(Eff|Bnd)' /proc/self/status; hostname; probe socket netlink; echo hi > f && echo wrote"})
	mustExit0(t, r)
	contains(t, r.stdout, "200050\n", "CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "sandbox", "socket netlink: EPERM", "wrote")
	if !r.status.Isolation.UserNamespace || r.status.Isolation.UID != 200050 {
		t.Errorf("%+v", r.status.Isolation)
	}
}

func TestProbeReportsWhatThisHostGives(t *testing.T) {
	out, err := exec.Command(bin, "probe").Output()
	if err != nil {
		t.Fatal(err)
	}
	var p probeResult
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	if p.ABI < 1 || !p.Namespaces || !p.Proc || !p.Seccomp || !p.UIDSwitch || p.Limits == "" {
		t.Fatalf("%s", out)
	}
	cmd := exec.Command(bin, "probe")
	cmd.Env = []string{"SHELLCTL_FORCE_ABI=2", "SHELLCTL_FORCE_NO_NAMESPACES=1", "SHELLCTL_FORCE_RLIMITS=1"}
	out, _ = cmd.Output()
	json.Unmarshal(out, &p)
	if p.ABI != 2 || p.Namespaces || p.Limits != "rlimits" {
		t.Fatalf("forced: %s", out)
	}
}

// ---- process lifetime ------------------------------------------------------------------------

// hostPids finds `sleep <marker>` processes from the host: pids written from inside would be the
// PID namespace's.
func hostPids(marker string) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.HasPrefix(string(b), "sleep\x00") && strings.Contains(string(b), marker) && alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !isZombie(st)
}

func TestTimeLimitKillsTheWholeTreeIncludingEscapedSessions(t *testing.T) {
	a, _ := workspaces(t)
	r := run(t, a, opts{flags: []string{"--timeout-ms", "400"}, command: "sleep 30.0101 >/dev/null 2>&1 & (setsid sleep 31.0101 >/dev/null 2>&1 &); sleep 32.0101"})
	if r.code != exitTimeout || r.status.Status != "timeout" || r.status.Limit != "wall_clock" {
		t.Fatalf("%d %+v", r.code, r.status)
	}
	if pids := hostPids(".0101"); len(pids) > 0 {
		t.Errorf("pids %v survived the time limit", pids)
	}
}

func TestBackgroundJobsDoNotOutliveTheCommand(t *testing.T) {
	a, _ := workspaces(t)
	r := run(t, a, opts{command: "(setsid sleep 30.0202 >/dev/null 2>&1 &); sleep 0.2; echo done"})
	if r.code != 0 || !strings.Contains(r.stdout, "done") {
		t.Fatalf("%d %+v", r.code, r.status)
	}
	if pids := hostPids(".0202"); len(pids) > 0 {
		t.Errorf("background pids %v outlived the command", pids)
	}
}

func TestSigtermKillsTheCommand(t *testing.T) {
	a, _ := workspaces(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("deploy-token"), 0o600)
	cmd := exec.Command(bin, "exec", "--workspace", a, "--token-file", tokenFile, "--", "/bin/bash", "-c", "sleep 30.0303 & echo started > started; wait")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "SHELLCTL_TOKEN=deploy-token"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(hostPids(".0303")) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("command did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	cmd.Wait()
	if cmd.ProcessState.ExitCode() != exitKilled {
		t.Fatalf("exit %d", cmd.ProcessState.ExitCode())
	}
	if pids := hostPids(".0303"); len(pids) > 0 {
		t.Errorf("pids %v survived SIGTERM", pids)
	}
}
