package azdispatch

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestScaleByDepth(t *testing.T) {
	tests := []struct {
		per, depth, want int
	}{
		{32, 0, 0},
		{32, 1, 1},
		{32, 32, 1},
		{32, 33, 2},
		{32, 2000, 63},
		{32, -5, 0}, // a depth read that went wrong never asks for fewer than none
		{0, 7, 7},   // a zero batch size counts one per message
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, ScaleByDepth(tt.per)(State{}, tt.depth), "per %d depth %d", tt.per, tt.depth)
	}
}
