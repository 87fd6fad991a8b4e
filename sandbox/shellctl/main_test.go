package main

// The helper as the agent backend uses it: a real binary, real Landlock, real processes.

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

var bin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "shellctl-test-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "shellctl")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	code           int
	stdout, stderr string
	status         status
}

type opts struct {
	token   string
	env     []string
	flags   []string
	command string
}

func run(t *testing.T, ws string, o opts) result {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("deploy-token\n"), 0o600)
	token := o.token
	if token == "" {
		token = "deploy-token"
	}
	args := append([]string{"exec", "--workspace", ws, "--token-file", tokenFile, "--status-fd", "3"}, o.flags...)
	args = append(args, "--", "/bin/bash", "-c", o.command)
	cmd := exec.Command(bin, args...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin", "SHELLCTL_TOKEN=" + token}, o.env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	sr, sw, _ := os.Pipe()
	cmd.ExtraFiles = []*os.File{sw}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sw.Close()
	var st status
	raw, _ := readAll(sr)
	_ = json.Unmarshal(bytes.TrimSpace(raw), &st)
	_ = cmd.Wait()
	return result{code: cmd.ProcessState.ExitCode(), stdout: stdout.String(), stderr: stderr.String(), status: st}
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

func TestWorkspaceIsReadWriteAndEverythingPrivateIsDenied(t *testing.T) {
	a, b := workspaces(t)
	repo, _ := filepath.Abs("../..")
	r := run(t, a, opts{command: fmt.Sprintf(`echo hello > note.txt && cat note.txt
cat /etc/shadow; echo "shadow=$?"
cat %s/secret.txt; echo "other=$?"
cat %s/package.json; echo "repo=$?"
ls /root; echo "root=$?"
ls /tmp; echo "tmp=$?"
cat /etc/passwd > /dev/null; echo "passwd=$?"`, b, repo)})
	if r.code != 0 || r.status.Status != "exited" || !r.status.Isolated {
		t.Fatalf("unexpected end: %d %+v %s", r.code, r.status, r.stderr)
	}
	for _, want := range []string{"hello", "shadow=1", "other=1", "repo=1", "root=2", "tmp=2", "passwd=0"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if !strings.Contains(r.stderr, "Permission denied") {
		t.Errorf("expected permission errors, got:\n%s", r.stderr)
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

func TestNoLandlockRefusesUnlessIsolationIsOff(t *testing.T) {
	a, _ := workspaces(t)
	r := run(t, a, opts{env: []string{"SHELLCTL_FORCE_NO_LANDLOCK=1"}, command: "touch ran"})
	if r.code != exitSandbox || r.status.Status != "sandbox_error" || !strings.Contains(r.status.Message, "Landlock is not available") {
		t.Fatalf("%d %+v", r.code, r.status)
	}
	if _, err := os.Stat(filepath.Join(a, "ran")); err == nil {
		t.Fatal("the command ran unconfined")
	}
	off := run(t, a, opts{env: []string{"SHELLCTL_FORCE_NO_LANDLOCK=1"}, flags: []string{"--no-isolation"}, command: "touch ran; cat /etc/hostname >/dev/null && echo unconfined"})
	if off.code != 0 || off.status.Isolated || !strings.Contains(off.stdout, "unconfined") {
		t.Fatalf("%d %+v %s", off.code, off.status, off.stderr)
	}
}

func TestBadRulesetAbortsBeforeTheCommand(t *testing.T) {
	a, _ := workspaces(t)
	r := run(t, a, opts{flags: []string{"--ro", "/does/not/exist"}, command: "touch ran"})
	if r.code != exitSandbox || !strings.Contains(r.status.Message, "Landlock setup failed") {
		t.Fatalf("%d %+v", r.code, r.status)
	}
	if _, err := os.Stat(filepath.Join(a, "ran")); err == nil {
		t.Fatal("the command ran although the ruleset failed")
	}
}

func alive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !isZombie(st)
}

func pidsIn(t *testing.T, file string) []int {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		n, _ := strconv.Atoi(f)
		out = append(out, n)
	}
	return out
}

func TestTimeLimitKillsTheWholeTreeIncludingEscapedSessions(t *testing.T) {
	a, _ := workspaces(t)
	r := run(t, a, opts{flags: []string{"--timeout-ms", "400"}, command: "sleep 30 >/dev/null 2>&1 & echo $! > pids; (setsid sleep 31 >/dev/null 2>&1 & echo $! >> pids); sleep 32"})
	if r.code != exitTimeout || r.status.Status != "timeout" {
		t.Fatalf("%d %+v", r.code, r.status)
	}
	for _, pid := range pidsIn(t, filepath.Join(a, "pids")) {
		if alive(pid) {
			t.Errorf("pid %d survived the time limit", pid)
		}
	}
}

func TestBackgroundJobsDoNotOutliveTheCommand(t *testing.T) {
	a, _ := workspaces(t)
	r := run(t, a, opts{command: "(setsid sleep 30 >/dev/null 2>&1 & echo $! > pids); sleep 0.2; echo done"})
	if r.code != 0 || !strings.Contains(r.stdout, "done") {
		t.Fatalf("%d %+v", r.code, r.status)
	}
	for _, pid := range pidsIn(t, filepath.Join(a, "pids")) {
		if alive(pid) {
			t.Errorf("background pid %d outlived the command", pid)
		}
	}
}

func TestSigtermKillsTheCommand(t *testing.T) {
	a, _ := workspaces(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte("deploy-token"), 0o600)
	cmd := exec.Command(bin, "exec", "--workspace", a, "--token-file", tokenFile, "--", "/bin/bash", "-c", "sleep 30 & echo $! > pids; wait")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "SHELLCTL_TOKEN=deploy-token"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if b, _ := os.ReadFile(filepath.Join(a, "pids")); len(bytes.TrimSpace(b)) > 0 {
			break
		}
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
	for _, pid := range pidsIn(t, filepath.Join(a, "pids")) {
		if alive(pid) {
			t.Errorf("pid %d survived SIGTERM", pid)
		}
	}
}

func TestTcpConnectOnlyToAllowedPorts(t *testing.T) {
	a, _ := workspaces(t)
	allowed, _ := net.Listen("tcp", "127.0.0.1:0")
	denied, _ := net.Listen("tcp", "127.0.0.1:0")
	defer allowed.Close()
	defer denied.Close()
	pa := allowed.Addr().(*net.TCPAddr).Port
	pd := denied.Addr().(*net.TCPAddr).Port
	r := run(t, a, opts{flags: []string{"--allow-connect", strconv.Itoa(pa)}, command: fmt.Sprintf(
		"(exec 3<>/dev/tcp/127.0.0.1/%d) && echo allowed-ok; (exec 3<>/dev/tcp/127.0.0.1/%d) 2>/dev/null && echo denied-ok || echo denied-refused", pa, pd)})
	if !strings.Contains(r.stdout, "allowed-ok") || !strings.Contains(r.stdout, "denied-refused") {
		t.Fatalf("stdout: %s\nstderr: %s", r.stdout, r.stderr)
	}
}
