package azurite

import "fmt"

// Pause stops the emulator's process without ending it (SIGSTOP on Unix):
// connections to it are accepted by the kernel and then hang, every request
// waiting for an answer that does not come until Resume, as an account
// behind a blackholed connection does in production. It fails on Windows,
// and for an external or stopped instance.
func (i *Instance) Pause() error { return i.signal((*procGroup).pause) }

// Resume lets a paused emulator run again.
func (i *Instance) Resume() error { return i.signal((*procGroup).resume) }

func (i *Instance) signal(f func(*procGroup) error) error {
	if i.external {
		return fmt.Errorf("azurite: an external account cannot be paused")
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.halted {
		return fmt.Errorf("azurite: the emulator has been stopped")
	}
	return f(i.group)
}
