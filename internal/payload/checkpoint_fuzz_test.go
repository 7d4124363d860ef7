package payload

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzDoneSetMerge feeds a checkpoint, which anyone who can write the blob's
// metadata writes, to a batch's DoneSet that already holds some items. The
// set then holds exactly the items it held and those of the checkpoint's
// valid in-range ranges (doneModel); it encodes canonically within its
// budget, under-reporting but never over-reporting; and merging is
// idempotent.
func FuzzDoneSetMerge(f *testing.F) {
	f.Add(uint16(1000), []byte{}, "0-499,502,504-999")
	f.Add(uint16(10), []byte{}, "x,3-1,-4,5-,9-12,10,2-3,7")
	f.Add(uint16(200), []byte{0, 1, 2, 63, 64, 65, 130}, "60-70,128-191")
	f.Add(uint16(128), []byte{}, "0-127,0-127,+5,05-06,1--2,,")
	f.Add(uint16(64), []byte{63}, "0-62")
	f.Add(uint16(0), []byte{}, "0")
	f.Add(uint16(5), []byte{}, "0-9223372036854775807,-9223372036854775808-1,99999999999999999999")
	f.Add(uint16(60000), []byte{}, strings.Repeat("1,", 3000))
	f.Fuzz(func(t *testing.T, n uint16, adds []byte, text string) {
		t.Parallel()
		s := NewDoneSet(int(n))
		model := make([]bool, n)
		for i := 0; n > 0 && i+1 < len(adds); i += 2 {
			item := (int(adds[i])<<8 | int(adds[i+1])) % int(n)
			s.Add(item)
			model[item] = true
		}
		s.Merge(text)
		doneModel(model, text)
		count := 0
		for i, done := range model {
			require.Equal(t, done, s.Has(i), "item %d", i)
			if done {
				count++
			}
		}
		assert.Equal(t, count, s.Len())

		enc := s.Encode()
		assert.LessOrEqual(t, len(enc), MaxCheckpointText)
		full := encodeModel(model)
		if len(full) <= MaxCheckpointText {
			assert.Equal(t, full, enc)
		} else {
			// Left out at the end, whole ranges at a time.
			assert.True(t, strings.HasPrefix(full, enc+","), "%q is not where %q stops at a range", enc, full)
		}
		r := NewDoneSet(int(n))
		r.Merge(enc)
		for i, done := range model {
			if r.Has(i) && !done {
				t.Fatalf("item %d was never done but its checkpoint says so", i)
			}
		}
		assert.Equal(t, enc, r.Encode(), "an encoding reads back as itself")

		s.Merge(text)
		assert.Equal(t, count, s.Len(), "merging again adds nothing")
	})
}

// doneModel marks in done the items of a checkpoint's ranges by their
// definition: "a" or "a-b", decimal integers with 0 ≤ a ≤ b < len(done), any
// other range ignored.
func doneModel(done []bool, text string) {
	if text == "" {
		return
	}
	for _, r := range strings.Split(text, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		z, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || a < 0 || z < a || z >= len(done) {
			continue
		}
		for i := a; i <= z; i++ {
			done[i] = true
		}
	}
}

// encodeModel writes done as ranges of consecutive items, without a budget.
func encodeModel(done []bool) string {
	var parts []string
	for i := 0; i < len(done); i++ {
		if !done[i] {
			continue
		}
		j := i
		for j+1 < len(done) && done[j+1] {
			j++
		}
		if j > i {
			parts = append(parts, strconv.Itoa(i)+"-"+strconv.Itoa(j))
		} else {
			parts = append(parts, strconv.Itoa(i))
		}
		i = j
	}
	return strings.Join(parts, ",")
}
