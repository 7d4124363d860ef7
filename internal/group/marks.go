package group

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/azdispatch/azdispatch/internal/blobs"
)

// maxBlob bounds the read of one of a group's blobs: a head of a full
// group's shard marks with their children's results, or a shard's marks
// several times over, stays well under it.
const maxBlob = 64 << 20

// definition is a head's first block: the group as created.
type definition struct {
	Size   int    `json:"size"`
	Rule   string `json:"rule"`
	Shards int    `json:"shards"`
	Then   []byte `json:"then,omitempty"`
	// Made tells this group from an earlier one of its ID, swept since:
	// drawn at random by its creator (see Done.Made).
	Made string `json:"made,omitempty"`
}

// same reports whether d and o define one group: a creator that runs
// again writes the same, but for Made, which the first one's holds.
func (d definition) same(o definition) bool {
	return d.Size == o.Size && d.Rule == o.Rule && d.Shards == o.Shards && bytes.Equal(d.Then, o.Then)
}

// check refuses a definition no Spec gives (a head altered by hand, or
// not this package's).
func (d definition) check() error {
	switch {
	case len(d.Rule) != 1 || !Rule(d.Rule[0]).valid():
		return fmt.Errorf("rule %q", d.Rule)
	case d.Size < 1 || d.Size > MaxChildren:
		return fmt.Errorf("%d children", d.Size)
	case d.Shards != shardsFor(d.Size):
		return fmt.Errorf("%d shards for %d children", d.Shards, d.Size)
	}
	return nil
}

func (d definition) encode() ([]byte, error) {
	return line(block{Def: &d})
}

// Child is what became of one child.
type Child struct {
	Index  int    `json:"i"`
	Failed bool   `json:"f,omitempty"`
	Reason string `json:"w,omitempty"` // why it failed
	Result []byte `json:"r,omitempty"` // what it left for the continuation
}

// block is one block of a group's blob, a line of JSON: the definition
// (a head's first), a child's finish, or a complete shard's children
// (a sharded head's).
type block struct {
	Def   *definition `json:"d,omitempty"`
	Child *Child      `json:"c,omitempty"`
	Shard *shardDone  `json:"s,omitempty"`
	// Continued marks a head whose continuation was sent: a finish that
	// finds the group complete after it reports nothing.
	Continued bool `json:"n,omitempty"`
}

// continued reports whether blocks hold a Continued mark.
func continued(blocks []block) bool {
	for _, b := range blocks {
		if b.Continued {
			return true
		}
	}
	return false
}

// shardDone is a shard found complete, with what its children left.
type shardDone struct {
	K        int     `json:"k"`
	Children []Child `json:"c"`
}

// line is b as a block: JSON escapes every newline inside it, so one
// ends each block, and concatenated blocks split back at them. HTML's
// characters are left as they are, so that a text is at most twice its
// length as a block (a quote or backslash escaped), as the bounds need.
func line(b block) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(b); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil // Encode ends it with a newline
}

// errNoDefinition: a head without its definition block yet (its
// creator died between the two requests, or is between them now).
var errNoDefinition = errors.New("the group's definition is not written yet")

// read reads one of a group's blobs, bounded, and returns its blocks.
func (s *Store) read(ctx context.Context, name string) ([]block, error) {
	blocks, _, err := s.readWithInfo(ctx, name)
	return blocks, err
}

// readWithInfo is read, with what the answer said of the blob.
func (s *Store) readWithInfo(ctx context.Context, name string) ([]block, blobs.Info, error) {
	r, info, err := s.b.Read(ctx, name)
	if errors.Is(err, blobs.ErrNotFound) {
		return nil, info, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return nil, info, fmt.Errorf("group blob %s: %w", name, err)
	}
	defer r.Close()
	sc := bufio.NewScanner(io.LimitReader(r, maxBlob+1))
	sc.Buffer(make([]byte, 0, 64<<10), maxBlob)
	var out []block
	read := 0
	for sc.Scan() {
		read += len(sc.Bytes()) + 1
		var b block
		if err := json.Unmarshal(sc.Bytes(), &b); err != nil {
			return nil, info, fmt.Errorf("%w: %s: block %d: %w", ErrCorrupt, name, len(out), err)
		}
		out = append(out, b)
	}
	if err := sc.Err(); err != nil {
		return nil, info, fmt.Errorf("group blob %s: %w", name, err)
	}
	if read > maxBlob {
		return nil, info, fmt.Errorf("%w: %s holds more than %d bytes", ErrCorrupt, name, maxBlob)
	}
	return out, info, nil
}

// readHead reads a group's head: its definition, from its metadata or its
// first block, and its marks.
func (s *Store) readHead(ctx context.Context, id string) (definition, []block, error) {
	blocks, info, err := s.readWithInfo(ctx, s.head(id))
	if err != nil {
		return definition{}, nil, err
	}
	if text, ok := info.Metadata[metaDefinition]; ok {
		var def definition
		data, err := base64.StdEncoding.DecodeString(text)
		if err == nil {
			err = json.Unmarshal(data, &def)
		}
		if err != nil {
			return definition{}, nil, fmt.Errorf("%w: group %s: its definition: %w", ErrCorrupt, id, err)
		}
		return def, blocks, nil
	}
	if len(blocks) == 0 || blocks[0].Def == nil {
		return definition{}, nil, fmt.Errorf("group %s: %w", id, errNoDefinition)
	}
	return *blocks[0].Def, blocks[1:], nil
}

// metaDefinition names the head's metadata entry that holds the group's
// definition, when it fits (see inlineDefinition).
const metaDefinition = "groupdef"

// inlineDefinition is the longest definition, encoded, kept in the head's
// metadata, which must all fit in 8 KiB: one that does makes the group in
// one request; a longer one takes the head's first block.
const inlineDefinition = 6 << 10

// inline returns d's metadata entry, and whether it fits.
func (d definition) inline() (string, bool) {
	data, err := json.Marshal(d)
	if err != nil {
		return "", false
	}
	text := base64.StdEncoding.EncodeToString(data)
	return text, len(text) <= inlineDefinition
}

// tally is the best finish of each child among marks: a success over a
// failure, so that a child requeued after it failed, and then succeeded,
// counts as succeeded; of two of a kind, the first, unless a later one
// carries what it lacks. A child delivered twice, and handled twice, keeps
// the result or reason of its first record, which a continuation may
// have read already; a finish recorded again on a later delivery without
// the handler's result or the poisoning's reason leaves the earlier one's,
// and fills it in if the earlier one had none.
func tally(marks []block) map[int]Child {
	best := map[int]Child{}
	for _, b := range marks {
		if b.Child == nil {
			continue
		}
		c := *b.Child
		old, ok := best[c.Index]
		if !ok || old.Failed && !c.Failed || old.Failed == c.Failed && saysMore(c, old) {
			best[c.Index] = c
		}
	}
	return best
}

// saysMore reports whether a, of the same kind as b, carries what b lacks:
// a success's result, a failure's reason.
func saysMore(a, b Child) bool {
	if a.Failed {
		return a.Reason != "" && b.Reason == ""
	}
	return len(a.Result) > 0 && len(b.Result) == 0
}

// complete reports whether children, the best finishes of a blob whose
// children are want, complete it under rule.
func complete(children map[int]Child, want []int, rule Rule) bool {
	for _, i := range want {
		c, ok := children[i]
		if !ok || rule == OnSuccess && c.Failed {
			return false
		}
	}
	return true
}

// sorted is children in index order.
func sorted(children map[int]Child) []Child {
	out := make([]Child, 0, len(children))
	for _, c := range children {
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Child) int { return a.Index - b.Index })
	return out
}
