package azurite

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// clockPreload replaces Node's Date in the emulator's process with one
// whose "now" is the real one plus the offset (in milliseconds) written in
// the file AZDISPATCH_AZURITE_CLOCK names. Azurite takes every time it
// reports (the Date header, insertion, expiry and next-visible times,
// Last-Modified) from Date, so this moves the service's clock while the
// test process keeps its own, from the very first request; the Date of its
// error answers, which Node's HTTP server writes, is moved too. The file is
// read again at most every 20 ms, so a test can move the clock while the
// emulator runs.
const clockPreload = `'use strict';
const fs = require('fs');
const file = process.env.AZDISPATCH_AZURITE_CLOCK;
const RealDate = Date;
let offset = 0, readAt = -Infinity;
function skew() {
  const t = RealDate.now();
  if (t - readAt > 20) {
    readAt = t;
    try { offset = Number(fs.readFileSync(file, 'utf8')) || 0; } catch (e) { /* keep the last */ }
  }
  return offset;
}
function SkewedDate(...args) {
  if (!new.target) return new RealDate(RealDate.now() + skew()).toString();
  if (args.length === 0) return Reflect.construct(RealDate, [RealDate.now() + skew()], new.target);
  return Reflect.construct(RealDate, args, new.target);
}
SkewedDate.prototype = RealDate.prototype;
Object.setPrototypeOf(SkewedDate, RealDate);
SkewedDate.now = () => RealDate.now() + skew();
SkewedDate.parse = RealDate.parse;
SkewedDate.UTC = RealDate.UTC;
global.Date = SkewedDate;
// Node's HTTP server writes the Date header of an answer Azurite does not
// date itself (its errors) from a clock the preload cannot reach; the
// service dates every answer, errors too, so this does here.
const http = require('http');
const writeHead = http.ServerResponse.prototype.writeHead;
http.ServerResponse.prototype.writeHead = function (...args) {
  if (!this.headersSent && !this.hasHeader('date')) this.setHeader('Date', new SkewedDate().toUTCString());
  return writeHead.apply(this, args);
};
`

// envClockFile names the file the preload reads the offset from.
const envClockFile = "AZDISPATCH_AZURITE_CLOCK"

// writeClock writes the preload into dir and the offset beside it, and
// returns the environment the emulator needs to run on the moved clock.
func writeClock(dir string, offset time.Duration) (env []string, file string, err error) {
	preload := filepath.Join(dir, "clock.js")
	file = filepath.Join(dir, "clock-offset")
	if err := os.WriteFile(preload, []byte(clockPreload), 0o600); err != nil {
		return nil, "", fmt.Errorf("azurite: %w", err)
	}
	if err := writeOffset(file, offset); err != nil {
		return nil, "", err
	}
	// A path with spaces must be quoted inside NODE_OPTIONS.
	return []string{"NODE_OPTIONS=--require " + strconv.Quote(preload), envClockFile + "=" + file}, file, nil
}

// writeOffset replaces the offset the preload reads, whole, so that a
// read never sees half a number.
func writeOffset(file string, offset time.Duration) error {
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.FormatInt(offset.Milliseconds(), 10)), 0o600); err != nil {
		return fmt.Errorf("azurite: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		return fmt.Errorf("azurite: %w", err)
	}
	return nil
}

// SetClockOffset moves the emulator's clock to the real time plus offset
// (within 20 ms). It fails for an instance not started with
// Options.ClockOffset set, and for an external one.
func (i *Instance) SetClockOffset(offset time.Duration) error {
	if i.clockFile == "" {
		return fmt.Errorf("azurite: SetClockOffset needs an instance started with Options.ClockOffset")
	}
	return writeOffset(i.clockFile, offset)
}
