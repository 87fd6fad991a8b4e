package main

// `shellctl probe`: what this host gives, found by trying (a child in the namespaces, a cgroup).

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
}

const (
	probeOK       = 0
	probeNoSwitch = 3
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
	r.Namespaces = code == probeOK || code == probeNoSwitch
	r.UserNamespace = r.Namespaces && id.userns
	r.UIDSwitch = code == probeOK && id.switchUID
	return r
}

// probeChild runs in the namespaces: a private mount tree, the hostname, and (as root) the uid switch.
func probeChild() {
	if unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "") != nil || unix.Sethostname([]byte(sandboxHostname)) != nil {
		os.Exit(1)
	}
	if os.Geteuid() == 0 {
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, defaultID, defaultID, defaultID); e != 0 {
			os.Exit(probeNoSwitch)
		}
		os.Exit(probeOK)
	}
	os.Exit(probeNoSwitch)
}
