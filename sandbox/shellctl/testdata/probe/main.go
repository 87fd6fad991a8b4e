// probe: escape attempts for shellctl's tests, one per subcommand, each printing what the kernel said.
package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

func result(err error) string {
	if err == nil {
		return "ok"
	}
	if e, ok := err.(syscall.Errno); ok {
		return unix.ErrnoName(e)
	}
	return err.Error()
}

func main() {
	args := os.Args[1:]
	switch args[0] {
	case "socket":
		fam := map[string]int{"packet": unix.AF_PACKET, "netlink": unix.AF_NETLINK, "vsock": unix.AF_VSOCK, "unix": unix.AF_UNIX, "inet": unix.AF_INET, "inet6": unix.AF_INET6}[args[1]]
		typ := unix.SOCK_RAW
		if args[1] == "unix" || args[1] == "inet" || args[1] == "inet6" || args[1] == "vsock" {
			typ = unix.SOCK_STREAM
		}
		fd, err := unix.Socket(fam, typ, 0)
		if err == nil {
			unix.Close(fd)
		}
		fmt.Printf("socket %s: %s\n", args[1], result(err))
	case "mknod":
		// char device 1:3 (/dev/null), then a FIFO
		fmt.Printf("mknod char: %s\n", result(unix.Mknod(args[1], unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3)))))
		fmt.Printf("mknod block: %s\n", result(unix.Mknod(args[1]+".b", unix.S_IFBLK|0o666, int(unix.Mkdev(7, 0)))))
		fmt.Printf("mknod fifo: %s\n", result(unix.Mkfifo(args[1]+".fifo", 0o666)))
	case "sethostname":
		fmt.Printf("sethostname: %s\n", result(unix.Sethostname([]byte(args[1]))))
	case "syscalls":
		fmt.Printf("unshare(NEWUSER): %s\n", result(unix.Unshare(unix.CLONE_NEWUSER)))
		fmt.Printf("unshare(NEWNET): %s\n", result(unix.Unshare(unix.CLONE_NEWNET)))
		_, _, e := unix.RawSyscall(unix.SYS_CLONE, unix.CLONE_NEWUSER|uintptr(unix.SIGCHLD), 0, 0)
		fmt.Printf("clone(NEWUSER): %s\n", result(errnoOf(e)))
		_, _, e = unix.RawSyscall(unix.SYS_CLONE3, 0, 0, 0)
		fmt.Printf("clone3: %s\n", result(errnoOf(e)))
		fmt.Printf("setns: %s\n", result(unix.Setns(0, 0)))
		_, _, e = unix.RawSyscall(unix.SYS_BPF, 0, 0, 0)
		fmt.Printf("bpf: %s\n", result(errnoOf(e)))
		_, _, e = unix.RawSyscall6(unix.SYS_PERF_EVENT_OPEN, 0, 0, 0, 0, 0, 0)
		fmt.Printf("perf_event_open: %s\n", result(errnoOf(e)))
		fmt.Printf("ptrace: %s\n", result(unix.PtraceAttach(1)))
		_, err := unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_SESSION_KEYRING, 0, 0, 0)
		fmt.Printf("keyctl: %s\n", result(err))
		fmt.Printf("mount: %s\n", result(unix.Mount("tmpfs", "/tmp", "tmpfs", 0, "")))
		_, _, e = unix.RawSyscall(unix.SYS_USERFAULTFD, 0, 0, 0)
		fmt.Printf("userfaultfd: %s\n", result(errnoOf(e)))
		_, _, e = unix.RawSyscall(unix.SYS_IO_URING_SETUP, 1, 0, 0)
		fmt.Printf("io_uring_setup: %s\n", result(errnoOf(e)))
		_, _, e = unix.RawSyscall(unix.SYS_INIT_MODULE, 0, 0, 0)
		fmt.Printf("init_module: %s\n", result(errnoOf(e)))
	case "tcp":
		c, err := net.DialTimeout("tcp", args[1], time.Second)
		if err == nil {
			c.Close()
			fmt.Println("tcp: connected")
		} else {
			fmt.Println("tcp: failed:", err)
		}
	case "udp":
		c, err := net.Dial("udp", args[1])
		if err == nil {
			_, err = c.Write([]byte(args[2]))
		}
		fmt.Println("udp:", result(err))
	case "unix":
		c, err := net.Dial("unix", args[1])
		if err != nil {
			fmt.Println("unix: failed:", err)
			return
		}
		c.Write([]byte(args[2]))
		buf := make([]byte, 100)
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		n, _ := c.Read(buf)
		fmt.Printf("unix: reply %q\n", buf[:n])
	case "forks":
		n, _ := strconv.Atoi(args[1])
		started := 0
		var ferr error
		for i := 0; i < n; i++ {
			if _, err := syscall.ForkExec("/bin/sleep", []string{"sleep", "20"}, &syscall.ProcAttr{}); err != nil {
				ferr = err
				break
			}
			started++
		}
		fmt.Printf("forks: started %d, then %s\n", started, result(ferr))
	case "alloc":
		mb, _ := strconv.Atoi(args[1])
		var keep [][]byte
		for i := 0; i < mb; i++ {
			b := make([]byte, 1<<20)
			for j := range b {
				b[j] = byte(j)
			}
			keep = append(keep, b)
		}
		fmt.Printf("alloc: done %d MiB\n", len(keep))
	}
}

func errnoOf(e syscall.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}
