// A network namespace of a child process, bridged to this one on loopback: KServe's manager
// binds its webhook server to every interface (only the port is a flag), so it runs in a
// namespace of its own whose only interface is its loopback, and the bench carries the few
// connections it needs across.

package main

import (
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"syscall"
)

// netns opens sockets inside another process's network namespace from one OS thread that
// entered it; every other thread of the bench stays where it was.
type netns struct {
	calls chan func()
}

// enterNetns starts the thread that lives in pid's network namespace.
func enterNetns(pid int) (*netns, error) {
	n := &netns{calls: make(chan func())}
	errc := make(chan error, 1)
	go func() {
		// Never unlocked: the runtime ends the thread with this goroutine rather than hand a
		// thread in the wrong namespace to other goroutines.
		runtime.LockOSThread()
		fd, err := syscall.Open(fmt.Sprintf("/proc/%d/ns/net", pid), syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		_, _, e := syscall.RawSyscall(sysSetns, uintptr(fd), syscall.CLONE_NEWNET, 0)
		syscall.Close(fd)
		if e != 0 {
			errc <- fmt.Errorf("setns: %w", e)
			return
		}
		errc <- nil
		for f := range n.calls {
			f()
		}
	}()
	return n, <-errc
}

// close ends the namespace's thread.
func (n *netns) close() { close(n.calls) }

// do runs f on the namespace's thread.
func (n *netns) do(f func()) {
	done := make(chan struct{})
	n.calls <- func() { f(); close(done) }
	<-done
}

// listen opens a TCP listener at addr inside the namespace.
func (n *netns) listen(addr string) (ln net.Listener, err error) {
	n.do(func() { ln, err = net.Listen("tcp", addr) })
	return
}

// dial connects to addr inside the namespace.
func (n *netns) dial(addr string) (c net.Conn, err error) {
	n.do(func() { c, err = net.Dial("tcp", addr) })
	return
}

// forward accepts on ln until it is closed and joins each connection to one from dial.
func forward(ln net.Listener, dial func() (net.Conn, error)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			d, err := dial()
			if err != nil {
				return
			}
			defer d.Close()
			var wg sync.WaitGroup
			wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				_, _ = io.Copy(dst, src)
				// Pass the half-close on, so a request-then-EOF peer still gets its answer.
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
			}
			go pipe(d, c)
			go pipe(c, d)
			wg.Wait()
		}()
	}
}
