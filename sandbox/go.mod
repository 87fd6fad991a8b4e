module difyagent/sandbox

go 1.26.0

require (
	github.com/elastic/go-seccomp-bpf v1.6.0
	github.com/landlock-lsm/go-landlock v0.11.2
	golang.org/x/net v0.41.0
	golang.org/x/sys v0.49.0
)

require kernel.org/pub/linux/libs/security/libcap/psx v1.2.78 // indirect
