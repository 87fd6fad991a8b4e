package main

// `shellctl probe`: what this host gives, found by trying (a child in the namespaces, a fresh /proc, a cgroup).

import (
	"os"

	"golang.org/x/sys/unix"
)

type probeResult struct {
	ABI           int    `json:"abi"`
	Namespaces    bool   `json:"namespaces"`
	UserNamespace bool   `json:"user_namespace"`
	Seccomp       bool   `json:"seccomp"`
	Limits        string `json:"limits"`
	UIDSwitch     bool   `json:"uid_switch"`
	// A fresh /proc mounts in the command's PID namespace. A container's masked /proc (Docker's default, Kubernetes'
	// procMount Default) refuses it, and every command would fail at its setup (docs/deploying.md).
	Proc bool `json:"proc"`
}

const (
	probeOK       = 0
	probeNoSwitch = 3
	probeNoProc   = 4
)

func probe() probeResult {
	r := probeResult{ABI: landlockABI(), Seccomp: seccompSupported(), Limits: probeCgroups()}
	if namespacesForcedOff() {
		return r
	}
	euid := os.Geteuid()
	id := identity{uid: euid, gid: os.Getegid(), userns: euid != 0}
	if euid == 0 {
		id.uid, id.gid, id.switchUID, id.setgroups = defaultID, defaultID, true, true
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return r
	}
	defer null.Close()
	proc, err := startStage([]string{"shellctl", "__probe"}, "/", []string{}, []*os.File{null, null, null}, true, &id)
	if err != nil {
		return r
	}
	st, err := proc.Wait()
	if err != nil {
		return r
	}
	code := st.ExitCode()
	r.Namespaces = code == probeOK || code == probeNoSwitch || code == probeNoProc
	r.UserNamespace = r.Namespaces && id.userns
	r.Proc = code == probeOK || code == probeNoSwitch
	r.UIDSwitch = code == probeOK && id.switchUID
	return r
}

// probeChild runs in the namespaces: a private mount tree, the hostname, a fresh /proc over its own (what the
// sandbox's root gets; the mount tree is private, so nothing outside sees it), and (as root) the uid switch.
func probeChild() {
	if unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "") != nil || unix.Sethostname([]byte(sandboxHostname)) != nil {
		os.Exit(1)
	}
	if unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "") != nil {
		os.Exit(probeNoProc)
	}
	if os.Geteuid() == 0 {
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, defaultID, defaultID, defaultID); e != 0 {
			os.Exit(probeNoSwitch)
		}
		os.Exit(probeOK)
	}
	os.Exit(probeNoSwitch)
}
