// Package netx reads network errors the same way on every platform.
package netx
