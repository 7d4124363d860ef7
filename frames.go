package azdispatch

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// A payload blob is gzip of a header line and one frame per item: the item's
// encoded text preceded by its length in bytes, in decimal, and a newline.
// Lengths rather than separators, because item text may hold anything a
// codec produces (newlines under Raw), and because a reader can refuse an
// oversized item before allocating it.
const framesHeader = "azdispatch-items/1\n"

// maxLengthLine bounds a frame's length line: 20 digits and a newline.
const maxLengthLine = 21

// frameWriter builds a payload blob in memory, enforcing limits as it goes.
type frameWriter struct {
	buf      bytes.Buffer
	gz       *gzip.Writer
	lim      PayloadLimits
	expanded int64
	items    int
}

func newFrameWriter(lim PayloadLimits) *frameWriter {
	w := &frameWriter{lim: lim}
	w.gz = gzip.NewWriter(&w.buf)
	_, _ = w.gz.Write([]byte(framesHeader)) // a bytes.Buffer does not fail
	w.expanded = int64(len(framesHeader))
	return w
}

// add appends one item's encoded text.
func (w *frameWriter) add(text string) error {
	if len(text) > w.lim.MaxItemSize {
		return fmt.Errorf("%w: item %d is %d bytes, more than MaxItemSize %d", ErrPayloadTooLarge, w.items, len(text), w.lim.MaxItemSize)
	}
	if w.items >= w.lim.MaxItems {
		return fmt.Errorf("%w: more than MaxItems %d items", ErrPayloadTooLarge, w.lim.MaxItems)
	}
	head := strconv.Itoa(len(text)) + "\n"
	w.expanded += int64(len(head) + len(text))
	if w.expanded > w.lim.MaxExpandedSize {
		return fmt.Errorf("%w: more than MaxExpandedSize %d bytes uncompressed", ErrPayloadTooLarge, w.lim.MaxExpandedSize)
	}
	_, _ = io.WriteString(w.gz, head)
	_, _ = io.WriteString(w.gz, text)
	w.items++
	return nil
}

// finish returns the blob's bytes.
func (w *frameWriter) finish() ([]byte, error) {
	_ = w.gz.Close()
	if int64(w.buf.Len()) > w.lim.MaxBlobSize {
		return nil, fmt.Errorf("%w: %d bytes compressed, more than MaxBlobSize %d", ErrPayloadTooLarge, w.buf.Len(), w.lim.MaxBlobSize)
	}
	return w.buf.Bytes(), nil
}

// frameReader streams the items of a payload blob. It never holds more than
// one item, and it stops with ErrPayloadTooLarge as soon as the expanded size
// or an item's declared length passes the limits, so a gzip bomb costs at
// most MaxExpandedSize of decompression and no memory.
type frameReader struct {
	r     *bufio.Reader
	lim   PayloadLimits
	count *boundedReader
}

func newFrameReader(data []byte, lim PayloadLimits) (*frameReader, error) {
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: gzip: %v", ErrPayloadCorrupt, err)
	}
	br := &boundedReader{r: gz, left: lim.MaxExpandedSize}
	fr := &frameReader{r: bufio.NewReader(br), lim: lim, count: br}
	head := make([]byte, len(framesHeader))
	if _, err := io.ReadFull(fr.r, head); err != nil || string(head) != framesHeader {
		return nil, fr.fault(err, "no items header")
	}
	return fr, nil
}

// next returns the next item's text; skip, if set, discards it instead
// (returning ""). It returns io.EOF after the last item.
func (fr *frameReader) next(skip bool) (string, error) {
	line, err := fr.r.ReadSlice('\n')
	if err == io.EOF && len(line) == 0 {
		return "", io.EOF
	}
	if err != nil || len(line) > maxLengthLine {
		return "", fr.fault(err, "bad length line")
	}
	n, perr := strconv.ParseInt(string(line[:len(line)-1]), 10, 64)
	if perr != nil || n < 0 {
		return "", fr.fault(nil, fmt.Sprintf("bad length %q", line[:len(line)-1]))
	}
	if n > int64(fr.lim.MaxItemSize) {
		return "", fmt.Errorf("%w: an item of %d bytes, more than MaxItemSize %d", ErrPayloadTooLarge, n, fr.lim.MaxItemSize)
	}
	if skip {
		if _, err := io.CopyN(io.Discard, fr.r, n); err != nil {
			return "", fr.fault(err, "truncated item")
		}
		return "", nil
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(fr.r, b); err != nil {
		return "", fr.fault(err, "truncated item")
	}
	return string(b), nil
}

// fault turns a read error into ErrPayloadTooLarge when the bound was hit,
// and into ErrPayloadCorrupt otherwise.
func (fr *frameReader) fault(err error, what string) error {
	if errors.Is(err, errExpandedTooLarge) || fr.count.left < 0 {
		return fmt.Errorf("%w: more than MaxExpandedSize %d bytes uncompressed", ErrPayloadTooLarge, fr.lim.MaxExpandedSize)
	}
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %s: %v", ErrPayloadCorrupt, what, err)
	}
	return fmt.Errorf("%w: %s", ErrPayloadCorrupt, what)
}

// scanFrames checks a whole payload before any of it is handled: the gzip
// stream, every frame, the limits, and that it holds exactly items items.
// It decodes nothing and keeps nothing, so it costs CPU, not memory; a
// payload that fails is poisoned whole, before its first item runs.
func scanFrames(data []byte, items int, lim PayloadLimits) error {
	fr, err := newFrameReader(data, lim)
	if err != nil {
		return err
	}
	for i := 0; ; i++ {
		_, err := fr.next(true)
		if err == io.EOF {
			if i != items {
				return fmt.Errorf("%w: %d items, the pointer says %d", ErrPayloadCorrupt, i, items)
			}
			return nil
		}
		if err != nil {
			return err
		}
		if i >= items {
			return fmt.Errorf("%w: more items than the pointer's %d", ErrPayloadCorrupt, items)
		}
	}
}

var errExpandedTooLarge = errors.New("expanded size limit reached")

// boundedReader fails once more than left bytes have been read through it.
type boundedReader struct {
	r    io.Reader
	left int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errExpandedTooLarge
	}
	// Read one byte past the bound, so that a stream of exactly the bound
	// passes and a longer one is caught.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, errExpandedTooLarge
	}
	return n, err
}
