package payload

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/azdispatch/azdispatch/internal/wire"
)

// A payload blob is gzip of a header line and one frame per item: the item's
// encoded text preceded by its length in bytes, in decimal, and a newline.
// Lengths rather than separators, because item text may hold anything a
// codec produces (newlines under a raw codec), and because a reader can
// refuse an oversized item before allocating it. The header line is
// wire.ItemsMagic: package wire owns every prefix a text or a blob starts
// with.

// maxLengthLine bounds a frame's length line: 20 digits and a newline.
const maxLengthLine = 21

// Writer builds a payload blob in memory, enforcing its limits as it goes,
// so that a publisher refuses a payload a listener with the same limits
// would poison. It is not safe for concurrent use.
type Writer struct {
	buf      bytes.Buffer
	gz       *gzip.Writer
	lim      Limits
	expanded int64
	items    int
}

// NewWriter returns a Writer of a payload of no items yet, bounded by lim
// (which must have no zero field: see Limits.WithDefaults).
func NewWriter(lim Limits) *Writer {
	w := &Writer{lim: lim}
	w.gz = gzip.NewWriter(&w.buf)
	_, _ = w.gz.Write([]byte(wire.ItemsMagic)) // a bytes.Buffer does not fail
	w.expanded = int64(len(wire.ItemsMagic))
	return w
}

// Add appends one item's encoded text. It fails with ErrTooLarge, adding
// nothing, when the item is over MaxItemSize, or would be one more than
// MaxItems or take the payload past MaxExpandedSize.
func (w *Writer) Add(text string) error {
	if len(text) > w.lim.MaxItemSize {
		return &LimitError{Limit: "MaxItemSize", What: fmt.Sprintf("item %d", w.items), Size: int64(len(text)), Max: int64(w.lim.MaxItemSize)}
	}
	if w.items >= w.lim.MaxItems {
		return &LimitError{Limit: "MaxItems", What: "the batch", Size: int64(w.items + 1), Max: int64(w.lim.MaxItems)}
	}
	head := strconv.Itoa(len(text)) + "\n"
	if w.expanded+int64(len(head)+len(text)) > w.lim.MaxExpandedSize {
		return &LimitError{Limit: "MaxExpandedSize", What: "the payload uncompressed", Size: w.expanded + int64(len(head)+len(text)), Max: w.lim.MaxExpandedSize}
	}
	w.expanded += int64(len(head) + len(text))
	_, _ = io.WriteString(w.gz, head) // a bytes.Buffer does not fail
	_, _ = io.WriteString(w.gz, text)
	w.items++
	return nil
}

// Items returns how many items have been added.
func (w *Writer) Items() int { return w.items }

// Finish ends the payload and returns the blob's bytes; nothing may be added
// after it. It fails with ErrTooLarge when the compressed blob is over
// MaxBlobSize.
func (w *Writer) Finish() ([]byte, error) {
	_ = w.gz.Close() // a bytes.Buffer does not fail
	if int64(w.buf.Len()) > w.lim.MaxBlobSize {
		return nil, &LimitError{Limit: "MaxBlobSize", What: "the payload compressed", Size: int64(w.buf.Len()), Max: w.lim.MaxBlobSize}
	}
	return w.buf.Bytes(), nil
}

// Reader streams the items of a payload blob. It never holds more than one
// item, and it stops with ErrTooLarge as soon as the expanded size or an
// item's declared length passes the limits, so a gzip bomb costs at most
// MaxExpandedSize of decompression and no memory. It is not safe for
// concurrent use.
type Reader struct {
	r     *bufio.Reader
	lim   Limits
	count *boundedReader
}

// NewReader starts reading the payload blob data, bounded by lim (which must
// have no zero field). It fails with ErrCorrupt when data is not gzip or
// does not start with the items header.
func NewReader(data []byte, lim Limits) (*Reader, error) {
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: gzip: %v", ErrCorrupt, err)
	}
	br := &boundedReader{r: gz, left: lim.MaxExpandedSize}
	fr := &Reader{r: bufio.NewReader(br), lim: lim, count: br}
	head := make([]byte, len(wire.ItemsMagic))
	if _, err := io.ReadFull(fr.r, head); err != nil || string(head) != wire.ItemsMagic {
		return nil, fr.fault(err, "no items header")
	}
	return fr, nil
}

// Next returns the next item's text; skip, if set, discards it instead
// (returning ""). It returns io.EOF after the last item, and otherwise
// errors that match ErrCorrupt or ErrTooLarge.
func (fr *Reader) Next(skip bool) (string, error) {
	if skip {
		_, err := fr.skip()
		return "", err
	}
	n, err := fr.length()
	if err != nil {
		return "", err
	}
	// Read straight into the string's own bytes: an item may be many
	// megabytes, and a []byte converted to a string would be a second copy.
	var b strings.Builder
	b.Grow(int(n))
	if k, err := io.CopyN(&b, fr.r, n); err != nil || k != n {
		return "", fr.fault(err, "truncated item")
	}
	return b.String(), nil
}

// skip discards the next item and returns its size.
func (fr *Reader) skip() (int, error) {
	n, err := fr.length()
	if err != nil {
		return 0, err
	}
	if _, err := io.CopyN(io.Discard, fr.r, n); err != nil {
		return 0, fr.fault(err, "truncated item")
	}
	return int(n), nil
}

// length reads the next item's length line, within MaxItemSize.
func (fr *Reader) length() (int64, error) {
	line, err := fr.r.ReadSlice('\n')
	if err == io.EOF && len(line) == 0 {
		return 0, io.EOF
	}
	if err != nil || len(line) > maxLengthLine {
		return 0, fr.fault(err, "bad length line")
	}
	n, perr := strconv.ParseInt(string(line[:len(line)-1]), 10, 64)
	if perr != nil || n < 0 {
		return 0, fr.fault(nil, fmt.Sprintf("bad length %q", line[:len(line)-1]))
	}
	if n > int64(fr.lim.MaxItemSize) {
		return 0, &LimitError{Limit: "MaxItemSize", What: "an item", Size: n, Max: int64(fr.lim.MaxItemSize)}
	}
	return n, nil
}

// fault turns a read error into ErrTooLarge when the bound was hit, and
// into ErrCorrupt otherwise.
func (fr *Reader) fault(err error, what string) error {
	if errors.Is(err, errExpandedTooLarge) || fr.count.left < 0 {
		return &LimitError{Limit: "MaxExpandedSize", What: "the payload uncompressed", Max: fr.lim.MaxExpandedSize}
	}
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: %s: %v", ErrCorrupt, what, err)
	}
	return fmt.Errorf("%w: %s", ErrCorrupt, what)
}

// Scan checks a whole payload before any of it is handled: the gzip stream,
// every frame, the limits, and that it holds exactly items items. It decodes
// nothing and keeps nothing, so it costs CPU, not memory; a payload that
// fails is poisoned whole, before its first item runs. It returns the size
// of the largest item, the most one item's text takes once read. Errors
// match ErrCorrupt or ErrTooLarge.
func Scan(data []byte, items int, lim Limits) (largest int, err error) {
	fr, err := NewReader(data, lim)
	if err != nil {
		return 0, err
	}
	for i := 0; ; i++ {
		n, err := fr.skip()
		if err == io.EOF {
			if i != items {
				return 0, fmt.Errorf("%w: %d items, the pointer says %d", ErrCorrupt, i, items)
			}
			return largest, nil
		}
		if err != nil {
			return 0, err
		}
		if i >= items {
			return 0, fmt.Errorf("%w: more items than the pointer's %d", ErrCorrupt, items)
		}
		largest = max(largest, n)
	}
}

// SingleText reads the one item of a single payload. Errors match
// ErrCorrupt (also for no item or more than one) or ErrTooLarge.
func SingleText(data []byte, lim Limits) (string, error) {
	fr, err := NewReader(data, lim)
	if err != nil {
		return "", err
	}
	text, err := fr.Next(false)
	if err == io.EOF {
		return "", fmt.Errorf("%w: no item", ErrCorrupt)
	}
	if err != nil {
		return "", err
	}
	// Whatever fails after the item is reported as it is: the reader may
	// read one byte past MaxExpandedSize into the item, and the error that
	// follows then says the payload is too large, not that it holds a
	// second item.
	switch _, err := fr.Next(true); {
	case err == io.EOF:
		return text, nil
	case err != nil:
		return "", err
	}
	return "", fmt.Errorf("%w: more than one item in a single payload", ErrCorrupt)
}

// errExpandedTooLarge is boundedReader's error once its bound is passed.
var errExpandedTooLarge = errors.New("expanded size limit reached")

// boundedReader fails once more than left bytes have been read through it.
type boundedReader struct {
	r    io.Reader
	left int64
}

// Read reads from the underlying reader, failing with errExpandedTooLarge
// once the bound is passed.
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
