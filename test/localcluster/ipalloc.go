// Pod IPs: unique in the cluster (two model servers cannot bind one IP:port), from a 127.P/16
// block of this cluster's own, so two local clusters on one machine never share an address.

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"k8s.io/apimachinery/pkg/types"
)

// podNetwork holds the second octet of this cluster's pod block, 127.P.0.0/16, locked for
// the life of the process so a second cluster picks another one.
type podNetwork struct {
	octet int
	lock  *os.File
}

// claimPodNetwork takes the block stored in the data dir if no other process holds it,
// else the first free one from 127.16/16, and stores the choice so a restart keeps it.
func claimPodNetwork(dataDir string) (*podNetwork, error) {
	return claimNetwork(dataDir, "pod-network")
}

// claimNetwork is claimPodNetwork for the block stored in the data dir's file name: the pod
// and Service networks of every cluster on the machine draw from the same locks.
func claimNetwork(dataDir, name string) (*podNetwork, error) {
	file := filepath.Join(dataDir, name)
	try := func(octet int) (*podNetwork, bool) {
		f, err := os.OpenFile(filepath.Join(os.TempDir(), fmt.Sprintf("localcluster-podnet-127.%d.lock", octet)), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, false
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			return nil, false
		}
		return &podNetwork{octet: octet, lock: f}, true
	}
	if b, err := os.ReadFile(file); err == nil {
		if o, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && o >= 16 && o < 255 {
			if n, ok := try(o); ok {
				return n, nil
			}
		}
	}
	for o := 16; o < 255; o++ {
		if n, ok := try(o); ok {
			return n, os.WriteFile(file, []byte(strconv.Itoa(o)), 0o600)
		}
	}
	return nil, fmt.Errorf("no free pod network 127.16-254.0.0/16 (locks in %s)", os.TempDir())
}

// ipAllocator hands out the block's addresses, one per pod, resuming a pod's address from
// its status after a restart.
type ipAllocator struct {
	mu     sync.Mutex
	prefix string // "127.P."
	next   int    // next candidate host number, 1..65534 (x.y from its two bytes)
	byUID  map[types.UID]string
	owner  map[string]types.UID
}

func newIPAllocator(octet int) *ipAllocator {
	return &ipAllocator{prefix: fmt.Sprintf("127.%d.", octet), next: 1, byUID: map[types.UID]string{}, owner: map[string]types.UID{}}
}

// assign returns the pod's address: the one it has, else prev (its status's podIP) if no
// other pod holds it, else the next free one.
func (a *ipAllocator) assign(uid types.UID, prev string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ip, ok := a.byUID[uid]; ok {
		return ip
	}
	if prev != "" && strings.HasPrefix(prev, "127.") {
		if _, taken := a.owner[prev]; !taken {
			a.take(uid, prev)
			return prev
		}
	}
	for i := 0; i < 65534; i++ {
		n := a.next
		a.next = a.next%65534 + 1
		if n&0xff == 0 || n&0xff == 0xff {
			continue
		}
		ip := fmt.Sprintf("%s%d.%d", a.prefix, n>>8, n&0xff)
		if _, taken := a.owner[ip]; !taken {
			a.take(uid, ip)
			return ip
		}
	}
	return "" // 65k pods on one cluster: the caller reports it
}

func (a *ipAllocator) take(uid types.UID, ip string) {
	a.byUID[uid] = ip
	a.owner[ip] = uid
}

func (a *ipAllocator) release(uid types.UID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ip, ok := a.byUID[uid]; ok {
		delete(a.owner, ip)
		delete(a.byUID, uid)
	}
}
