package payload

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/azdispatch/azdispatch/internal/wire"

	"github.com/azdispatch/azdispatch/internal/allocs"
)

// readerOverhead bounds what a Reader allocates whatever it reads: the gzip
// state (its window and tables, and a gzip header's extra field of up to
// 64 KiB) and the line buffer.
const readerOverhead = 256 << 10

// FuzzFrames feeds the frame reader the expanded (gunzipped) stream of a
// payload blob under small limits, so that the fuzzer reaches them. Within
// MaxExpandedSize the reader agrees with the format's definition (frameModel)
// item for item and on how the stream ends; past it, it stops with at most
// one byte of look-ahead read. A frame that claims more than MaxItemSize is
// refused before anything is allocated for it. What a listener reads, a
// publisher with the same limits writes, and reads back the same.
func FuzzFrames(f *testing.F) {
	for _, s := range []string{
		wire.ItemsMagic,
		wire.ItemsMagic + "0\n",
		wire.ItemsMagic + "5\nhello2\n{}",
		wire.ItemsMagic + "3\na\nb" + "0\n",
		wire.ItemsMagic + "005\nhello+2\nab",
		wire.ItemsMagic + "5\nhel",
		wire.ItemsMagic + "5",
		wire.ItemsMagic + "-1\n",
		wire.ItemsMagic + "1073741824\n",
		wire.ItemsMagic + "99999999999999999999\n",
		wire.ItemsMagic + strings.Repeat("1", 40) + "\n",
		strings.Replace(wire.ItemsMagic, "/1\n", "/2\n", 1) + "1\na", // a version this reader does not know
		"",
	} {
		f.Add([]byte(s), uint16(1024), uint16(4096))
	}
	f.Add([]byte(wire.ItemsMagic+"3\nabc3\ndef"), uint16(2), uint16(64))    // an item over MaxItemSize
	f.Add([]byte(wire.ItemsMagic+"3\nabc3\ndef"), uint16(1024), uint16(22)) // stream over MaxExpandedSize
	f.Fuzz(func(t *testing.T, content []byte, maxItem, maxExpanded uint16) {
		// Not parallel: other work would count in the allocation bound.
		lim := Limits{MaxBlobSize: 1 << 30, MaxExpandedSize: 1 + int64(maxExpanded), MaxItemSize: 1 + int(maxItem), MaxItems: 1 << 30}
		data := gzipBytes(t, content)
		want, wantErr := frameModel(content, lim.MaxItemSize)

		var got []string
		var err error
		spent := allocs.Bytes(func() { got, err = readItems(data, lim) })
		// Each item is allocated twice (bytes, then string); a frame whose
		// item is cut short may have allocated up to MaxItemSize first.
		assert.LessOrEqual(t, spent, uint64(readerOverhead+24*len(content)+2*lim.MaxItemSize), "allocated reading %d bytes", len(content))
		for _, it := range got {
			assert.LessOrEqual(t, len(it), lim.MaxItemSize)
		}

		if int64(len(content)) > lim.MaxExpandedSize {
			require.Error(t, err, "a stream past MaxExpandedSize is refused")
			assert.True(t, errors.Is(err, ErrTooLarge) || errors.Is(wantErr, ErrCorrupt) && errors.Is(err, ErrCorrupt), "%v (the format says %v)", err, wantErr)
			require.LessOrEqual(t, len(got), len(want))
			assert.Equal(t, want[:len(got)], got, "items before the bound are read as they are")
			if len(got) > 0 {
				assert.LessOrEqual(t, framedSize(got), lim.MaxExpandedSize+1, "no more than one byte read past the bound")
			}
			if _, serr := SingleText(data, lim); wantErr == nil && len(want) == 1 {
				assert.ErrorIs(t, serr, ErrTooLarge, "one item past the bound is too large, not corrupt")
			} else {
				assert.True(t, errIsOneOf(serr, ErrCorrupt, ErrTooLarge), "%v", serr)
			}
			return
		}
		assert.Equal(t, want, got)
		assertSameFault(t, wantErr, err)
		largest, scanned := Scan(data, len(want), lim)
		assertSameFault(t, wantErr, scanned)
		if scanned == nil {
			longest := 0
			for _, w := range want {
				longest = max(longest, len(w))
			}
			assert.Equal(t, longest, largest, "Scan's largest item")
		}
		text, serr := SingleText(data, lim)
		if wantErr == nil && len(want) == 1 {
			require.NoError(t, serr)
			assert.Equal(t, want[0], text)
		} else {
			assert.True(t, errIsOneOf(serr, ErrCorrupt, ErrTooLarge), "%v", serr)
		}
		if wantErr != nil {
			return
		}
		assert.ErrorIs(t, scanErr(data, len(want)+1, lim), ErrCorrupt, "the pointer says one item more than the blob holds")
		if len(want) > 0 {
			assert.ErrorIs(t, scanErr(data, len(want)-1, lim), ErrCorrupt, "the pointer says one item fewer than the blob holds")
		}

		// A publisher with the same limits writes what was read: its
		// canonical frames are never longer than the ones read.
		w := NewWriter(lim)
		for _, it := range want {
			require.NoError(t, w.Add(it))
		}
		blob, err := w.Finish()
		require.NoError(t, err)
		again, err := readItems(blob, lim)
		require.NoError(t, err)
		assert.Equal(t, want, again)
	})
}

// FuzzFramesBlob feeds the frame reader whole blobs, gzip and all. Whatever
// the bytes, reading fails only with ErrCorrupt or ErrTooLarge, inflates no
// more than one byte past MaxExpandedSize, returns no item over MaxItemSize,
// and allocates within a bound set by the limits, not by what the bytes
// claim. Scan and SingleText agree with reading item by item.
func FuzzFramesBlob(f *testing.F) {
	for _, s := range []string{wire.ItemsMagic, wire.ItemsMagic + "5\nhello0\n", wire.ItemsMagic + "1073741824\n"} {
		f.Add(gzipped(f, s))
	}
	two := append(gzipped(f, wire.ItemsMagic+"1\na"), gzipped(f, "1\nb")...)
	f.Add(two) // gzip members concatenated read as one stream
	f.Add(append(gzipped(f, wire.ItemsMagic), "junk"...))
	f.Add(gzipped(f, wire.ItemsMagic+"1000000\n"+strings.Repeat("\x00", 1000000))) // a bomb of 1 KiB
	f.Add([]byte("not gzip"))
	f.Add([]byte{})
	lim := Limits{MaxBlobSize: 1 << 30, MaxExpandedSize: 64 << 10, MaxItemSize: 4 << 10, MaxItems: 1 << 30}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Not parallel: other work would count in the allocation bound.
		var items, size int
		var err error
		spent := allocs.Bytes(func() {
			var fr *Reader
			if fr, err = NewReader(data, lim); err != nil {
				return
			}
			size = len(wire.ItemsMagic)
			for {
				var it string
				if it, err = fr.Next(false); err != nil {
					break
				}
				require.LessOrEqual(t, len(it), lim.MaxItemSize)
				items++
				size += len(strconv.Itoa(len(it))) + 1 + len(it)
			}
		})
		assert.LessOrEqual(t, spent, uint64(readerOverhead+2*len(data)+3*int(lim.MaxExpandedSize)+2*lim.MaxItemSize))
		assert.LessOrEqual(t, int64(size), lim.MaxExpandedSize+1)
		if err == io.EOF {
			err = nil
		}
		if err != nil {
			assert.True(t, errIsOneOf(err, ErrCorrupt, ErrTooLarge), "%v", err)
		}
		assertSameFault(t, err, scanErr(data, items, lim))
		if _, serr := SingleText(data, lim); err == nil && items == 1 {
			assert.NoError(t, serr)
		} else {
			assert.True(t, errIsOneOf(serr, ErrCorrupt, ErrTooLarge), "%v", serr)
		}
	})
}

// frameModel reads the expanded stream of a payload blob by the format's
// definition (the items header, then frames of a decimal length, a newline
// and that many bytes), bounding only the item size. It returns the items
// and how the stream ends: nil, ErrCorrupt or ErrTooLarge.
func frameModel(content []byte, maxItem int) ([]string, error) {
	items := []string{}
	rest, ok := bytes.CutPrefix(content, []byte(wire.ItemsMagic))
	if !ok {
		return items, ErrCorrupt
	}
	for len(rest) > 0 {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 || i+1 > maxLengthLine {
			return items, ErrCorrupt
		}
		n, err := strconv.ParseInt(string(rest[:i]), 10, 64)
		switch {
		case err != nil || n < 0:
			return items, ErrCorrupt
		case n > int64(maxItem):
			return items, ErrTooLarge
		}
		rest = rest[i+1:]
		if int64(len(rest)) < n {
			return items, ErrCorrupt
		}
		items = append(items, string(rest[:n]))
		rest = rest[n:]
	}
	return items, nil
}

// readItems reads every item of a payload blob.
func readItems(data []byte, lim Limits) ([]string, error) {
	items := []string{}
	fr, err := NewReader(data, lim)
	if err != nil {
		return items, err
	}
	for {
		it, err := fr.Next(false)
		if err == io.EOF {
			return items, nil
		}
		if err != nil {
			return items, err
		}
		items = append(items, it)
	}
}

// framedSize is the expanded size of a payload of items, written canonically.
func framedSize(items []string) int64 {
	n := int64(len(wire.ItemsMagic))
	for _, it := range items {
		n += int64(len(strconv.Itoa(len(it))) + 1 + len(it))
	}
	return n
}

// gzipBytes stores b in a gzip stream without compressing it, with no
// checks, as a hostile writer could. Storing keeps the fuzzer fast: a
// compressing writer costs more than the reading under test.
func gzipBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	gz := storingGzip.Get().(*gzip.Writer)
	defer storingGzip.Put(gz)
	var buf bytes.Buffer
	gz.Reset(&buf)
	_, err := gz.Write(b)
	require.NoError(t, err)
	require.NoError(t, gz.Close())
	return buf.Bytes()
}

// storingGzip holds gzip writers that store rather than compress: making one
// allocates hundreds of KiB, resetting one costs little.
var storingGzip = sync.Pool{New: func() any {
	gz, _ := gzip.NewWriterLevel(nil, gzip.NoCompression) // a valid level does not fail
	return gz
}}

// assertSameFault checks that got fails as want does: not at all, or with
// an error matching the same one of ErrCorrupt and ErrTooLarge.
func assertSameFault(t *testing.T, want, got error) {
	t.Helper()
	switch {
	case want == nil:
		assert.NoError(t, got)
	case errors.Is(want, ErrTooLarge):
		assert.ErrorIs(t, got, ErrTooLarge)
	default:
		assert.ErrorIs(t, got, ErrCorrupt)
	}
}

// errIsOneOf reports whether err matches one of targets.
func errIsOneOf(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// A frame that claims 1 GiB under the default limits is refused before
// anything is allocated for it.
func TestReaderRefusesAHugeFrameBeforeAllocatingIt(t *testing.T) {
	// Not parallel: other tests' allocations would count.
	data := gzipped(t, wire.ItemsMagic+"1073741824\nabc")
	var err error
	spent := allocs.Bytes(func() { _, err = SingleText(data, defaultLimits(t)) })
	assert.ErrorIs(t, err, ErrTooLarge)
	assert.Less(t, spent, uint64(readerOverhead), "allocated %d bytes", spent)
}
