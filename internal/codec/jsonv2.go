//go:build goexperiment.jsonv2

package codec

// jsonV2 tells whether encoding/json runs on encoding/json/v2
// (GOEXPERIMENT=jsonv2): it does in this build, whose decoding calls
// methods PooledJSON does not know to be safe, so no decoder is kept.
const jsonV2 = true
