// Package netx reads network errors the same way on every platform.
package netx

import "net"

// UnusedAddr returns a loopback address where nothing listens: a port just
// bound and closed again. Tests point clients at it for a refused
// connection; another process could bind it meanwhile, which the ports the
// kernel hands out make unlikely.
func UnusedAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}
